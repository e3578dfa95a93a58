package rounding

import (
	"math"

	"tofuc/lang/ir"
	"tofuc/lang/precision"
	"tofuc/runtime/interp"
	"tofuc/runtime/tensor"
)

// Expected is what a kernel computing an instance in a precision mode
// must give, under the tolerance policy (docs/precision.md): the
// interpreter's outputs, within the reordered-sum tolerance of the
// longest reduction in the exact mode, within each element's bound in
// the others.
type Expected struct {
	Mode precision.Mode
	Want []*tensor.Tensor
	// Bounds are the outputs' bounds in units of U (the modes that
	// compute in f32).
	Bounds []*tensor.Tensor
	// Longest is the number of terms of the instance's longest
	// reduction (the exact mode).
	Longest int
}

// Expect evaluates inst on inputs with the interpreter, and the bounds
// of a kernel computing it in mode p.
func Expect(inst *ir.Instance, inputs []*tensor.Tensor, p precision.Mode) (*Expected, error) {
	e := &Expected{Mode: p, Longest: ReductionLength(inst)}
	if !p.InF32() {
		want, err := interp.EvalInstance(inst, inputs, nil)
		e.Want = want
		return e, err
	}
	bi, err := Bound(inst, p)
	if err != nil {
		return nil, err
	}
	out, err := interp.EvalInstance(bi, inputs, nil)
	if err != nil {
		return nil, err
	}
	n := len(inst.Outputs)
	e.Want, e.Bounds = out[:n], out[n:]
	return e, nil
}

// Compare compares a kernel's output i with the expectation.
func (e *Expected) Compare(i int, got *tensor.Tensor) error {
	want := e.Want[i]
	if e.Bounds == nil || !want.DType.IsFloat() {
		return tensor.Compare(got, want, tensor.Reordered(want.DType, e.Longest))
	}
	return tensor.CompareBounded(got, want, e.Bounds[i], U)
}

// ReductionLength is the number of terms of inst's longest reduction
// (1 without any; a symbolic extent counts as 1): the length of the
// exact mode's reordered-sum tolerance.
func ReductionLength(inst *ir.Instance) int {
	n := int64(1)
	for _, ds := range [][]*ir.Def{inst.Locals, inst.Outputs} {
		for _, d := range ds {
			ir.Walk(d.Body, func(e ir.Expr) bool {
				if r, ok := e.(*ir.Reduce); ok {
					m := int64(1)
					for _, v := range r.Vars {
						c, _ := v.Extent.IsConst()
						m *= c
					}
					n = max(n, m)
				}
				return true
			})
		}
	}
	return int(n)
}

// Used is the largest share of its bound that an element of a kernel's
// output i differs by (0 to 1 when within; the exact mode's tolerance in
// that mode), for tests to report how close to their bounds kernels
// come.
func (e *Expected) Used(i int, got *tensor.Tensor) float64 {
	want := e.Want[i]
	if !want.DType.IsFloat() {
		return 0
	}
	worst := 0.0
	for k := range want.Len() {
		g, w := got.Flat(k), want.Flat(k)
		if g == w || math.IsNaN(g) && math.IsNaN(w) {
			continue
		}
		var allowed float64
		if e.Bounds == nil {
			tol := tensor.Reordered(want.DType, e.Longest)
			allowed = tol.Abs + tol.Rel*math.Abs(w)
		} else {
			allowed = U * e.Bounds[i].Flat(k)
		}
		worst = max(worst, math.Abs(g-w)/allowed)
	}
	return worst
}
