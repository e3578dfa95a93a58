package cost_test

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"tofuc/parser"

	"tofuc/analysis/check"
	"tofuc/analysis/cost"
	"tofuc/lang/ir"
)

// graphOf prepares a model for pricing.
func graphOf(t *testing.T, src string) *cost.Graph {
	t.Helper()
	_, ir, err := check.LoadModel(parser.Parse, "m.tdl", []byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := cost.NewGraph(ir)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// twoMatmuls is a model of two independent matmuls summed.
const twoMatmuls = `model m(x: f32[64, 64]) {
    a = param f32[64, 64]
    b = param f32[64, 64]
    return matmul(x, a) + matmul(x, b)
}
`

// rowPlan is the plan of g with these factors that splits every tensor
// along its first dimension at every step, and every operator by its
// rows i (or its first strategy, where it has no i).
func rowPlan(g *cost.Graph, factors ...int) *cost.Plan {
	p := cost.NewPlan(factors)
	for _, v := range g.Tensors() {
		p.Tensors[v] = make([]int, len(factors))
	}
	for _, n := range g.IR.Nodes {
		c, ok := g.Root(n).Lookup("split i")
		if !ok {
			c, _ = g.Root(n).Lookup("split " + g.Root(n).Analysis.Strategies[0].Name())
		}
		p.Ops[n] = slices.Repeat([]cost.Choice{c}, len(factors))
	}
	return p
}

// TestSimulateOverlap: two independent matmuls whose second operand is
// split by rows fetch half of it; on a slow link the first kernel runs
// while the second fetch is under way, so the step is shorter than
// compute plus transfers, and it is exactly the task graph's critical
// path, computed here by hand.
func TestSimulateOverlap(t *testing.T) {
	g := graphOf(t, twoMatmuls)
	p := rowPlan(g, 2)
	dev := cost.TopologyDevice{Name: "d", PeakFLOPS: 1e9, MemoryBandwidth: 1e12, MemoryBytes: 1 << 30}
	topo := &cost.Topology{Name: "t", Devices: []cost.TopologyDevice{dev, dev},
		Links: []cost.Link{{Devices: []int{0, 1}, Bandwidth: 8192 / 1e-4, Latency: 0}}}
	sim, err := g.Simulate(p, topo)
	if err != nil {
		t.Fatal(err)
	}
	// Each matmul: 32 rows of 2*64*64 FLOPs = 262144 FLOPs (262 µs at
	// 1 GFLOP/s), fetching half of its 64x64 f32 weight: 8192 bytes
	// (100 µs). The add is element-wise, split like its inputs: no
	// transfer, 32*64 FLOPs. Fetch 1, then kernel 1 overlapping fetch 2,
	// then kernel 2, then the add.
	want := 100e-6 + 262.144e-6 + 262.144e-6 + 2.048e-6
	if math.Abs(sim.Seconds-want) > 1e-9 {
		t.Errorf("step %g s, want %g s (compute %g, transfer %g)", sim.Seconds, want, sim.Compute, sim.Transfer)
	}
	if sim.Compute+sim.Transfer <= sim.Seconds {
		t.Errorf("no overlap: compute %g + transfer %g <= step %g", sim.Compute, sim.Transfer, sim.Seconds)
	}
}

// TestSimulateMachines: the same two-step plan on two machines of two
// devices is slower than on one fast link and faster than on one slow
// link; and it is slower where the groups of the step that moves more
// bytes (Tofu's δ_i) span the machines than where the other step's do.
func TestSimulateMachines(t *testing.T) {
	g := graphOf(t, twoMatmuls)
	p := rowPlan(g, 2, 2)
	dev := cost.TopologyDevice{Name: "d", PeakFLOPS: 1e9, MemoryBandwidth: 1e12, MemoryBytes: 1 << 30}
	const fast, slow = 1e9, 1e7
	topology := func(links ...cost.Link) *cost.Topology {
		return &cost.Topology{Name: "t", Devices: []cost.TopologyDevice{dev, dev, dev, dev}, Links: links}
	}
	all := func(bw float64) cost.Link { return cost.Link{Devices: []int{0, 1, 2, 3}, Bandwidth: bw} }
	step := map[string]float64{}
	for name, topo := range map[string]*cost.Topology{
		"fast": topology(all(fast)),
		"slow": topology(all(slow)),
		// Machines {0, 1} and {2, 3}: the first step (digit 0: devices
		// 0 and 2) crosses them.
		"first crosses": topology(cost.Link{Devices: []int{0, 1}, Bandwidth: fast}, cost.Link{Devices: []int{2, 3}, Bandwidth: fast}, all(slow)),
		// Machines {0, 2} and {1, 3}: the second step crosses them.
		"second crosses": topology(cost.Link{Devices: []int{0, 2}, Bandwidth: fast}, cost.Link{Devices: []int{1, 3}, Bandwidth: fast}, all(slow)),
	} {
		sim, err := g.Simulate(p, topo)
		if err != nil {
			t.Fatal(err)
		}
		step[name] = sim.Seconds
	}
	c, err := g.Evaluate(p)
	if err != nil {
		t.Fatal(err)
	}
	cheap, dear := "first crosses", "second crosses"
	if c.StepBytes[0] > c.StepBytes[1] {
		cheap, dear = dear, cheap
	}
	if c.StepBytes[0] == c.StepBytes[1] || !(step["fast"] < step[cheap] && step[cheap] < step[dear] && step[dear] < step["slow"]) {
		t.Errorf("steps %v, step bytes %v: want fast < %s < %s < slow", step, c.StepBytes, cheap, dear)
	}
}

// TestDeltaReuses: a Delta prices and simulates anew only the nodes
// whose choices or tensors' layouts it has not seen (none for a plan
// seen; the one reader of a tensor moved), forgets them for plans of
// other factors, and equals Graph.Evaluate and Graph.Simulate on each.
func TestDeltaReuses(t *testing.T) {
	g := graphOf(t, twoMatmuls)
	topo := cost.Topologies["h100-nvlink"]
	d := g.NewDelta(topo)
	nodes := len(g.IR.Nodes)
	check := func(p *cost.Plan, recomputed int) {
		t.Helper()
		before := d.Recomputed()
		dc, ds, err := d.Price(p, nil)
		if err != nil {
			t.Fatal(err)
		}
		fc, _ := g.Evaluate(p)
		fs, _ := g.Simulate(p, topo)
		if !reflect.DeepEqual(dc, fc) || *ds != *fs {
			t.Errorf("factors %v: delta %+v %+v, full %+v %+v", p.Factors, dc, ds, fc, fs)
		}
		if got := d.Recomputed() - before; got != recomputed {
			t.Errorf("factors %v: %d nodes recomputed, want %d", p.Factors, got, recomputed)
		}
	}
	p := rowPlan(g, 2)
	check(p, 2*nodes) // every node's bytes and tasks
	check(rowPlan(g, 2), 0)
	var b *ir.Value
	for _, pr := range g.IR.Params {
		if pr.Value.Name == "b" {
			b = pr.Value
		}
	}
	p.Tensors[b] = []int{cost.Replicated}
	check(p, 2) // b's one reader, its bytes and its tasks
	check(rowPlan(g, 2, 2), 2*nodes)
	check(rowPlan(g, 2), 2*nodes) // forgotten with the factors
}

// TestTopologies: the built-in profiles validate; a file is read with
// its fields checked; mistakes are said.
func TestTopologies(t *testing.T) {
	for _, name := range cost.TopologyNames() {
		if err := cost.Topologies[name].Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	dir := t.TempDir()
	for _, c := range []struct{ json, want string }{
		{`{"name": "ok", "devices": [{"name": "cpu", "peak_flops": 1e10, "memory_bandwidth": 1e10, "memory_bytes": 1000}], "links": []}`, ""},
		{`{"name": "x", "devices": []}`, "at least one device"},
		{`{"name": "x", "devices": [{"name": "a", "peak_flops": 0, "memory_bandwidth": 1, "memory_bytes": 1}]}`, "must be positive"},
		{`{"name": "x", "devices": [{"name": "a", "peak_flops": 1, "memory_bandwidth": 1, "memory_bytes": 1}], "links": [{"devices": [0, 3], "bandwidth": 1}]}`, "no device 3"},
		{`{"name": "x", "gpus": 8}`, "unknown field"},
	} {
		path := filepath.Join(dir, "t.json")
		if err := os.WriteFile(path, []byte(c.json), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := cost.LoadTopology(path)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: %v, want %q", c.json, err, c.want)
		}
	}
	if _, err := cost.LoadTopology("no-such-profile"); err == nil || !strings.Contains(err.Error(), "h100-nvlink") {
		t.Errorf("an unknown name: %v", err)
	}
}

// TestSimulateOneIO: with an io_bandwidth and step_seconds, the
// single-device step adds the copies of its inputs and outputs and the
// fixed cost to its kernels; without them it is the kernels alone.
func TestSimulateOneIO(t *testing.T) {
	g := graphOf(t, "model m(a: f32[1000], b: f32[1000]) {\n    c = a + b\n    return c\n}\n")
	d := cost.TopologyDevice{Name: "cpu", PeakFLOPS: 1e9, MemoryBandwidth: 1e9, MemoryBytes: 1 << 30, LaunchSeconds: 1e-6}
	plain, err := cost.SimulateOne(g.IR, &cost.Topology{Devices: []cost.TopologyDevice{d}})
	if err != nil {
		t.Fatal(err)
	}
	// One kernel: 12,000 bytes at 1 GB/s, and its launch.
	if want := 12e-6 + 1e-6; math.Abs(plain.Seconds-want) > 1e-12 || plain.Transfer != 0 {
		t.Errorf("kernels alone: %g s (transfer %g), want %g", plain.Seconds, plain.Transfer, want)
	}
	d.IOBandwidth, d.StepSeconds = 1e8, 5e-6
	io, err := cost.SimulateOne(g.IR, &cost.Topology{Devices: []cost.TopologyDevice{d}})
	if err != nil {
		t.Fatal(err)
	}
	// 12,000 bytes of inputs and output at 100 MB/s, and the fixed cost.
	if want := plain.Seconds + 120e-6 + 5e-6; math.Abs(io.Seconds-want) > 1e-12 || math.Abs(io.Transfer-120e-6) > 1e-12 {
		t.Errorf("with copies: %g s (transfer %g), want %g", io.Seconds, io.Transfer, want)
	}
	d.StepSeconds = -1
	if err := (&cost.Topology{Devices: []cost.TopologyDevice{d}}).Validate(); err == nil {
		t.Error("a negative step_seconds was accepted")
	}
}
