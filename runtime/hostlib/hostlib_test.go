package hostlib

import (
	"fmt"
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
// strides), equals a float64 loop within f32's error bound for its K;
// with B held fixed by a binding too (oneDNN's matmul primitive, where
// it runs the layout).
func TestGEMM(t *testing.T) {
	for _, name := range Names() {
		lib, err := Open(name)
		if err != nil {
			t.Logf("%s: skipped: %v", name, err)
			continue
		}
		for _, w := range []Weights{{}, {Binding: 7}, {Binding: 7, A: true}} {
			t.Run(fmt.Sprintf("%s/%+v", name, w), func(t *testing.T) {
				r := rand.New(rand.NewPCG(1, 2))
				for trial := range 60 {
					tc := gemmcase.Random(r, lib.Name)
					checkGEMM(t, lib, tc, w, trial)
				}
			})
		}
	}
}

func checkGEMM(t *testing.T, lib *Library, tc gemmcase.Case, w Weights, trial int) {
	t.Helper()
	out := slices.Clone(tc.Bufs[2])
	if err := lib.GEMM(tc.Call, unsafe.Pointer(&tc.Bufs[0][0]), unsafe.Pointer(&tc.Bufs[1][0]), unsafe.Pointer(&out[0]), w); err != nil {
		t.Fatalf("trial %d: %v", trial, err)
	}
	if err := tc.Check(out); err != nil {
		t.Fatalf("trial %d: %v", trial, err)
	}
}

// TestMatmulWeights: oneDNN runs a product whose weights a binding
// holds as its matmul primitive where the result is row-major with the
// weights as B, or column-major with them as A (a linear layer's two
// orientations), and sgemm otherwise; the weights are reordered again
// for another binding number, and not for the same one; a program's
// hold keeps the primitive, with its reordered weights, between calls.
func TestMatmulWeights(t *testing.T) {
	lib, err := Open("onednn")
	if err != nil {
		t.Skip(err)
	}
	// A linear layer of 16 rows, 40 inputs and 24 outputs, twice (a
	// batch of two weights), its weights transposed as ONNX's Gemm has
	// them: C = X·Wᵀ, or Cᵀ = W·Xᵀ.
	rowMajor := &plan.GEMMCall{Backend: "onednn", M: 16, N: 24, K: 40, Batch: []int64{2},
		A: plan.Matrix{Row: 40, Col: 1, Batch: []int64{0}},
		B: plan.Matrix{Row: 1, Col: 40, Batch: []int64{40 * 24}},
		C: plan.Matrix{Offset: 3, Row: 30, Col: 1, Batch: []int64{30 * 16}}}
	colMajor := rowMajor.Transposed()
	for _, tc := range []struct {
		call *plan.GEMMCall
		a    bool
	}{{rowMajor, false}, {colMajor, true}} {
		checkMatmulWeights(t, lib, tc.call, tc.a)
	}
	for _, tc := range []struct {
		call *plan.GEMMCall
		a    bool
	}{{rowMajor, true}, {colMajor, false}} {
		release, err := lib.AcquireGEMM(tc.call, tc.a)
		if err != nil {
			t.Fatal(err)
		}
		if call, _, _, ok := lib.onMatmul(tc.call, nil, nil, tc.a); ok {
			t.Errorf("weights A %v, result %+v: offered to the matmul primitive as %+v", tc.a, tc.call.C, call)
		}
		release()
	}
	many := *rowMajor // more weight matrices than a primitive keeps
	many.Batch = []int64{maxKeptWeights + 1}
	if _, _, _, ok := lib.onMatmul(&many, nil, nil, false); ok {
		t.Errorf("%d weight matrices offered to one primitive, which keeps %d", maxKeptWeights+1, maxKeptWeights)
	}
	many.B.Batch = []int64{0} // one, broadcast
	if _, _, _, ok := lib.onMatmul(&many, nil, nil, false); !ok {
		t.Error("a weight matrix broadcast over the batch not offered to the matmul primitive")
	}
}

func checkMatmulWeights(t *testing.T, lib *Library, call *plan.GEMMCall, weightsA bool) {
	r := rand.New(rand.NewPCG(8, 9))
	lens := []int{40 * 16, 2 * 40 * 24}
	if weightsA {
		lens[0], lens[1] = lens[1], lens[0]
	}
	tc := gemmcase.Case{Call: call, Bufs: [3][]float32{randoms(r, lens[0]), randoms(r, lens[1]), randoms(r, 3+2*30*16)}}
	release, err := lib.AcquireGEMM(call, weightsA)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	key, _, _, _ := lib.onMatmul(call, nil, nil, weightsA)
	p := lib.dnnl.prims[matmulKey(key)]
	if p == nil || p.op == 0 {
		t.Fatalf("weights A %v: no matmul primitive: %+v", weightsA, p)
	}
	w := 1
	if weightsA {
		w = 0
	}
	checkGEMM(t, lib, tc, Weights{Binding: 1, A: weightsA}, 0)
	if len(p.weights) != 2 {
		t.Errorf("%d reordered weights kept for a batch of two entries", len(p.weights))
	}
	stale := slices.Clone(tc.Bufs[w])
	copy(tc.Bufs[w], randoms(r, len(tc.Bufs[w])))
	checkGEMM(t, lib, tc, Weights{Binding: 2, A: weightsA}, 1) // a new binding: reordered again
	out := slices.Clone(tc.Bufs[2])
	run := func(out []float32) {
		if err := lib.GEMM(call, unsafe.Pointer(&tc.Bufs[0][0]), unsafe.Pointer(&tc.Bufs[1][0]), unsafe.Pointer(&out[0]), Weights{Binding: 2, A: weightsA}); err != nil {
			t.Fatal(err)
		}
	}
	run(out)
	copy(tc.Bufs[w], stale) // the same binding: the weights kept, whatever the buffer holds now
	again := slices.Clone(tc.Bufs[2])
	run(again)
	if !slices.Equal(out, again) {
		t.Errorf("weights A %v: a call with the same binding reordered the weights again", weightsA)
	}
}

func randoms(r *rand.Rand, n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(r.NormFloat64())
	}
	return out
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
	if err := lib.GEMM(&plan.GEMMCall{Backend: "onednn", M: 2, N: 2, K: 2, A: m, B: m, C: plan.Matrix{Offset: 8, Row: 2, Col: 1}}, unsafe.Pointer(&buf[0]), unsafe.Pointer(&buf[0]), unsafe.Pointer(&buf[0]), Weights{}); err != nil {
		t.Fatal(err)
	}
	if got := maxThreads(); got != 1 {
		t.Errorf("after a call with SetThreads(1), OpenMP's threads on the calling thread: %d", got)
	}
}
