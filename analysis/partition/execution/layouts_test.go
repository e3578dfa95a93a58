package execution_test

import (
	"fmt"
	"testing"

	"tofuc/analysis/cost"
	"tofuc/analysis/partition"
	"tofuc/analysis/partition/execution"
	"tofuc/internal/examplegraph"
	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/runtime/exec"
	"tofuc/runtime/tensor"
)

// TestBaselinePlansEqualWhole runs the execution graphs of every
// baseline's plan of the MLP and RNN training graphs over 4 devices: they
// give the unpartitioned outputs. Between them the plans replicate
// tensors, keep weight gradients as partial sums that accumulating
// operators add up, and read inputs in several bands (the LSTM cell split
// along its hidden units reads four gate blocks of W and R); the test
// fails if the plans stop covering any of these.
func TestBaselinePlansEqualWhole(t *testing.T) {
	cases := []struct {
		name    string
		set     map[string]ir.AttrValue
		classes int64
	}{
		{"mlp", ints("batch", 8, "hidden", 16), 10},
		{"rnn", ints("layers", 2, "hidden", 8, "steps", 3, "batch", 4, "classes", 4), 4},
	}
	seen := map[string]bool{}
	for _, c := range cases {
		g := load(t, c.name, true, c.set)
		inputs := examplegraph.RandomInputs(g, c.classes)
		want, err := exec.Run(g, exec.Interp{}, inputs, nil, 1)
		if err != nil {
			t.Fatal(err)
		}
		cg, err := cost.NewGraph(g)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range partition.Baselines {
			t.Run(fmt.Sprintf("%s/%s", c.name, name), func(t *testing.T) {
				res, eg := planned(t, cg, name, 4)
				got, err := eg.Run(inputs, want.Params)
				if err != nil {
					t.Fatal(err)
				}
				for name, w := range want.Outputs {
					if err := tensor.Compare(got[name], w, tensor.Reordered(lang.F32, 1<<12)); err != nil {
						t.Errorf("output %s: %v", name, err)
					}
				}
				for f := range features(res.Plan, eg) {
					seen[f] = true
				}
			})
		}
	}
	for _, f := range []string{"replicated", "partial", "accumulate", "bands"} {
		if !seen[f] {
			t.Errorf("no plan has %s: the test no longer covers it", f)
		}
	}
}

// features lists what a plan uses beyond splits.
func features(p *cost.Plan, eg *execution.Graph) map[string]bool {
	out := map[string]bool{}
	for _, ds := range p.Tensors {
		for _, d := range ds {
			out["replicated"] = out["replicated"] || d == cost.Replicated
			out["partial"] = out["partial"] || d == cost.Partial
		}
	}
	for _, cs := range p.Ops {
		for _, c := range cs {
			out["accumulate"] = out["accumulate"] || c == cost.Accumulate
		}
	}
	for _, ops := range eg.Ops {
		for _, op := range ops {
			for _, in := range op.In {
				out["bands"] = out["bands"] || in != nil && len(in.Bands) > 1
			}
		}
	}
	return out
}
