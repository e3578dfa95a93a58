package cuda

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"tofuc/internal/convcase"
	"tofuc/internal/fakecuda"
	"tofuc/internal/gemmcase"
	"tofuc/runtime/executor"
	"tofuc/runtime/plan"
)

// TestCUBLASGEMM: cuBLAS's products through the binding, over random
// extents and layouts (row- and column-major operands and result,
// padded rows, batch strides), equal a float64 loop within f32's error
// bound, on logical devices of either GPU: on the fake driver's two
// GPUs with the fake cuBLAS (internal/fakecuda), and on the real
// driver's with the real cuBLAS where there is one.
func TestCUBLASGEMM(t *testing.T) {
	for _, gpus := range []string{"2", "cuda"} {
		t.Run(gpus, func(t *testing.T) {
			devs := openFake(t, gpus, 3)
			lib := "" // the real one, from the library path
			if gpus != "cuda" {
				var err error
				if lib, err = fakecuda.BuildCUBLAS(t.TempDir()); err != nil {
					t.Skip(err)
				}
			}
			t.Setenv("TOFUC_LIBCUBLAS", lib)
			if _, err := loadCUBLAS(); err != nil {
				t.Skip(err)
			}
			checkGEMMs(t, devs)
		})
	}
}

// checkGEMMs runs 40 random products on the devices in turn.
func checkGEMMs(t *testing.T, devs []executor.Device) {
	r := rand.New(rand.NewPCG(3, 4))
	for trial := range 40 {
		dev := devs[trial%len(devs)]
		tc := gemmcase.Random(r, plan.CUBLAS)
		out, err := onDevice(dev, &plan.Step{Op: plan.Library, GEMM: tc.Call}, tc.Bufs)
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		if err := tc.Check(out); err != nil {
			t.Fatalf("trial %d on %s: %v", trial, dev.Name(), err)
		}
	}
}

// TestCUDNNConv: cuDNN's convolutions through the binding, over random
// extents, groups (depthwise among them), strides, dilations, equal
// pads and offsets in one to three spatial dimensions, equal their
// definition in float64 within f32's error bound, on logical devices
// of either GPU: on the fake driver's two GPUs with the fake cuDNN, and
// on the real driver's with the real cuDNN where there is one.
func TestCUDNNConv(t *testing.T) {
	for _, gpus := range []string{"2", "cuda"} {
		t.Run(gpus, func(t *testing.T) {
			devs := openFake(t, gpus, 3)
			lib := ""
			if gpus != "cuda" {
				var err error
				if lib, err = fakecuda.BuildCUDNN(t.TempDir()); err != nil {
					t.Skip(err)
				}
			}
			t.Setenv("TOFUC_LIBCUDNN", lib)
			if _, err := loadCUDNN(); err != nil {
				t.Skip(err)
			}
			r := rand.New(rand.NewPCG(5, 6))
			for trial := range 40 {
				tc := convcase.Random(r, plan.CUDNN, trial, true)
				out, err := onDevice(devs[trial%len(devs)], &plan.Step{Op: plan.Library, Conv: tc.Call}, tc.Bufs)
				if err != nil {
					t.Fatalf("trial %d: %v", trial, err)
				}
				if err := tc.Check(out); err != nil {
					t.Fatalf("trial %d: %v", trial, err)
				}
			}
		})
	}
}

// onDevice runs library step s on dev with operands bufs (uploaded to
// buffers of their own) and returns the last buffer after it.
func onDevice(dev executor.Device, s *plan.Step, bufs [3][]float32) ([]float32, error) {
	var ptrs [3]executor.Ptr
	for i, buf := range bufs {
		p, err := dev.Alloc(int64(4 * len(buf)))
		if err != nil {
			return nil, err
		}
		defer dev.Free(p)
		if err := dev.Upload(p, floatBytes(buf), executor.Whole(int64(4*len(buf)))); err != nil {
			return nil, err
		}
		ptrs[i] = p
	}
	if err := dev.(executor.StreamLibraryDevice).Library(s, ptrs[:]); err != nil {
		return nil, err
	}
	if err := dev.Sync(); err != nil {
		return nil, err
	}
	out := slices.Clone(bufs[2])
	return out, dev.Download(floatBytes(out), ptrs[2], executor.Whole(int64(4*len(out))))
}

// TestAlgoPerfLayout: algoPerf has cudnnConvolutionFwdAlgoPerf_t's
// layout (cudnn_cnn.h: two enums, a float, a size_t, two enums, three
// ints).
func TestAlgoPerfLayout(t *testing.T) {
	var p algoPerf
	if unsafe.Sizeof(p) != 48 || unsafe.Offsetof(p.memory) != 16 || unsafe.Offsetof(p.mathType) != 28 {
		t.Errorf("size %d, memory at %d, mathType at %d; want 48, 16, 28", unsafe.Sizeof(p), unsafe.Offsetof(p.memory), unsafe.Offsetof(p.mathType))
	}
}

// TestCUBLASRefusals: the GPU refuses a host library's step and a
// missing cuBLAS in one line.
func TestCUBLASRefusals(t *testing.T) {
	devs := openFake(t, "1", 1)
	sd := devs[0].(executor.StreamLibraryDevice)
	if err := sd.LoadLibrary("onednn"); err == nil || !strings.Contains(err.Error(), executor.ErrOtherDevice.Error()) {
		t.Errorf("onednn on a GPU: %v", err)
	}
	if _, err := openCUBLAS("/nonexistent/libcublas.so.12"); err == nil || strings.Contains(err.Error(), "\n") {
		t.Errorf("a missing cuBLAS: %v", err)
	}
}

func floatBytes(xs []float32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(xs))), 4*len(xs))
}
