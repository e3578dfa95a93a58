package hostlib

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"

	"tofuc/runtime/plan"
)

// layouts are the ways an operand of rows×cols lies in its buffer: row-
// and column-major, padded rows, and a batch stride between entries.
func layout(r *rand.Rand, rows, cols, batch int64) (plan.Matrix, int64) {
	pad := r.Int64N(3)
	m := plan.Matrix{Offset: r.Int64N(5)}
	if r.IntN(2) == 0 {
		m.Row, m.Col = cols+pad, 1
	} else {
		m.Row, m.Col = 1, rows+pad
	}
	span := (rows-1)*m.Row + (cols-1)*m.Col + 1
	m.Batch = []int64{span + r.Int64N(4)}
	return m, m.Offset + (batch-1)*m.Batch[0] + span
}

// element reads element (i, j) of batch entry b of matrix m.
func element(buf []float32, m plan.Matrix, b, i, j int64) float32 {
	return buf[m.Offset+b*m.Batch[0]+i*m.Row+j*m.Col]
}

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
	m, n, k, batch := 1+r.Int64N(40), 1+r.Int64N(40), 1+r.Int64N(70), 1+r.Int64N(3)
	c := &plan.GEMMCall{Backend: lib.Name, M: m, N: n, K: k, Batch: []int64{batch}}
	var lens [3]int64
	c.A, lens[0] = layout(r, m, k, batch)
	c.B, lens[1] = layout(r, k, n, batch)
	c.C, lens[2] = layout(r, m, n, batch)
	bufs := [3][]float32{}
	for i := range bufs {
		bufs[i] = make([]float32, lens[i])
		for j := range bufs[i] {
			bufs[i][j] = float32(r.NormFloat64())
		}
	}
	guard := append([]float32(nil), bufs[2]...)
	lib.GEMM(c, unsafe.Pointer(&bufs[0][0]), unsafe.Pointer(&bufs[1][0]), unsafe.Pointer(&bufs[2][0]))
	written := map[int64]bool{}
	for b := range batch {
		for i := range m {
			for j := range n {
				want, abs := 0.0, 0.0
				for kk := range k {
					p := float64(element(bufs[0], c.A, b, i, kk)) * float64(element(bufs[1], c.B, b, kk, j))
					want, abs = want+p, abs+math.Abs(p)
				}
				got := element(bufs[2], c.C, b, i, j)
				written[c.C.Offset+b*c.C.Batch[0]+i*c.C.Row+j*c.C.Col] = true
				if bound := 2 * float64(k+1) * 0x1p-24 * abs; math.Abs(float64(got)-want) > bound {
					t.Fatalf("trial %d (%d×%d×%d, batch %d, a %+v, b %+v, c %+v): C[%d][%d,%d] = %g, want %g (bound %g)", trial, m, n, k, batch, c.A, c.B, c.C, b, i, j, got, want, bound)
				}
			}
		}
	}
	for i, v := range bufs[2] {
		if !written[int64(i)] && v != guard[i] {
			t.Fatalf("trial %d: element %d of C, outside the result, changed", trial, i)
		}
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
