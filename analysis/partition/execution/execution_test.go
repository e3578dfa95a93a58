package execution_test

import (
	"fmt"
	"path/filepath"
	"runtime"
	"testing"
	"tofuc/parser"

	"tofuc/analysis/autodiff"
	"tofuc/analysis/check"
	"tofuc/analysis/cost"
	"tofuc/analysis/partition"
	"tofuc/analysis/partition/execution"
	"tofuc/internal/examplegraph"
	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/runtime/exec"
	"tofuc/runtime/tensor"
)

func load(t *testing.T, name string, train bool, set map[string]ir.AttrValue) *ir.Graph {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	prog, err := check.NewProgram(parser.Parse)
	if err != nil {
		t.Fatal(err)
	}
	m, err := prog.Load(filepath.Join(filepath.Dir(file), "..", "..", "..", "examples", name+".tdl"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := m.Model("", set)
	if err != nil {
		t.Fatal(err)
	}
	if train {
		if g, _, err = autodiff.TrainingGraph(g, m, autodiff.TrainOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return g
}

// sourceModel checks TDL source src (named name in messages) and returns
// its module and its only model's graph.
func sourceModel(t *testing.T, name, src string) (*check.Module, *ir.Graph) {
	t.Helper()
	m, g, err := check.LoadModel(parser.Parse, name, []byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	return m, g
}

func ints(kv ...any) map[string]ir.AttrValue {
	out := map[string]ir.AttrValue{}
	for i := 0; i < len(kv); i += 2 {
		switch v := kv[i+1].(type) {
		case int:
			out[kv[i].(string)] = ir.AttrValue{Kind: ir.AttrInt, Int: int64(v)}
		case bool:
			out[kv[i].(string)] = ir.AttrValue{Kind: ir.AttrBool, Bool: v}
		}
	}
	return out
}

// TestPartitionedEqualsWhole: the execution graph of the searched plan,
// run by the interpreter over 2, 4 and 8 simulated devices, gives the
// unpartitioned graph's outputs: exactly where no partial outputs are
// combined, within the tolerance for reordered sums where they are.
func TestPartitionedEqualsWhole(t *testing.T) {
	cases := []struct {
		name    string
		train   bool
		set     map[string]ir.AttrValue
		classes int64
	}{
		{"mlp", true, ints("batch", 8, "hidden", 16), 10},
		{"wresnet", false, ints("depth", 50, "width", 1, "batch", 2, "image", 16, "classes", 10), 10},
		{"rnn", true, ints("layers", 2, "hidden", 8, "steps", 3, "batch", 4, "classes", 4), 4},
	}
	for _, c := range cases {
		g := load(t, c.name, c.train, c.set)
		inputs := examplegraph.RandomInputs(g, c.classes)
		want, err := exec.Run(g, exec.Interp{}, inputs, nil, 1)
		if err != nil {
			t.Fatal(err)
		}
		cg, err := cost.NewGraph(g)
		if err != nil {
			t.Fatal(err)
		}
		for _, devices := range []int{2, 4, 8} {
			t.Run(fmt.Sprintf("%s/%d", c.name, devices), func(t *testing.T) {
				res, eg := planned(t, cg, "search", devices)
				got, err := eg.Run(inputs, want.Params)
				if err != nil {
					t.Fatal(err)
				}
				tol := tensor.Exact
				if partial(eg) {
					tol = tensor.Reordered(lang.F32, 1<<12)
				}
				for name, w := range want.Outputs {
					if err := tensor.Compare(got[name], w, tol); err != nil {
						t.Errorf("output %s: %v", name, err)
					}
				}
				t.Logf("%d operators, fused fetches move %d bytes (cost model: %d)", len(g.Nodes), eg.FetchBytes(), res.Cost.CommBytes)
			})
		}
	}
}

func partial(eg *execution.Graph) bool {
	for _, ops := range eg.Ops {
		for _, op := range ops {
			if op.Partial {
				return true
			}
		}
	}
	return false
}

// planned is the plan of cg on devices that name gives ("search", or a
// baseline of partition.Baselines) and its execution graph.
func planned(t *testing.T, cg *cost.Graph, name string, devices int) (*partition.Result, *execution.Graph) {
	t.Helper()
	var res *partition.Result
	var err error
	if name == "search" {
		res, err = partition.Search(cg, devices, partition.Options{})
	} else {
		res, err = partition.Baseline(cg, name, devices, partition.Options{})
	}
	if err != nil {
		t.Fatal(err)
	}
	eg, err := execution.Build(cg, res.Plan)
	if err != nil {
		t.Fatal(err)
	}
	return res, eg
}

// TestClippedGradients: a training graph that clips its gradients to a
// global norm and follows a learning-rate schedule partitions over 2 and
// 4 devices (clipping's nodes of the update role are no optimizer
// updates: a clipped gradient is not tied to the gradient it scales,
// which alone may be held as partial sums), and its execution graph
// gives the unpartitioned step.
func TestClippedGradients(t *testing.T) {
	opts := &autodiff.TrainOptions{Optimizer: "adam", ClipNorm: 0.5, Schedule: autodiff.Schedule{Decay: "cosine", Warmup: 2, Total: 10}}
	cg := examplegraph.LoadTrained(t, "mlp", map[string]int64{"batch": 8, "hidden": 16}, opts)
	inputs := examplegraph.RandomInputs(cg.IR, 10)
	want, err := exec.Run(cg.IR, exec.Interp{}, inputs, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, devices := range []int{2, 4} {
		_, eg := planned(t, cg, "search", devices)
		got, err := eg.Run(inputs, want.Params)
		if err != nil {
			t.Fatal(err)
		}
		for name, w := range want.Outputs {
			if err := tensor.Compare(got[name], w, tensor.Reordered(lang.F32, 1<<12)); err != nil {
				t.Errorf("%d devices: output %s: %v", devices, name, err)
			}
		}
	}
}
