package autodiff_test

import (
	"testing"

	"tofuc/analysis/autodiff"
	"tofuc/analysis/check"
	"tofuc/internal/opcase"
	"tofuc/lang/ir"
)

// TestGradientsReadForwardReductions: a gradient reads the reductions of
// the forward operator that its terms need at every element (a row's
// maximum, its sum of exponentials) from locals, computed once, instead
// of holding them inline: softmax_cross_entropy's gradient holds no
// reduction in its output, and the attention weights' gradients hold one
// maximum, the forward local's.
func TestGradientsReadForwardReductions(t *testing.T) {
	ops, _, err := opcase.Stdlib()
	if err != nil {
		t.Fatal(err)
	}
	backward := func(name string) []*ir.Instance {
		sym, err := check.Standalone(ops[name])
		if err != nil {
			t.Fatal(err)
		}
		backs, _, err := autodiff.Backward(sym)
		if err != nil {
			t.Fatal(err)
		}
		return backs
	}
	count := func(d *ir.Def, kind ir.Reducer) int {
		n := 0
		ir.Walk(d.Body, func(e ir.Expr) bool {
			if r, ok := e.(*ir.Reduce); ok && r.Kind == kind {
				n++
			}
			return true
		})
		return n
	}
	for _, b := range backward("softmax_cross_entropy") {
		for _, o := range b.Outputs {
			if n := count(o, ir.Sum) + count(o, ir.Max); n > 0 {
				t.Errorf("%s: its output holds %d reductions:\n%s", b.Op, n, ir.FormatTDL(b, "g"))
			}
		}
	}
	for _, b := range backward("attention_weights") {
		maxima := 0
		for _, d := range append(append([]*ir.Def(nil), b.Locals...), b.Outputs...) {
			maxima += count(d, ir.Max)
		}
		if maxima != 1 {
			t.Errorf("%s: %d maxima, want the forward local's:\n%s", b.Op, maxima, ir.FormatTDL(b, "g"))
		}
	}
}
