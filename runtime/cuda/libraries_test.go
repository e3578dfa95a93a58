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
			withLibrary(t, gpus, "TOFUC_LIBCUBLAS", fakecuda.BuildCUBLAS, func() error { _, err := cublasLib.load(); return err })
			checkGEMMs(t, devs)
		})
	}
}

// withLibrary makes runtime/cuda load, through env, the fake library
// build makes for the fake GPUs, or the real one from the library path
// for the real ones ("cuda"); it skips the test without a C compiler
// (built) or where load fails.
func withLibrary(t *testing.T, gpus, env string, build func(dir string) (string, error), load func() error) {
	t.Helper()
	lib := "" // the real one, from the library path
	if gpus != "cuda" {
		var err error
		lib, err = build(t.TempDir())
		built(t, err)
	}
	t.Setenv(env, lib)
	if err := load(); err != nil {
		t.Skip(err)
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
			withLibrary(t, gpus, "TOFUC_LIBCUDNN", fakecuda.BuildCUDNN, func() error { _, err := cudnnLib.load(); return err })
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

// TestCUDNNNoAlgorithm: a convolution for which cuDNN offers no
// algorithm is refused when prepared, every time, with cuDNN's reason,
// and nothing half-made is kept.
func TestCUDNNNoAlgorithm(t *testing.T) {
	devs := openFake(t, "1", 1)
	withLibrary(t, "1", "TOFUC_LIBCUDNN", fakecuda.BuildCUDNN, func() error { _, err := cudnnLib.load(); return err })
	t.Setenv("FAKECUDNN_NO_ALGORITHM", "1")
	tc := convcase.Random(rand.New(rand.NewPCG(7, 8)), plan.CUDNN, 1, true)
	s := &plan.Step{Op: plan.Library, Conv: tc.Call}
	for try := range 2 {
		err := devs[0].(executor.StreamLibraryDevice).PrepareLibrary(s)
		if err == nil || !strings.Contains(err.Error(), "cuDNN offers no algorithm") {
			t.Errorf("try %d: %v", try, err)
		}
		if n := len(devs[0].(*device).c.convs); n != 0 {
			t.Errorf("try %d: %d convolutions kept", try, n)
		}
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
	sd := dev.(executor.StreamLibraryDevice)
	if err := sd.PrepareLibrary(s); err != nil {
		return nil, err
	}
	if err := sd.Library(s, ptrs[:]); err != nil {
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
	t.Setenv("TOFUC_LIBCUBLAS", "/nonexistent/libcublas.so.12")
	if _, err := cublasLib.load(); err == nil || strings.Contains(err.Error(), "\n") || !strings.HasPrefix(err.Error(), "backend cublas: no cuBLAS (/nonexistent/libcublas.so.12: ") {
		t.Errorf("a missing cuBLAS: %v", err)
	}
	if err := sd.PrepareLibrary(&plan.Step{Op: plan.Library, GEMM: &plan.GEMMCall{Backend: plan.CUBLAS}}); err == nil {
		t.Error("a GEMM prepared without cuBLAS")
	}
}

func floatBytes(xs []float32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(xs))), 4*len(xs))
}
