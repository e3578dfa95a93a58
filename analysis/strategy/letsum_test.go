package strategy_test

import (
	"fmt"
	"strings"
	"testing"
	"tofuc/parser"

	"tofuc/analysis/autodiff"
	"tofuc/analysis/check"
	"tofuc/analysis/strategy"
	"tofuc/internal/opcase"
)

// TestReductionInLocal: a sum held in a `let` and read as a term of the
// output (times a factor without a reduction) splits its variable, each
// worker computing a partial local: batch_norm's gradients of scale and
// var (dk[c] * rsqrt(var[c] + epsilon), dk a sum over n and *S) reduce
// over the batch, reading x and the output gradient over their part of
// n, and their partial outputs add up to the whole. A local also read
// elsewhere (in a non-linear function, or by another local) gets no such
// strategy, nor does a product of two sums.
func TestReductionInLocal(t *testing.T) {
	p, err := check.NewProgram(parser.Parse)
	if err != nil {
		t.Fatal(err)
	}
	c, err := opcase.New(p.StdOps()["batch_norm"], opcase.Options{})
	if err != nil {
		t.Fatal(err)
	}
	backs, wrt, err := autodiff.Backward(c.Inst)
	if err != nil {
		t.Fatal(err)
	}
	reduced := map[string]bool{}
	for i, back := range backs {
		name := c.Inst.Inputs[wrt[i]].Name
		a, err := strategy.Analyse(back)
		if err != nil {
			t.Fatalf("gradient of %s: %v", name, err)
		}
		bc, err := opcase.FromInstance(back, uint64(i))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range a.Strategies {
			if s.Kind != strategy.SplitReduction || s.Var.Extent.String() != c.Inst.Inputs[0].Shape[0].String() {
				continue
			}
			reduced[name] = true
			if x := s.Regions[0]; name != "bias" && name != "mean" && !strings.Contains(x.Dims[0].String(), ".lo") {
				t.Errorf("gradient of %s, %s: reads x over %s, not its part of the batch", name, s.Words(), x.Dims[0])
			}
			for k := 2; k <= 4; k++ {
				t.Run(fmt.Sprintf("%s/%s/k=%d", name, s.Words(), k), func(t *testing.T) {
					checkStrategy(t, a, s, bc, k)
				})
			}
		}
	}
	for _, name := range []string{"scale", "bias", "mean", "var"} {
		if !reduced[name] {
			t.Errorf("the gradient of batch_norm's %s has no reduction over the batch", name)
		}
	}

	src := `
op scaled(x: [N, C], r: [C]) -> [C] =
    let s: [C] = lambda c: sum(lambda n: x[n, c]) in
    lambda c: s[c] * sqrt(r[c] * r[c] + 1.0)
op twice(x: [N, C]) -> [C] =
    let s: [C] = lambda c: sum(lambda n: x[n, c]) in
    lambda c: s[c] * exp(s[c])
op chained(x: [N, C]) -> [C] =
    let s: [C] = lambda c: sum(lambda n: x[n, c]) in
    let t: [C] = lambda c: exp(s[c]) in
    lambda c: s[c] * t[c]
op product(x: [N, C]) -> [C] =
    lambda c: sum(lambda n: x[n, c]) * sum(lambda m: x[m, c])
`
	a := analyse(t, src, "scaled")
	s := find(t, a, "reduce n (sum)")
	if r := s.Regions[0].Dims[0].String(); r != "[n.lo, n.hi]" {
		t.Errorf("scaled reduce n reads x over %s", r)
	}
	sc := sourceCase(t, src)
	for k := 2; k <= 4; k++ {
		checkStrategy(t, sc.a, find(t, sc.a, "reduce n (sum)"), sc.Case, k)
	}
	for _, name := range []string{"twice", "chained"} {
		for _, s := range analyse(t, src, name).Strategies {
			if s.Kind == strategy.SplitReduction {
				t.Errorf("%s has %s: its local is also read outside the sum's terms", name, s.Words())
			}
		}
	}
	// A product of two sums: a factor holding a reduction is not taken
	// (every worker would compute it whole), so none.
	for _, s := range analyse(t, src, "product").Strategies {
		if s.Kind == strategy.SplitReduction {
			t.Errorf("product has %s", s.Words())
		}
	}
}

// TestBackwardReductionsEqualWhole checks every reduction strategy of
// the backward operators of the standard library (autodiff.Backward of
// each operator's concrete case), where reductions held in locals and
// factors at the output's index are common: k workers' partial outputs
// add up to the whole backward operator's result.
func TestBackwardReductionsEqualWhole(t *testing.T) {
	ops, names, err := opcase.Stdlib()
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, name := range names {
		c, err := opcase.New(ops[name], opcase.Options{})
		if err != nil {
			continue // not differentiable here (TestGradientsMatchFiniteDifferences says why)
		}
		backs, _, err := autodiff.Backward(c.Inst)
		if err != nil {
			continue
		}
		for i, back := range backs {
			a, err := strategy.Analyse(back)
			if err != nil {
				t.Errorf("%s: %v", back.Op, err)
				continue
			}
			var bc *opcase.Case
			for _, s := range a.Strategies {
				if s.Kind != strategy.SplitReduction {
					continue
				}
				if bc == nil {
					if bc, err = opcase.FromInstance(back, uint64(i)); err != nil {
						t.Fatal(err)
					}
				}
				checked++
				for k := 2; k <= 3; k++ {
					t.Run(fmt.Sprintf("%s/%s/k=%d", back.Op, s.Words(), k), func(t *testing.T) {
						checkStrategy(t, a, s, bc, k)
					})
				}
			}
		}
	}
	t.Logf("%d reduction strategies of backward operators, each for k = 2, 3", checked)
}
