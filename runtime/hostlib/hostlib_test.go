package hostlib

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"

	"tofuc/internal/gemmcase"
	"tofuc/runtime/plan"
)

// TestGEMM: every library's product, over random extents and layouts
// (row- and column-major operands and result, padded rows, batch
// strides), equals a float64 loop within f32's error bound for its K.
func TestGEMM(t *testing.T) {
	for _, name := range Names() {
		lib, err := Open(name)
		if err != nil {
			t.Logf("%s: skipped: %v", name, err)
			continue
		}
		t.Run(name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, 2))
			for trial := range 60 {
				checkGEMM(t, r, lib, trial)
			}
		})
	}
}

func checkGEMM(t *testing.T, r *rand.Rand, lib *Library, trial int) {
	tc := gemmcase.Random(r, lib.Name)
	out := slices.Clone(tc.Bufs[2])
	lib.GEMM(tc.Call, unsafe.Pointer(&tc.Bufs[0][0]), unsafe.Pointer(&tc.Bufs[1][0]), unsafe.Pointer(&out[0]))
	if err := tc.Check(out); err != nil {
		t.Fatalf("trial %d: %v", trial, err)
	}
}

// TestMissing: an unknown backend is an error listing the known ones.
func TestMissing(t *testing.T) {
	if _, err := Open("mkl"); err == nil {
		t.Fatal("Open(mkl) succeeded")
	}
}

// TestOneDNNThreads: oneDNN's OpenMP thread count is the calling
// thread's, so a call sets it there from SetThreads, whatever the thread
// had before.
func TestOneDNNThreads(t *testing.T) {
	lib, err := Open("onednn")
	if err != nil {
		t.Skip(err)
	}
	omp, err := purego.Dlopen("libgomp.so.1", purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		t.Skip(err)
	}
	var maxThreads func() int32
	var setThreads func(int32)
	purego.RegisterLibFunc(&maxThreads, omp, "omp_get_max_threads")
	purego.RegisterLibFunc(&setThreads, omp, "omp_set_num_threads")
	SetThreads(1)
	defer SetThreads(runtime.GOMAXPROCS(0))
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	setThreads(3)
	buf := make([]float32, 12)
	m := plan.Matrix{Row: 2, Col: 1}
	lib.GEMM(&plan.GEMMCall{Backend: "onednn", M: 2, N: 2, K: 2, A: m, B: m, C: plan.Matrix{Offset: 8, Row: 2, Col: 1}}, unsafe.Pointer(&buf[0]), unsafe.Pointer(&buf[0]), unsafe.Pointer(&buf[0]))
	if got := maxThreads(); got != 1 {
		t.Errorf("after a call with SetThreads(1), OpenMP's threads on the calling thread: %d", got)
	}
}
