package cuda

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unsafe"

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
		var ptrs [3]executor.Ptr
		for i, buf := range tc.Bufs {
			p, err := dev.Alloc(int64(4 * len(buf)))
			if err != nil {
				t.Fatal(err)
			}
			defer dev.Free(p)
			if err := dev.Upload(p, floatBytes(buf), executor.Whole(int64(4*len(buf)))); err != nil {
				t.Fatal(err)
			}
			ptrs[i] = p
		}
		if err := dev.(executor.StreamLibraryDevice).Library(&plan.Step{Op: plan.Library, GEMM: tc.Call}, ptrs[:]); err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		if err := dev.Sync(); err != nil {
			t.Fatal(err)
		}
		out := slices.Clone(tc.Bufs[2])
		if err := dev.Download(floatBytes(out), ptrs[2], executor.Whole(int64(4*len(out)))); err != nil {
			t.Fatal(err)
		}
		if err := tc.Check(out); err != nil {
			t.Fatalf("trial %d on %s: %v", trial, dev.Name(), err)
		}
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
