package autodiff_test

import (
	"testing"

	"tofuc/analysis/autodiff"
	"tofuc/analysis/check"
	"tofuc/internal/opcase"
	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/parser"
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

// TestGuardedReductionStaysGuarded: a reduction under a select whose
// condition keeps its reads in range is not hoisted into a local that
// would compute it everywhere (x[n - 1] at n = 0): the gradient matches
// finite differences; one whose reads are in range everywhere is; and
// the names of the locals hoisted and of the gradients never collide
// (a forward local y_part and a forward Def dy), so the printed
// operator checks.
func TestGuardedReductionStaysGuarded(t *testing.T) {
	src := `op guarded(x: [N, K]) -> [N, K] =
    lambda n, k: x[n, k] * select(n > 0, sum(lambda j: x[n - 1, j] * x[n - 1, j]), 1.0)
op collide(x: [N, K]) -> [N] =
    let y_part: [N, K] = lambda n, k: exp(x[n, k]) in
    let dy: [N] = lambda n: max(lambda k: y_part[n, k]) in
    lambda n: sum(lambda k: y_part[n, k] * dy[n])
`
	p, err := check.NewProgram(parser.Parse)
	if err != nil {
		t.Fatal(err)
	}
	m, err := p.LoadSource("hoist.tdl", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"guarded", "collide"} {
		c, err := opcase.New(m.Op(name), opcase.Options{Any: lang.F64, Float: lang.F64})
		if err != nil {
			t.Fatal(err)
		}
		backs, wrt, err := autodiff.Backward(c.Inst)
		if err != nil {
			t.Fatal(err)
		}
		gradCheck(t, c, backs, wrt)
		sym, err := check.Standalone(m.Op(name))
		if err != nil {
			t.Fatal(err)
		}
		symBacks, _, err := autodiff.Backward(sym)
		if err != nil {
			t.Fatal(err)
		}
		for _, back := range symBacks {
			if text, err := printChecked(p, back); err != nil {
				t.Errorf("%s: the printed gradient does not check: %v\n%s", name, err, text)
			}
		}
	}
}
