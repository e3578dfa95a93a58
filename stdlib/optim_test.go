package stdlib_test

import (
	"math"

	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/runtime/tensor"
)

// Optimizer updates against their formulas, written out element by element.
func init() {
	p := floats([]int{3}, 1, -2, 0.5)
	g := floats([]int{3}, 0.1, 0.2, -0.4)
	v := floats([]int{3}, 0.3, 0, -1)
	m := floats([]int{3}, -0.2, 0.05, 0.1)
	step := tensor.FromFloats(lang.F32, nil, []float64{3})
	each := func(f func(i int) float64) *tensor.Tensor {
		return tensor.FromFloats(lang.F32, []int{3}, []float64{f(0), f(1), f(2)})
	}
	register(
		opCase{op: "sgd", name: "p - lr g", attrs: map[string]ir.AttrValue{"lr": aFloat(0.5)}, inputs: optList(p, g),
			want: func(in []*tensor.Tensor) []*tensor.Tensor {
				return optList(each(func(i int) float64 { return p.Flat(i) - 0.5*g.Flat(i) }))
			}, tol: 1e-7},
		opCase{op: "momentum", name: "heavy ball", attrs: map[string]ir.AttrValue{"lr": aFloat(0.1), "mu": aFloat(0.9)}, inputs: optList(p, g, v),
			want: func(in []*tensor.Tensor) []*tensor.Tensor {
				v1 := func(i int) float64 { return 0.9*v.Flat(i) + g.Flat(i) }
				return optList(each(func(i int) float64 { return p.Flat(i) - 0.1*v1(i) }), each(v1))
			}, tol: 1e-6},
		opCase{op: "adam", name: "bias-corrected step 3", attrs: map[string]ir.AttrValue{"lr": aFloat(0.01)}, inputs: optList(p, g, m, v, step),
			want: func(in []*tensor.Tensor) []*tensor.Tensor {
				m1 := func(i int) float64 { return 0.9*m.Flat(i) + 0.1*g.Flat(i) }
				v1 := func(i int) float64 { return 0.999*v.Flat(i) + 0.001*g.Flat(i)*g.Flat(i) }
				upd := func(i int) float64 {
					mh := m1(i) / (1 - math.Pow(0.9, 3))
					vh := v1(i) / (1 - math.Pow(0.999, 3))
					return p.Flat(i) - 0.01*mh/(math.Sqrt(vh)+1e-8)
				}
				return optList(each(upd), each(m1), each(v1))
			}, tol: 1e-5},
	)
}

func optList(xs ...*tensor.Tensor) []*tensor.Tensor { return xs }

// Learning-rate schedules at a few steps against their formulas.
func init() {
	for _, tc := range []struct {
		name  string
		attrs map[string]ir.AttrValue
		t     float64
		want  float64
	}{
		{"constant", nil, 7, 1},
		{"warm-up", map[string]ir.AttrValue{"warmup": aInt(4)}, 3, 0.75},
		{"after the warm-up", map[string]ir.AttrValue{"warmup": aInt(4)}, 9, 1},
		{"step decay", map[string]ir.AttrValue{"decay": aStr("step"), "every": aInt(10), "gamma": aFloat(0.5)}, 25, 0.25},
		{"exponential", map[string]ir.AttrValue{"decay": aStr("exponential"), "gamma": aFloat(0.9)}, 4, 0.9 * 0.9 * 0.9},
		{"linear", map[string]ir.AttrValue{"decay": aStr("linear"), "total": aInt(100), "final": aFloat(0.1)}, 50, 0.1 + 0.9*0.5},
		{"cosine after a warm-up", map[string]ir.AttrValue{"decay": aStr("cosine"), "warmup": aInt(10), "total": aInt(110)}, 35, 0.5 * (1 + math.Cos(math.Pi*0.25))},
		{"cosine past its end", map[string]ir.AttrValue{"decay": aStr("cosine"), "total": aInt(10), "final": aFloat(0.2)}, 50, 0.2},
	} {
		want := tc.want
		register(opCase{op: "lr_schedule", name: tc.name, attrs: tc.attrs, inputs: optList(tensor.FromFloats(lang.F32, nil, []float64{tc.t})),
			want: func(in []*tensor.Tensor) []*tensor.Tensor {
				return optList(tensor.FromFloats(lang.F32, nil, []float64{want}))
			}, tol: 1e-6})
	}
}

func init() {
	x := floats([]int{2, 2}, 1, -2, 3, 4)
	register(opCase{op: "zeros_like", name: "f32 zeros", inputs: optList(x),
		want: func(in []*tensor.Tensor) []*tensor.Tensor {
			return optList(tensor.New(lang.F32, []int{2, 2}))
		}})
}
