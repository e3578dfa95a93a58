package rounding

import (
	"fmt"
	"math"

	"tofuc/lang/ir"
	"tofuc/lang/precision"
	"tofuc/runtime/tensor"
)

// ModelTolerance is the policy's tolerance for an output of a whole
// model compiled in mode p against the interpreter (or the exact mode's
// plan, which matches it), the model's paths having at most depth
// contractions one after the other (ContractionDepth): per element,
// relative and absolute, each tol, and in the modes that round
// contractions' factors (tf32, bf16, f16) as much again relative to the
// root mean square of the element's row (tensor.Tolerance.RMS). The
// exact mode's is the reordered-sum tolerance of a long reduction (2¹²
// terms, at most 2⁻¹⁵ for f32); the f32 modes allow 8 units of their
// factors' format, at least 2⁻¹⁰ (PyTorch's own tests compare f32 at
// 1.3·10⁻⁶ per operator and much looser across models): f32 2⁻¹⁰, tf32
// and f16 2⁻⁸, bf16 2⁻⁵, in the tensor-core modes times √depth: each
// layer adds an error of its own to what it passes on, and errors of
// random signs add up as the square root of their number (AlexNet's
// eight layers in tf32 were 0.029 off a logit of 1.14, 2.4 times the
// tolerance of one).
// The part relative to the row's spread is what makes the tolerance
// independent of contraction depth: rounding the factors of a depth-K
// contraction of terms of random signs errs by about √K units of their
// format times a term's size, and the sums' spread grows as √K too
// (TestModelToleranceDepth), while an element near zero can be as small
// as it likes. In f32 the factors are not rounded and a contraction
// errs by units of f32, 2¹³ times below tol. A model's error is no bound
// away from its operators' (each of which the per-instance bound
// checks): it grows with the model's depth and with the conditioning of
// what it computes, so a model is also checked by its arg-max
// (SameArgMax).
func ModelTolerance(p precision.Mode, depth int) tensor.Tolerance {
	switch p {
	case precision.Exact:
		return tensor.Tolerance{Rel: 0x1p-15, Abs: 0x1p-15}
	case precision.F32:
		return tensor.Tolerance{Rel: 0x1p-10, Abs: 0x1p-10}
	}
	tol := 8 * p.FactorRounding() * math.Sqrt(float64(max(1, depth)))
	return tensor.Tolerance{Rel: tol, Abs: tol, RMS: tol}
}

// ContractionDepth is the most contractions (sums of products of two
// factors: ir.IsContraction) on a path of g from its inputs and
// parameters to its outputs, g's nodes being in order of computation.
func ContractionDepth(g *ir.Graph) int {
	depth := map[*ir.Value]int{}
	most := 0
	for _, n := range g.Nodes {
		d := 0
		for _, in := range n.Inputs {
			d = max(d, depth[in])
		}
		d += contractions(n.Inst)
		for _, o := range n.Outputs {
			depth[o] = d
		}
		most = max(most, d)
	}
	return most
}

// contractions is the most contractions one after the other within an
// instance: a local or output counts the most of the locals it reads,
// plus one where it holds a contraction (a GRU cell's gates, then their
// product with the state, count two).
func contractions(inst *ir.Instance) int {
	depth := map[*ir.Tensor]int{}
	most := 0
	for _, d := range append(append([]*ir.Def(nil), inst.Locals...), inst.Outputs...) {
		n, contracts := 0, false
		ir.Walk(d.Body, func(e ir.Expr) bool {
			switch x := e.(type) {
			case *ir.Access:
				n = max(n, depth[x.T])
			case *ir.Reduce:
				contracts = contracts || ir.IsContraction(x)
			}
			return true
		})
		if contracts {
			n++
		}
		depth[d.Tensor] = n
		most = max(most, n)
	}
	return most
}

// CompareModel compares an output of a model of contraction depth depth
// compiled in mode p with the reference: within ModelTolerance, and, for
// float outputs of two or more dimensions (logits), with the same
// arg-max in every row of the last dimension where the reference's top
// two differ by more than the tolerance.
func CompareModel(p precision.Mode, depth int, got, want *tensor.Tensor) error {
	tol := ModelTolerance(p, depth)
	if err := tensor.Compare(got, want, tol); err != nil {
		return err
	}
	if len(want.Shape) < 2 || !want.DType.IsFloat() {
		return nil
	}
	return SameArgMax(got, want, tol)
}

// SameArgMax reports the first row (of the last dimension) whose arg-max
// differs between got and want, among the rows where want's largest
// value exceeds its second by more than tol allows.
func SameArgMax(got, want *tensor.Tensor, tol tensor.Tolerance) error {
	n := want.Shape[len(want.Shape)-1]
	if n == 0 {
		return nil
	}
	perRow := tol.PerRow(want)
	for row := 0; row < want.Len()/n; row++ {
		tol := perRow(row)
		g, w := argMax(got, row, n), argMax(want, row, n)
		if g == w {
			continue
		}
		top, other := want.Flat(row*n+w), want.Flat(row*n+g)
		if top-other > tol.Abs+tol.Rel*math.Abs(top) {
			return fmt.Errorf("row %d: arg-max %d, want %d (%v against %v)", row, g, w, got.Flat(row*n+g), top)
		}
	}
	return nil
}

// argMax is the index of the largest element of row of t's last
// dimension of n (the first of equals; NaN counts as largest).
func argMax(t *tensor.Tensor, row, n int) int {
	best := 0
	for i := 1; i < n; i++ {
		v, b := t.Flat(row*n+i), t.Flat(row*n+best)
		if v > b || math.IsNaN(v) && !math.IsNaN(b) {
			best = i
		}
	}
	return best
}
