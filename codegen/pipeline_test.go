package codegen_test

import (
	"fmt"
	"testing"

	"tofuc/analysis/autodiff"
	"tofuc/analysis/cost"
	"tofuc/analysis/partition/execution"
	"tofuc/analysis/stages"
	"tofuc/codegen"
	"tofuc/internal/examplegraph"
	"tofuc/lang"
	"tofuc/runtime/exec"
	"tofuc/runtime/plan"
	"tofuc/runtime/tensor"
)

// TestPipelinePlans compiles pipeline plans of training graphs over 4
// devices and runs them on the cpu and simt runtimes (and cpu's strict
// mode, which exposes a read not ordered after its write): their loss
// and updated weights equal the interpreter's full-batch step
// (gradients accumulated over micro-batches: the tolerance for
// reordered sums). The models: the MLP (with SGD, with Adam, whose
// step count is a scalar input every stage's updates read, and with a
// learning-rate schedule of that step), the multi-branch multi-modal
// example, two branches of dropout whose seed is such an input, and a
// model with a parameter no operator reads.
// The plans: GraphPipe's as searched over PCIe, and the layers cut
// into two stages of two devices with two and four micro-batches, so
// that devices run several slots and stages pass activations and
// their gradients between them; in graph order and in the schedule's.
func TestPipelinePlans(t *testing.T) {
	tl := tools(t)
	topo := cost.Topologies["pcie"]
	small := map[string]int64{"batch": 16, "hidden": 24}
	cases := []struct {
		name    string
		load    func() *cost.Graph
		classes int64
		// graphOrder also compiles the plans node by node.
		graphOrder bool
	}{
		{"mlp", func() *cost.Graph { return examplegraph.Load(t, "mlp", true, small) }, 10, true},
		{"mlp-adam", func() *cost.Graph {
			return examplegraph.LoadTrained(t, "mlp", small, &autodiff.TrainOptions{Optimizer: "adam"})
		}, 10, false},
		{"mlp-schedule", func() *cost.Graph {
			return examplegraph.LoadTrained(t, "mlp", small, &autodiff.TrainOptions{Schedule: autodiff.Schedule{Decay: "linear", Total: 20}})
		}, 10, false},
		{"multimodal", func() *cost.Graph {
			return examplegraph.Load(t, "multimodal", true, map[string]int64{"layers": 1, "hidden": 16, "heads": 2, "batch": 8,
				"vocab": 50, "text_len": 6, "patches": 4, "patch_dim": 12, "frames": 5, "mel": 7})
		}, 2, false},
		{"dropout branches", func() *cost.Graph { return examplegraph.LoadFile(t, "testdata/branches.tdl", true, nil) }, 5, false},
		{"a spare parameter", func() *cost.Graph { return examplegraph.LoadFile(t, "testdata/spare.tdl", true, nil) }, 4, false},
	}
	for _, c := range cases {
		cg := c.load()
		g := cg.IR
		inputs := examplegraph.RandomInputs(g, c.classes)
		if _, ok := inputs[autodiff.DropoutSeedInput]; ok {
			inputs[autodiff.DropoutSeedInput] = tensor.Scalar(lang.I64, 12345) // not the zeros of memory never written
		}
		want, err := exec.Run(g, exec.Interp{}, inputs, nil, 1)
		if err != nil {
			t.Fatal(err)
		}
		ls, err := stages.NewLayers(cg, topo.Roofline(0))
		if err != nil {
			t.Fatal(err)
		}
		searched, err := stages.Search(ls, stages.GraphPipe, stages.Options{Topology: topo, Devices: 4})
		if err != nil {
			t.Fatal(err)
		}
		half := len(ls.Layers) / 2
		split := &stages.Plan{Stages: []stages.Stage{
			{Layers: seq(0, half), Devices: []int{0, 1}, MicroBatches: 2},
			{Layers: seq(half, len(ls.Layers)), Devices: []int{2, 3}, MicroBatches: 4}}}
		for name, p := range map[string]*stages.Plan{"searched": searched, "two stages": split} {
			for _, ordered := range []bool{false, true} {
				if !ordered && !c.graphOrder {
					continue
				}
				t.Run(fmt.Sprintf("%s/%s/scheduled=%v", c.name, name, ordered), func(t *testing.T) {
					parts, err := p.Parts(cg, ls)
					if err != nil {
						t.Fatal(err)
					}
					eg, err := execution.BuildStaged(cg, parts, 4)
					if err != nil {
						t.Fatal(err)
					}
					if ordered {
						if eg.Sequence, err = p.Order(eg, ls); err != nil {
							t.Fatal(err)
						}
					}
					dir := t.TempDir()
					comp, err := codegen.CompilePartitioned(eg, g, dir, codegen.Options{Emit: []string{"host", "simt"}, Tools: tl})
					if err != nil {
						t.Fatal(err)
					}
					if comp.Plan.Devices != eg.PhysicalDevices() {
						t.Errorf("the plan has %d devices, the pipeline %d", comp.Plan.Devices, eg.PhysicalDevices())
					}
					runsEqual(t, append(loadPlan(t, comp.Plan, dir, true), loadStrict(t, comp.Plan, dir)), inputs, want)
					t.Logf("%d stages, %d slots on %d devices; %d launches, %d copies", len(p.Stages), eg.Devices, comp.Plan.Devices, comp.Stats.Kernels, countSteps(comp.Plan, plan.Copy))
				})
			}
		}
	}
}

func seq(lo, hi int) []int {
	var out []int
	for i := lo; i < hi; i++ {
		out = append(out, i)
	}
	return out
}

func countSteps(p *plan.Plan, op string) int {
	n := 0
	for _, list := range p.Steps {
		for _, s := range list {
			if s.Op == op {
				n++
			}
		}
	}
	return n
}
