package codegen_test

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"tofuc/analysis/cost"
	"tofuc/analysis/partition"
	"tofuc/analysis/partition/execution"
	"tofuc/codegen"
	"tofuc/internal/examplegraph"
	"tofuc/lang/ir"
	"tofuc/runtime/exec"
	"tofuc/runtime/plan"
	"tofuc/runtime/tensor"
)

// TestPartitionedPlans compiles the searched partition of training graphs
// over 2, 4 and 8 devices and runs the plans on the cpu and simt runtimes:
// they equal the single-device interpreter's result. The Wide ResNet's
// training graph needs batch statistics over enough elements to be well
// conditioned (with 2 values per channel its gradients change by orders
// of magnitude with the order of additions, the interpreter's own
// partitioned run included): that case, about 20 minutes on two cores,
// runs with TOFUC_LONG=1 (make bench); the suite runs its inference graph.
func TestPartitionedPlans(t *testing.T) {
	tl := tools(t)
	type partCase struct {
		name    string
		train   bool
		set     map[string]ir.AttrValue
		classes int64
	}
	cases := []partCase{
		{"mlp", true, attrs("batch", 8, "hidden", 16), 10},
		{"wresnet", false, attrs("depth", 50, "width", 1, "batch", 2, "image", 16, "classes", 10), 10},
		{"rnn", true, attrs("layers", 2, "hidden", 8, "steps", 3, "batch", 4, "classes", 4), 4},
	}
	if os.Getenv("TOFUC_LONG") != "" {
		cases = append(cases, partCase{"wresnet", true, attrs("depth", 50, "width", 1, "batch", 8, "image", 32, "classes", 10, "train", true), 10})
	}
	for _, c := range cases {
		var (
			g      *ir.Graph
			cg     *cost.Graph
			inputs map[string]*tensor.Tensor
			want   *exec.Result
		)
		// prepare loads the model and runs the interpreter once, for the
		// first of its subtests that runs.
		prepare := func(t *testing.T) {
			if g != nil {
				return
			}
			g = loadExample(t, c.name, c.train, c.set)
			inputs = examplegraph.RandomInputs(g, c.classes)
			var err error
			if want, err = exec.Run(g, exec.Interp{}, inputs, nil, 1); err != nil {
				t.Fatal(err)
			}
			if cg, err = cost.NewGraph(g); err != nil {
				t.Fatal(err)
			}
		}
		for _, devices := range []int{2, 4, 8} {
			kind := "inference"
			if c.train {
				kind = "training"
			}
			t.Run(fmt.Sprintf("%s-%s/%d", c.name, kind, devices), func(t *testing.T) {
				prepare(t)
				res, err := partition.Search(cg, devices, partition.Options{})
				if err != nil {
					t.Fatal(err)
				}
				eg, err := execution.Build(cg, res.Plan)
				if err != nil {
					t.Fatal(err)
				}
				dir := t.TempDir()
				comp, err := codegen.CompilePartitioned(eg, g, dir, codegen.Options{Emit: []string{"host", "simt"}, Tools: tl})
				if err != nil {
					t.Fatal(err)
				}
				runsEqual(t, loadPlan(t, comp.Plan, dir, true), inputs, want)
				t.Logf("%d launches of %d distinct kernels; arenas %v bytes", comp.Stats.Kernels, comp.Stats.Distinct, comp.Plan.ArenaBytes)
			})
		}
	}
}

// TestPartitionedCollectives: the MLP's training plan over 4 devices
// combines its partial results (the loss, the gradient of a split
// layer's input) with all-reduce steps, every member one, alike but for
// its result, and no reduce step is left.
func TestPartitionedCollectives(t *testing.T) {
	g := loadExample(t, "mlp", true, attrs("batch", 8, "hidden", 16))
	cg, err := cost.NewGraph(g)
	if err != nil {
		t.Fatal(err)
	}
	res, err := partition.Search(cg, 4, partition.Options{})
	if err != nil {
		t.Fatal(err)
	}
	eg, err := execution.Build(cg, res.Plan)
	if err != nil {
		t.Fatal(err)
	}
	comp, err := codegen.CompilePartitioned(eg, g, t.TempDir(), codegen.Options{Emit: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	p := comp.Plan
	members := map[string][]int{} // per group and parts, the devices with the step
	groups := map[string][]int{}
	for d, list := range p.Steps {
		for i, s := range list {
			switch {
			case s.Op == plan.Reduce:
				t.Errorf("%s: a reduce step where the group's members all combine the same box", s.Where(d, i))
			case s.Op == plan.AllReduce:
				key := fmt.Sprint(s.Group, s.Parts)
				members[key], groups[key] = append(members[key], d), slices.Sorted(slices.Values(s.Group))
				if p.Buffers[s.To].Device != d {
					t.Errorf("%s: its result on device %d", s.Where(d, i), p.Buffers[s.To].Device)
				}
			}
		}
	}
	if len(members) == 0 {
		t.Error("no all-reduce step")
	}
	for key, ds := range members {
		if !slices.Equal(ds, groups[key]) {
			t.Errorf("all-reduce %s: steps on devices %v, not on each member once", key, ds)
		}
	}
}

// TestPartitionedEmptyParts: training steps where some devices get no
// sample and so compute no partial sum of a weight's gradient (the MLP
// at batch 2 and 3 over 4 and 8 devices, the RNN at batch 2 over 3,
// whose time steps accumulate their gradients' partial sums in the
// tiles, as the search finds it and as compile chooses it): the updates
// add only the sums that are written, and a tile
// read but never written is filled with zeros first (its bytes may have
// held another buffer), so that they equal the interpreter's. Run in
// cpu's strict mode too.
func TestPartitionedEmptyParts(t *testing.T) {
	tl := tools(t)
	for _, c := range []struct {
		model   string
		set     map[string]ir.AttrValue
		devices int
		plan    string
	}{
		{"mlp", attrs("batch", 2, "hidden", 24), 4, "search"},
		{"mlp", attrs("batch", 2, "hidden", 24), 8, "search"},
		{"mlp", attrs("batch", 3, "hidden", 24), 4, "data_parallel"},
		{"rnn", attrs("layers", 2, "hidden", 16, "steps", 3, "batch", 2, "classes", 4), 3, "search"},
		{"rnn", attrs("layers", 2, "hidden", 16, "steps", 3, "batch", 2, "classes", 4), 3, "chosen"},
	} {
		t.Run(fmt.Sprintf("%s %v on %d devices, %s", c.model, c.set["batch"].Int, c.devices, c.plan), func(t *testing.T) {
			g := loadExample(t, c.model, true, c.set)
			inputs := examplegraph.RandomInputs(g, 4)
			want, err := exec.Run(g, exec.Interp{}, inputs, nil, 1)
			if err != nil {
				t.Fatal(err)
			}
			cg, err := cost.NewGraph(g)
			if err != nil {
				t.Fatal(err)
			}
			var res *partition.Result
			switch c.plan {
			case "search":
				res, err = partition.Search(cg, c.devices, partition.Options{})
			case "chosen": // as tofuc compile chooses it
				var out *partition.Outcome
				if out, err = partition.Run(cg, c.devices, partition.Options{Seed: partition.DefaultSeed}, false); err == nil {
					res = out.Best
				}
			default:
				res, err = partition.Baseline(cg, c.plan, c.devices, partition.Options{})
			}
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
			zeros := 0
			for _, list := range comp.Plan.Steps {
				for _, st := range list {
					if strings.HasPrefix(st.Label, "zeros for ") {
						zeros++
					}
				}
			}
			t.Logf("%d tiles filled with zeros", zeros)
			runsEqual(t, append(loadPlan(t, comp.Plan, dir, false), loadStrict(t, comp.Plan, dir)), inputs, want)
		})
	}
}
