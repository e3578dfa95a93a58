package codegen_test

import (
	"testing"

	"tofuc/analysis/cost"
	"tofuc/analysis/partition"
	"tofuc/analysis/partition/execution"
	"tofuc/codegen"
	"tofuc/internal/examplegraph"
	"tofuc/lang"
	"tofuc/runtime/exec"
	"tofuc/runtime/tensor"
)

// TestPartitionedLayouts compiles the RNN training graph over 4 devices
// under the data-parallel plan (replicated weights, gradients kept as
// partial sums that accumulating operators add up, one combination per
// weight) and the AllRow-Greedy plan (the LSTM cell split along its
// hidden units, reading four gate blocks of its weights), and runs them
// on the cpu runtime: they equal the single-device interpreter's result.
func TestPartitionedLayouts(t *testing.T) {
	tl := tools(t)
	g := loadExample(t, "rnn", true, attrs("layers", 2, "hidden", 8, "steps", 3, "batch", 4, "classes", 4))
	inputs := examplegraph.RandomInputs(g, 4)
	want, err := exec.Run(g, exec.Interp{}, inputs, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	cg, err := cost.NewGraph(g)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"data_parallel", "allrow_greedy"} {
		t.Run(name, func(t *testing.T) {
			res, err := partition.Baseline(cg, name, 4, partition.Options{})
			if err != nil {
				t.Fatal(err)
			}
			eg, err := execution.Build(cg, res.Plan)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			comp, err := codegen.CompilePartitioned(eg, g, dir, codegen.Options{Emit: []string{"host"}, Tools: tl})
			if err != nil {
				t.Fatal(err)
			}
			got, err := loadPlan(t, comp.Plan, dir, false)[0].p.Run(inputs, want.Params)
			if err != nil {
				t.Fatal(err)
			}
			for out, w := range want.Outputs {
				if err := tensor.Compare(got[out], w, tensor.Reordered(lang.F32, 1<<12)); err != nil {
					t.Errorf("output %s: %v", out, err)
				}
			}
		})
	}
}
