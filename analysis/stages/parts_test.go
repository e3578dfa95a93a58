package stages_test

import (
	"fmt"
	"slices"
	"testing"

	"tofuc/analysis/cost"
	"tofuc/analysis/partition/execution"
	"tofuc/analysis/stages"
	"tofuc/internal/examplegraph"
	"tofuc/lang"
	"tofuc/runtime/exec"
	"tofuc/runtime/tensor"
)

// smallModels are the pipeline examples at sizes the interpreter runs
// in a second.
var smallModels = []struct {
	name string
	set  map[string]int64
}{
	{"mlp", map[string]int64{"batch": 16, "hidden": 24}},
	{"multimodal", map[string]int64{"layers": 1, "hidden": 16, "heads": 2, "batch": 8, "vocab": 50, "text_len": 6,
		"patches": 4, "patch_dim": 12, "frames": 5, "mel": 7}},
}

// TestPipelineEqualsWhole: a pipeline plan's execution graph, its
// stages' micro-batches slots of their devices, run by the interpreter,
// gives the full-batch training step's outputs (the loss, the updated
// weights) within the tolerance for reordered sums: gradients are
// accumulated over micro-batches and devices. Each searched plan is run
// as searched and with its stages' micro-batches changed (one, two,
// four, different per stage), so that devices run several slots.
func TestPipelineEqualsWhole(t *testing.T) {
	topo := cost.Topologies["pcie"]
	for _, m := range smallModels {
		g := examplegraph.Load(t, m.name, true, m.set)
		inputs := examplegraph.RandomInputs(g.IR, 2)
		want, err := exec.Run(g.IR, exec.Interp{}, inputs, nil, 1)
		if err != nil {
			t.Fatal(err)
		}
		ls, err := stages.NewLayers(g, topo.Roofline(0))
		if err != nil {
			t.Fatal(err)
		}
		for _, method := range []string{stages.GraphPipe, stages.Sequential} {
			p, err := stages.Search(ls, method, stages.Options{Topology: topo, Devices: 4})
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range variants(p) {
				t.Run(fmt.Sprintf("%s/%s/%s", m.name, method, v.name), func(t *testing.T) {
					p := v.plan
					parts, err := p.Parts(g, ls)
					if err != nil {
						t.Fatal(err)
					}
					eg, err := execution.BuildStaged(g, parts, 4)
					if err != nil {
						t.Fatal(err)
					}
					got, err := eg.Run(inputs, want.Params)
					if err != nil {
						t.Fatal(err)
					}
					for name, w := range want.Outputs {
						if err := tensor.Compare(got[name], w, tensor.Reordered(lang.F32, 1<<12)); err != nil {
							t.Errorf("output %s: %v", name, err)
						}
					}
					t.Logf("%d stages on %d devices, %d slots", len(p.Stages), eg.PhysicalDevices(), eg.Devices)
				})
			}
		}
	}
}

type variant struct {
	name string
	plan *stages.Plan
}

// variants are plan p as searched and with its stages changed: their
// micro-batches (one, two, four, different per stage), and the layers
// cut into two stages on two devices each.
func variants(p *stages.Plan) []variant {
	out := []variant{{"searched", p}}
	for _, micro := range [][]int{{1}, {2}, {4, 2, 1}} {
		q := *p
		q.Stages = slices.Clone(p.Stages)
		for i := range q.Stages {
			q.Stages[i].MicroBatches = micro[i%len(micro)]
		}
		out = append(out, variant{fmt.Sprint("micro-batches ", micro), &q})
	}
	var layers []int
	for _, s := range p.Stages {
		layers = append(layers, s.Layers...)
	}
	slices.Sort(layers)
	if half := len(layers) / 2; half > 0 {
		q := *p
		q.Stages = []stages.Stage{{Layers: layers[:half], Devices: []int{0, 1}, MicroBatches: 2},
			{Layers: layers[half:], Devices: []int{2, 3}, MicroBatches: 4}}
		out = append(out, variant{"two stages of two devices", &q})
	}
	return out
}

// TestOrderFollowsSchedule: the units of a pipeline plan's execution
// graph come each once, every node's completion once, and the last
// stage's device runs micro-batch 0's backward pass before micro-batch
// 1's forward pass, as 1F1B's schedule has it (the MLP at batch 512 and
// width 2048 over NVLink: three stages of two micro-batches); with the
// schedule dropped, GPipe's order runs every forward pass first.
func TestOrderFollowsSchedule(t *testing.T) {
	topo := cost.Topologies["h100-nvlink"]
	g := examplegraph.Load(t, "mlp", true, map[string]int64{"batch": 512, "hidden": 2048})
	ls, err := stages.NewLayers(g, topo.Roofline(0))
	if err != nil {
		t.Fatal(err)
	}
	p, err := stages.Search(ls, stages.GraphPipe, stages.Options{Topology: topo, Devices: 4})
	if err != nil {
		t.Fatal(err)
	}
	last := p.Stages[len(p.Stages)-1]
	if len(p.Stages) < 2 || last.MicroBatches < 2 {
		t.Fatalf("the plan has %d stages, the last of %d micro-batches: the test needs a pipeline", len(p.Stages), last.MicroBatches)
	}
	parts, err := p.Parts(g, ls)
	if err != nil {
		t.Fatal(err)
	}
	eg, err := execution.BuildStaged(g, parts, 4)
	if err != nil {
		t.Fatal(err)
	}
	firstSlot := eg.Devices - last.MicroBatches*len(last.Devices)
	// passOrder is the micro-batch and direction of each of the last
	// stage's first device's passes, in the order its units come.
	passOrder := func(seq []execution.Unit) []string {
		var out []string
		seen := map[execution.Unit]bool{}
		for _, u := range seq {
			if seen[u] {
				t.Fatalf("unit %v twice", u)
			}
			seen[u] = true
			if u.Slot < firstSlot || eg.Device(u.Slot) != last.Devices[0] {
				continue
			}
			n := eg.Ops[u.Node][u.Slot].Node
			pass := fmt.Sprintf("%s%d", map[bool]string{true: "F", false: "B"}[n.Role == "forward" || n.Role == "loss"], (u.Slot-firstSlot)/len(last.Devices))
			if n.Role != "update" && (len(out) == 0 || out[len(out)-1] != pass) {
				out = append(out, pass)
			}
		}
		units := 0
		for _, ops := range eg.Ops {
			units++ // the completion
			for _, op := range ops {
				if op.Inst != nil {
					units++
				}
			}
		}
		if len(seen) != units {
			t.Errorf("%d units in the order, %d in the graph", len(seen), units)
		}
		return out
	}
	seq, err := p.Order(eg, ls)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(passOrder(seq)); got != "[F0 B0 F1 B1]" {
		t.Errorf("the last stage's passes run %s, want 1F1B's [F0 B0 F1 B1]", got)
	}
	p.Schedule = nil
	if seq, err = p.Order(eg, ls); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(passOrder(seq)); got != "[F0 F1 B0 B1]" {
		t.Errorf("without a schedule the last stage's passes run %s, want GPipe's [F0 F1 B0 B1]", got)
	}
}
