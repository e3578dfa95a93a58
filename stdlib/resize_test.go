package stdlib_test

import (
	"math"

	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/runtime/tensor"
)

// Interpreter cases for stdlib/resize.tdl against a direct Go
// evaluation of Keys's cubic kernel and of linear interpolation, at
// coordinates inside, between, on and past the ends of the axis.

// refResample resamples axis 1 of x [A, N, B] at coords with the 1-D
// kernel taps: weight(t, r) for taps t = -lo .. hi around floor(c),
// indices clamped to the edge, taps outside [0, N) dropped and the rest
// renormalised when exclude is set.
func refResample(x *tensor.Tensor, coords []float64, lo, hi int, weight func(d float64) float64, exclude bool) *tensor.Tensor {
	a, n, b := x.Shape[0], x.Shape[1], x.Shape[2]
	y := tensor.New(lang.F32, []int{a, len(coords), b})
	for i := range a {
		for o, c := range coords {
			f := math.Floor(c)
			for j := range b {
				sum, norm := 0.0, 0.0
				for t := -lo; t <= hi; t++ {
					at := int(f) + t
					w := weight(math.Abs(c - f - float64(t)))
					if exclude && (at < 0 || at >= n) {
						w = 0
					}
					sum += w * x.At(i, min(max(at, 0), n-1), j)
					norm += w
				}
				y.Set(sum/norm, i, o, j)
			}
		}
	}
	return y
}

func keys(a float64) func(d float64) float64 {
	return func(d float64) float64 {
		if d <= 1 {
			return ((a+2)*d-(a+3))*d*d + 1
		}
		return ((a*d-5*a)*d+8*a)*d - 4*a
	}
}

func init() {
	s := func(dims ...int) []int { return dims }
	coords := []float64{-0.5, -0.25, 0, 0.3, 1, 2.5, 3.75, 4, 4.5}
	at := floats(s(len(coords)), coords...)
	x := randn(81, 2, 5, 3)
	linear := func(d float64) float64 { return max(0, 1-d) }
	resample := func(lo, hi int, weight func(float64) float64, exclude bool) func([]*tensor.Tensor) []*tensor.Tensor {
		return func(in []*tensor.Tensor) []*tensor.Tensor {
			return []*tensor.Tensor{refResample(in[0], coords, lo, hi, weight, exclude)}
		}
	}
	register(
		ewFixed("resample_linear", "by hand: a quarter, the middle, past both ends", map[string]ir.AttrValue{"axis": aInt(0)},
			floats(s(4), 1, 1.75, 3, 2), floats(s(3), 1, 4, 2), floats(s(4), -1, 0.25, 1.5, 7)),
		opCase{op: "resample_linear", name: "direct, axis 1 of 3", attrs: map[string]ir.AttrValue{"axis": aInt(1)},
			inputs: []*tensor.Tensor{x, at}, tol: 1e-6, want: resample(0, 1, linear, false)},
		opCase{op: "resample_cubic", name: "direct, a = -0.75, edges repeated", attrs: map[string]ir.AttrValue{"axis": aInt(1)},
			inputs: []*tensor.Tensor{x, at}, tol: 1e-6, want: resample(1, 2, keys(-0.75), false)},
		opCase{op: "resample_cubic", name: "direct, a = -0.5, outside taps excluded",
			attrs:  map[string]ir.AttrValue{"axis": aInt(1), "cubic_a": aFloat(-0.5), "exclude_outside": aBool(true)},
			inputs: []*tensor.Tensor{x, at}, tol: 1e-6, want: resample(1, 2, keys(-0.5), true)},
		ewFixed("resample_cubic", "integer coordinates read the input", map[string]ir.AttrValue{"axis": aInt(0)},
			floats(s(3), 1, 4, 2), floats(s(3), 1, 4, 2), floats(s(3), 0, 1, 2)),
	)
}
