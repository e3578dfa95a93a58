package partition

import (
	"path/filepath"
	"runtime"
	"testing"
	"tofuc/parser"

	"tofuc/analysis/autodiff"
	"tofuc/analysis/check"
	"tofuc/analysis/cost"
	"tofuc/lang/ir"
)

// rnnGraph is the RNN example's training graph, small.
func rnnGraph(t *testing.T) *cost.Graph {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	prog, err := check.NewProgram(parser.Parse)
	if err != nil {
		t.Fatal(err)
	}
	m, err := prog.Load(filepath.Join(filepath.Dir(file), "..", "..", "examples", "rnn.tdl"))
	if err != nil {
		t.Fatal(err)
	}
	attrs := map[string]ir.AttrValue{}
	for k, v := range map[string]int64{"layers": 2, "hidden": 16, "steps": 3, "batch": 8} {
		attrs[k] = ir.AttrValue{Kind: ir.AttrInt, Int: v}
	}
	g, err := m.Model("", attrs)
	if err != nil {
		t.Fatal(err)
	}
	if g, _, err = autodiff.TrainingGraph(g, m, autodiff.TrainOptions{}); err != nil {
		t.Fatal(err)
	}
	cg, err := cost.NewGraph(g)
	if err != nil {
		t.Fatal(err)
	}
	return cg
}

// TestRefineOptimalPerOperator: after the search every operator's
// strategies over all the steps are the cheapest for its tensors' splits
// (exhaustive's cheapestOp enumerates every sequence), and refining
// never raises the plan's cost. Without refine the recursion's per-step
// choices are not all optimal on this graph, so the test also checks
// that refine changes something.
func TestRefineOptimalPerOperator(t *testing.T) {
	g := rnnGraph(t)
	opt := Options{}
	res, err := recursive(g, Coarsen(g), 8, opt, space{ok: allowAll, splitOnly: true}, opt.eliminator(), false)
	if err != nil {
		t.Fatal(err)
	}
	before := res.Cost.CommBytes
	check := func(p *cost.Plan, c *cost.Cost) int {
		worse := 0
		for j, n := range g.IR.Nodes {
			best, _ := cheapestOp(p, n, g.Root(n), 0, 1)
			if c.OpBytes[j] < best {
				t.Fatalf("%s: %d bytes, below exhaustive's %d", n.Name, c.OpBytes[j], best)
			}
			if c.OpBytes[j] > best {
				worse++
			}
		}
		return worse
	}
	myopic := check(res.Plan, res.Cost)
	if err := refine(g, res.Plan, allowAll); err != nil {
		t.Fatal(err)
	}
	after, err := g.Evaluate(res.Plan)
	if err != nil {
		t.Fatal(err)
	}
	if n := check(res.Plan, after); n > 0 {
		t.Errorf("%d operators are not at their cheapest after refine", n)
	}
	if after.CommBytes > before {
		t.Errorf("refine raised the cost from %d to %d bytes", before, after.CommBytes)
	}
	if myopic == 0 || after.CommBytes == before {
		t.Errorf("the recursion alone left %d operators above their cheapest (%d -> %d bytes): the test no longer exercises refine", myopic, before, after.CommBytes)
	}
	t.Logf("refine: %d operators improved, %d -> %d bytes", myopic, before, after.CommBytes)
}
