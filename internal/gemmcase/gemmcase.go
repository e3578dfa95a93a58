// Package gemmcase makes random strided GEMM calls and checks a
// library's results against a float64 loop: the tests of every library
// backend's GEMM (runtime/hostlib's on the host, runtime/cuda's cuBLAS)
// use it.
package gemmcase

import (
	"fmt"
	"math"
	"math/rand/v2"

	"tofuc/runtime/plan"
)

// Case is a call and its operands' buffers (A, B, C), filled with
// random values.
type Case struct {
	Call *plan.GEMMCall
	Bufs [3][]float32
}

// Random is a call of backend over random extents and layouts (row- and
// column-major operands and result, padded rows, offsets, a batch
// stride between entries), its buffers filled.
func Random(r *rand.Rand, backend string) Case {
	m, n, k, batch := 1+r.Int64N(40), 1+r.Int64N(40), 1+r.Int64N(70), 1+r.Int64N(3)
	c := &plan.GEMMCall{Backend: backend, M: m, N: n, K: k, Batch: []int64{batch}}
	var lens [3]int64
	c.A, lens[0] = layout(r, m, k, batch)
	c.B, lens[1] = layout(r, k, n, batch)
	c.C, lens[2] = layout(r, m, n, batch)
	tc := Case{Call: c}
	for i := range tc.Bufs {
		tc.Bufs[i] = make([]float32, lens[i])
		for j := range tc.Bufs[i] {
			tc.Bufs[i][j] = float32(r.NormFloat64())
		}
	}
	return tc
}

// layout is a random way an operand of rows×cols lies in its buffer,
// and the buffer's length.
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

// Check compares out, the C buffer after the call, with a float64 loop
// over the case's A and B: each result within f32's error bound for
// its K, every element outside the result as it was.
func (tc Case) Check(out []float32) error {
	c := tc.Call
	written := map[int64]bool{}
	for b := range c.Batch[0] {
		for i := range c.M {
			for j := range c.N {
				want, abs := 0.0, 0.0
				for kk := range c.K {
					p := float64(element(tc.Bufs[0], c.A, b, i, kk)) * float64(element(tc.Bufs[1], c.B, b, kk, j))
					want, abs = want+p, abs+math.Abs(p)
				}
				got := element(out, c.C, b, i, j)
				written[c.C.Offset+b*c.C.Batch[0]+i*c.C.Row+j*c.C.Col] = true
				if bound := 2 * float64(c.K+1) * 0x1p-24 * abs; math.Abs(float64(got)-want) > bound {
					return fmt.Errorf("%d×%d×%d, batch %d, a %+v, b %+v, c %+v: C[%d][%d,%d] = %g, want %g (bound %g)", c.M, c.N, c.K, c.Batch[0], c.A, c.B, c.C, b, i, j, got, want, bound)
				}
			}
		}
	}
	for i, v := range out {
		if !written[int64(i)] && v != tc.Bufs[2][i] {
			return fmt.Errorf("element %d of C, outside the result, changed", i)
		}
	}
	return nil
}
