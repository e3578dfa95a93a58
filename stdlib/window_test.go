package stdlib_test

import (
	"math"

	"tofuc/lang"
	"tofuc/runtime/tensor"
)

// Interpreter cases for the ONNX window functions and eye_like of
// stdlib/shape.tdl, against their formulas evaluated directly in Go.

// windowOf is the window w(i, D) of n points, D = n when periodic,
// n - 1 otherwise, in f64.
func windowOf(n int, periodic bool, w func(x float64) float64) *tensor.Tensor {
	d := float64(n)
	if !periodic {
		d--
	}
	out := tensor.New(lang.F64, []int{n})
	for i := range n {
		out.F[i] = w(2 * math.Pi * float64(i) / d)
	}
	return out
}

func init() {
	hann := func(x float64) float64 { return 0.5 - 0.5*math.Cos(x) }
	hamming := func(x float64) float64 { return 25.0/46 - 21.0/46*math.Cos(x) }
	blackman := func(x float64) float64 { return 0.42 - 0.5*math.Cos(x) + 0.08*math.Cos(2*x) }
	for _, w := range []struct {
		op string
		f  func(float64) float64
	}{{"hann_window", hann}, {"hamming_window", hamming}, {"blackman_window", blackman}} {
		register(
			opCase{op: w.op, name: "periodic, 10 points", attrs: spA("n", aInt(10)), tol: 1e-12, want: spConst(windowOf(10, true, w.f))},
			opCase{op: w.op, name: "symmetric, 7 points", attrs: spA("n", aInt(7), "periodic", aInt(0)), tol: 1e-12, want: spConst(windowOf(7, false, w.f))},
		)
	}

	x34 := ints([]int{3, 4}, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)
	eyeLike := func(dt lang.DType, n, m, k int) *tensor.Tensor {
		out := tensor.New(dt, []int{n, m})
		for i := range n {
			for j := range m {
				if j-i == k {
					out.SetFlat(i*m+j, 1)
				}
			}
		}
		return out
	}
	register(
		opCase{op: "eye_like", name: "i64 [3,4]", inputs: []*tensor.Tensor{x34}, want: spConst(eyeLike(lang.I64, 3, 4, 0))},
		opCase{op: "eye_like", name: "f32 [4,3] k 1", attrs: spA("k", aInt(1)), inputs: []*tensor.Tensor{randn(5, 4, 3)}, want: spConst(eyeLike(lang.F32, 4, 3, 1))},
		opCase{op: "eye_like", name: "f32 [3,4] k -2", attrs: spA("k", aInt(-2)), inputs: []*tensor.Tensor{randn(6, 3, 4)}, want: spConst(eyeLike(lang.F32, 3, 4, -2))},
	)
}
