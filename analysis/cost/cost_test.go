package cost_test

import (
	"fmt"
	"strings"
	"testing"
	"tofuc/parser"

	"tofuc/analysis/check"
	"tofuc/analysis/cost"
)

// TestMatmulBytes prices C = x·w over 2 workers by hand (Tofu's
// appendix): fetching the half of a whole-read tensor each worker lacks,
// and a reduce-scatter of partial outputs.
func TestMatmulBytes(t *testing.T) {
	_, ir, err := check.LoadModel(parser.Parse, "m.tdl", []byte("model m(x: f32[8, 16]) {\n    w = param f32[16, 4]\n    return matmul(x, w)\n}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := cost.NewGraph(ir)
	if err != nil {
		t.Fatal(err)
	}
	n := ir.Nodes[0]
	x, w, y := n.Inputs[0], n.Inputs[1], n.Outputs[0]
	v := g.Root(n)
	byName := func(name string) cost.Choice {
		c, ok := v.Lookup(name)
		if !ok {
			t.Fatalf("no strategy %q", name)
		}
		return c
	}
	for _, c := range []struct {
		xd, wd, yd int
		choice     string
		want       int64
	}{
		{0, 0, 0, "split i", 16 * 4 * 4},            // each worker fetches the other half of w
		{0, 1, 0, "split i", 16 * 4 * 4},            // likewise, split by columns
		{1, 0, 0, "reduce k (sum)", 8 * 4 * 4},      // partials of y: reduce-scatter (k-1)|y|
		{1, 0, -1, "reduce k (sum)", 2 * 8 * 4 * 4}, // a replicated y is all-gathered as well
		{0, 0, 1, "split i", 8 * 4 * 4 / 2},         // rows computed, columns owned: half of y moves, plus w
	} {
		p := cost.NewPlan([]int{2})
		p.Tensors[x], p.Tensors[w], p.Tensors[y] = []int{c.xd}, []int{c.wd}, []int{c.yd}
		p.Ops[n] = []cost.Choice{byName(c.choice)}
		got, err := g.Evaluate(p)
		if err != nil {
			t.Fatal(err)
		}
		want := c.want
		if c.yd == 1 {
			want += 16 * 4 * 4
		}
		if got.CommBytes != want {
			t.Errorf("x %d, w %d, y %d, %s: %d bytes, want %d", c.xd, c.wd, c.yd, c.choice, got.CommBytes, want)
		}
	}
}

// TestSizesNeverWrap: a graph whose sizes add up past int64 is refused,
// and so is pricing it over devices when the communication could wrap.
func TestSizesNeverWrap(t *testing.T) {
	prog, err := check.NewProgram(parser.Parse)
	if err != nil {
		t.Fatal(err)
	}
	graph := func(rows int64) (*cost.Graph, error) {
		src := fmt.Sprintf("model m(x: f32[%d, 4]) {\n    return relu(x)\n}\n", rows)
		m, err := prog.LoadSource(fmt.Sprintf("m%d.tdl", rows), []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		g, err := m.Model("", nil)
		if err != nil {
			t.Fatal(err)
		}
		return cost.NewGraph(g)
	}
	// x and relu(x) are 2^62 bytes each: three of them (the input, the
	// node's input and its output) leave int64.
	if _, err := graph(1 << 58); err == nil || !strings.Contains(err.Error(), "more than 2^63 bytes") {
		t.Errorf("a graph of 3 * 2^62 bytes: %v", err)
	}
	// 3 * 2^52 bytes price over 2 devices (bound 3 * 2^52 * 4 * 2) but not 8.
	g, err := graph(1 << 48)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.CheckScale(2); err != nil {
		t.Errorf("2 devices: %v", err)
	}
	if err := g.CheckScale(1024); err == nil {
		t.Error("1024 devices: no error")
	}
	p := cost.NewPlan([]int{2, 2, 2, 2, 2, 2, 2, 2, 2, 2})
	for _, v := range g.Tensors() {
		p.Tensors[v] = make([]int, 10)
	}
	for _, n := range g.IR.Nodes {
		p.Ops[n] = make([]cost.Choice, 10)
	}
	if _, err := g.Evaluate(p); err == nil || !strings.Contains(err.Error(), "too large to price over 1024 devices") {
		t.Errorf("Evaluate over 1024 devices: %v", err)
	}
}
