package stdlib_test

import (
	"math"

	"tofuc/lang"
	"tofuc/runtime/tensor"
)

// Interpreter cases for det_step and diagonal_prod of stdlib/linalg.tdl,
// against Gaussian elimination written out in Go.

// detStepGo is one step of elimination with partial pivoting on column
// k of each matrix of x [*S, n, n], as det_step documents it.
func detStepGo(x *tensor.Tensor, k int) *tensor.Tensor {
	n := x.Shape[len(x.Shape)-1]
	out := tensor.New(x.DType, x.Shape)
	for b := 0; b < x.Len()/(n*n); b++ {
		a := make([][]float64, n)
		for i := range a {
			a[i] = make([]float64, n)
			for j := range a[i] {
				a[i][j] = x.F[b*n*n+i*n+j]
			}
		}
		p := k
		for r := k + 1; r < n; r++ {
			if math.Abs(a[r][k]) > math.Abs(a[p][k]) {
				p = r
			}
		}
		if p != k {
			a[k], a[p] = a[p], a[k]
			for j := range a[p] {
				a[p][j] = -a[p][j]
			}
		}
		piv := a[k][k]
		for i := k + 1; i < n && piv != 0; i++ {
			f := a[i][k] / piv
			for j := range a[i] {
				a[i][j] -= f * a[k][j]
			}
		}
		for i := range a {
			for j := range a[i] {
				out.SetFlat(b*n*n+i*n+j, a[i][j])
			}
		}
	}
	return out
}

func init() {
	// Two 4x4 matrices, the second singular (two equal rows) with a zero
	// first column entry at the top (a pivot search that must swap).
	m := randn(31, 2, 4, 4)
	for j := range 4 {
		m.F[16+2*4+j] = m.F[16+1*4+j]
	}
	m.F[16] = 0
	for _, k := range []int{0, 1, 2} {
		register(opCase{op: "det_step", name: "k " + string(rune('0'+k)) + ", [2,4,4]", attrs: spA("k", aInt(int64(k))), inputs: []*tensor.Tensor{m}, tol: 1e-6,
			want: func(in []*tensor.Tensor) []*tensor.Tensor { return []*tensor.Tensor{detStepGo(in[0], k)} }})
	}
	register(opCase{op: "det_step", name: "f64 [3,3] k 0", inputs: []*tensor.Tensor{tensor.FromFloats(lang.F64, []int{3, 3}, []float64{1, 2, 3, 4, 5, 6, 7, 8, 10})}, tol: 1e-12,
		want: func(in []*tensor.Tensor) []*tensor.Tensor { return []*tensor.Tensor{detStepGo(in[0], 0)} }})
	register(opCase{op: "diagonal_prod", name: "[2,3,3]", inputs: []*tensor.Tensor{randn(32, 2, 3, 3)}, tol: 1e-6,
		want: func(in []*tensor.Tensor) []*tensor.Tensor {
			x := in[0]
			out := tensor.New(x.DType, []int{2})
			for b := range 2 {
				out.F[b] = x.F[b*9] * x.F[b*9+4] * x.F[b*9+8]
			}
			return []*tensor.Tensor{out}
		}})
}
