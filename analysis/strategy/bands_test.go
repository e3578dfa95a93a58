package strategy_test

import (
	"fmt"
	"strings"
	"testing"

	"tofuc/analysis/check"
	"tofuc/analysis/strategy"
	"tofuc/internal/opcase"
	"tofuc/lang"
	"tofuc/parser"
)

// stdAnalysis analyses a standard library operator instantiated on its
// own.
func stdAnalysis(t *testing.T, name string) *strategy.Analysis {
	t.Helper()
	p, err := check.NewProgram(parser.Parse)
	if err != nil {
		t.Fatal(err)
	}
	inst, err := check.Standalone(p.StdOps()[name])
	if err != nil {
		t.Fatal(err)
	}
	a, err := strategy.Analyse(inst)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func find(t *testing.T, a *strategy.Analysis, words string) *strategy.Strategy {
	t.Helper()
	s, err := a.Find(words)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestLSTMCellBands: lstm_cell split along its hidden units j reads four
// bands of W and R (one per gate block, each len(j) wide), eight of the
// two biases, three of the peepholes, and a worker does 1/k of the work.
func TestLSTMCellBands(t *testing.T) {
	a := stdAnalysis(t, "lstm_cell")
	s := find(t, a, "split j")
	blocks := func(n int) string {
		var bs []string
		for g := range n {
			off := ""
			switch g {
			case 0:
			case 1:
				off = "H + "
			default:
				off = fmt.Sprintf("%d*H + ", g)
			}
			bs = append(bs, fmt.Sprintf("[%sj.lo, %sj.hi]", off, off))
		}
		return strings.Join(bs, " ∪ ")
	}
	want := map[string]string{"W": blocks(4), "R": blocks(4), "b": blocks(8), "p": blocks(3)}
	for _, r := range s.Regions {
		if w, ok := want[r.Tensor.Name]; ok {
			if got := r.Bands[0].String(); got != w {
				t.Errorf("%s: bands %s, want %s", r.Tensor.Name, got, w)
			}
		}
	}
	n := lang.Sym("len(j)")
	if !s.PerWorker().Mul(lang.Sym("H")).Equal(a.FLOPs.Mul(n)) {
		t.Errorf("work per worker %s, want the total %s times len(j)/H", s.PerWorker(), a.FLOPs)
	}
	// The worker instances on the packed bands compute the cell exactly.
	c := concreteCase(t, a)
	for k := 2; k <= 4; k++ {
		t.Run(fmt.Sprintf("k=%d", k), func(t *testing.T) { checkStrategy(t, c.a, find(t, c.a, "split j"), c.Case, k) })
	}
}

type analysedCase struct {
	*opcase.Case
	a *strategy.Analysis
}

// concreteCase instantiates a's operator on random small shapes.
func concreteCase(t *testing.T, a *strategy.Analysis) analysedCase {
	t.Helper()
	p, err := check.NewProgram(parser.Parse)
	if err != nil {
		t.Fatal(err)
	}
	c, err := opcase.New(p.StdOps()[a.Inst.Op], opcase.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ca, err := strategy.Analyse(c.Inst)
	if err != nil {
		t.Fatal(err)
	}
	return analysedCase{c, ca}
}

// sourceCase instantiates the first operator of src on random small
// shapes.
func sourceCase(t *testing.T, src string) analysedCase {
	t.Helper()
	f, err := parser.Parse("case.tdl", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	c, err := opcase.New(f.Ops[0], opcase.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ca, err := strategy.Analyse(c.Inst)
	if err != nil {
		t.Fatal(err)
	}
	return analysedCase{c, ca}
}

// TestMultiOutputStrategies: batch_norm_train splits its channels in
// every output, whatever their position; batch statistics written as
// top-level sums (the variance around a local mean) get a reduction
// strategy whose partial sums add up; a variance written as E[x^2] -
// E[x]^2 is no top-level reduction and gets none.
func TestMultiOutputStrategies(t *testing.T) {
	a := stdAnalysis(t, "batch_norm_train")
	s := find(t, a, "split c")
	if fmt.Sprint(s.Dims) != "[1 0 0 0 0]" {
		t.Errorf("batch_norm_train split c: output dimensions %v", s.Dims)
	}
	c := concreteCase(t, a)
	checkStrategy(t, c.a, find(t, c.a, "split c"), c.Case, 3)

	src := `
op stats(x: [N, C]) -> (mean: [C], var: [C]) =
    let mu: [C] = lambda c: sum(lambda n: x[n, c]) / N in
    (lambda c: sum(lambda n: x[n, c]) / N,
     lambda c: sum(lambda n: (x[n, c] - mu[c]) * (x[n, c] - mu[c])) / N)
op moments(x: [N, C]) -> (mean: [C], var: [C]) =
    (lambda c: sum(lambda n: x[n, c]) / N,
     lambda c: sum(lambda n: x[n, c] * x[n, c]) / N - sum(lambda n: x[n, c]) * sum(lambda n: x[n, c]) / (N * N))
`
	st := analyse(t, src, "stats")
	r := find(t, st, "reduce n (sum)")
	if x := r.Regions[0].Dims[0]; x.String() != "[0, N - 1]" {
		t.Errorf("stats reduce n reads x over %s: the local mean needs every row", x)
	}
	sc := sourceCase(t, src)
	for k := 2; k <= 4; k++ {
		checkStrategy(t, sc.a, find(t, sc.a, "reduce n (sum)"), sc.Case, k)
	}
	for _, s := range analyse(t, src, "moments").Strategies {
		if s.Kind == strategy.SplitReduction {
			t.Errorf("moments has %s: E[x^2] - E[x]^2 is not a sum of partials", s.Words())
		}
	}
}

// TestLinear: operators linear in their inputs taken together can add
// partial sums; affine or non-linear ones cannot.
func TestLinear(t *testing.T) {
	src := `
op add(a: [*A], b: [*B]) -> [*broadcast(A, B)] = lambda *i: a[*i] + b[*i]
op scale(x: [N]) -> [N] = lambda i: x[i] * 2.0
op rowsum(x: [M, N]) -> [M] = lambda i: sum(lambda j: x[i, j])
op transpose2(x: [M, N]) -> [N, M] = lambda i, j: x[j, i]
op shift(x: [N]) -> [N] = lambda i: x[i + 1] else 0.0
op offset(x: [N]) -> [N] = lambda i: x[i] + 1.0
op square(x: [N]) -> [N] = lambda i: x[i] * x[i]
op rowmax(x: [M, N]) -> [M] = lambda i: max(lambda j: x[i, j])
op padded(x: [N]) -> [N] = lambda i: x[i + 1] else 1.0
`
	for name, want := range map[string]bool{"add": true, "scale": true, "rowsum": true, "transpose2": true, "shift": true,
		"offset": false, "square": false, "rowmax": false, "padded": false} {
		if got := analyse(t, src, name).Linear; got != want {
			t.Errorf("%s: linear %v, want %v", name, got, want)
		}
	}
}
