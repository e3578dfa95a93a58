package strategy_test

import (
	"fmt"
	"strings"
	"testing"

	"tofuc/analysis/check"
	"tofuc/analysis/strategy"
	"tofuc/lang"
	"tofuc/parser"
)

// Tofu's own examples (seed001_tofu.md §3.4): conv1d has exactly five
// strategies with the input regions of Figure 3.2, matmul exactly three.
const tofuOps = `
op conv1d(data: [B, CI, W], filters: [CI, CO, DW]) -> [B, CO, W - DW + 1] =
    lambda b, co, x: sum(lambda ci, dx: data[b, ci, x + dx] * filters[ci, co, dx])
op matmul(A: [M, K], B: [K, N]) -> [M, N] = lambda i, j: sum(lambda k: A[i, k] * B[k, j])
`

func analyse(t *testing.T, src, name string) *strategy.Analysis {
	t.Helper()
	f, err := parser.Parse("tofu.tdl", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range f.Ops {
		if op.Name != name {
			continue
		}
		inst, err := check.Standalone(op)
		if err != nil {
			t.Fatal(err)
		}
		a, err := strategy.Analyse(inst)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	t.Fatalf("no op %s", name)
	return nil
}

// describe prints a strategy with its regions, one input per line.
func describe(s *strategy.Strategy) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", s.Kind, s.Name())
	if s.Kind == strategy.SplitReduction {
		fmt.Fprintf(&b, " (%s)", s.Reducer)
	}
	for _, r := range s.Regions {
		fmt.Fprintf(&b, "\n  %s %v", r.Tensor.Name, r.Dims)
	}
	return b.String()
}

func TestTofuConv1d(t *testing.T) {
	a := analyse(t, tofuOps, "conv1d")
	want := []string{
		// Split the batch: half of data along b, all of the filters.
		"split b\n  data [[b.lo, b.hi] [0, CI - 1] [0, W - 1]]\n  filters [[0, CI - 1] [0, CO - 1] [0, DW - 1]]",
		// Split output channels: all of data, a slice of the filters.
		"split co\n  data [[0, B - 1] [0, CI - 1] [0, W - 1]]\n  filters [[0, CI - 1] [co.lo, co.hi] [0, DW - 1]]",
		// Split the width: a halo of DW - 1 beyond the part.
		"split x\n  data [[0, B - 1] [0, CI - 1] [x.lo, DW + x.hi - 1]]\n  filters [[0, CI - 1] [0, CO - 1] [0, DW - 1]]",
		// Split input channels: partial sums over slices of data and filters.
		"reduce ci (sum)\n  data [[0, B - 1] [ci.lo, ci.hi] [0, W - 1]]\n  filters [[ci.lo, ci.hi] [0, CO - 1] [0, DW - 1]]",
		// Split the kernel window: partial sums over shifted windows of data.
		"reduce dx (sum)\n  data [[0, B - 1] [0, CI - 1] [dx.lo, -DW + W + dx.hi]]\n  filters [[0, CI - 1] [0, CO - 1] [dx.lo, dx.hi]]",
	}
	if len(a.Strategies) != len(want) {
		t.Fatalf("%d strategies, want %d", len(a.Strategies), len(want))
	}
	for i, s := range a.Strategies {
		if got := describe(s); got != want[i] {
			t.Errorf("strategy %d:\n%s\nwant\n%s", i, got, want[i])
		}
	}
	// The halo of the x split is DW - 1: the region read is DW - 1 longer
	// than the worker's part of x.
	x := a.Strategies[2].Regions[0].Dims[2]
	part := lang.Sym("x.hi").Sub(lang.Sym("x.lo")).Add(lang.Const(1))
	if halo := x.Size().Sub(part).String(); halo != "DW - 1" {
		t.Errorf("halo of the x split: %s, want DW - 1", halo)
	}
	if a.Elementwise {
		t.Error("conv1d is not element-wise")
	}
	if got := a.FLOPs.String(); got != "-2*B*CI*CO*DW*DW + 2*B*CI*CO*DW*W + 2*B*CI*CO*DW" {
		t.Errorf("FLOPs %s", got)
	}
	if got := a.Strategies[2].PerWorker().String(); got != "2*B*CI*CO*DW*len(x)" {
		t.Errorf("x split per worker: %s", got)
	}
}

func TestTofuMatmul(t *testing.T) {
	a := analyse(t, tofuOps, "matmul")
	want := []string{
		"split i\n  A [[i.lo, i.hi] [0, K - 1]]\n  B [[0, K - 1] [0, N - 1]]",
		"split j\n  A [[0, M - 1] [0, K - 1]]\n  B [[0, K - 1] [j.lo, j.hi]]",
		"reduce k (sum)\n  A [[0, M - 1] [k.lo, k.hi]]\n  B [[k.lo, k.hi] [0, N - 1]]",
	}
	if len(a.Strategies) != len(want) {
		t.Fatalf("%d strategies, want %d", len(a.Strategies), len(want))
	}
	for i, s := range a.Strategies {
		if got := describe(s); got != want[i] {
			t.Errorf("strategy %d:\n%s\nwant\n%s", i, got, want[i])
		}
	}
	for i, want := range []string{"2*K*N*len(i)", "2*K*M*len(j)", "2*M*N*len(k)"} {
		if got := a.Strategies[i].PerWorker().String(); got != want {
			t.Errorf("strategy %d per worker: %s, want %s", i, got, want)
		}
	}
}

func TestElementwiseDetection(t *testing.T) {
	src := `
op add(a: [*A], b: [*B]) -> [*broadcast(A, B)] = lambda *i: a[*i] + b[*i]
op shift(x: [N]) -> [N] = lambda i: x[i + 1] else 0.0
op transpose2(x: [M, N]) -> [N, M] = lambda i, j: x[j, i]
op scale<k = 2.0>(x: [*S]) -> [*S] = lambda *i: x[*i] * k
`
	for name, want := range map[string]bool{"add": true, "shift": false, "transpose2": false, "scale": true} {
		if got := analyse(t, src, name).Elementwise; got != want {
			t.Errorf("%s: element-wise %v, want %v", name, got, want)
		}
	}
}
