package stages_test

import (
	"slices"
	"strings"
	"testing"

	"tofuc/analysis/cost"
	"tofuc/analysis/stages"
	"tofuc/internal/examplegraph"
)

// plans searches both methods for example model m's training graph.
func plans(t *testing.T, m, topology string, devices int, memory int64) (*stages.Layers, *stages.Plan, *stages.Plan) {
	t.Helper()
	topo := cost.Topologies[topology]
	ls, err := stages.NewLayers(examplegraph.Load(t, m, true, nil), topo.Roofline(0))
	if err != nil {
		t.Fatal(err)
	}
	opt := stages.Options{Topology: topo, Devices: devices, Memory: memory}
	gp, err := stages.Search(ls, stages.GraphPipe, opt)
	if err != nil {
		t.Fatal(err)
	}
	sq, err := stages.Search(ls, stages.Sequential, opt)
	if err != nil {
		t.Fatal(err)
	}
	return ls, gp, sq
}

// TestPlansAreValid checks what every pipeline plan must be: each layer
// in one stage, stages on disjoint devices among those given, every
// forward edge going to the same or a later stage, the stage graph the
// layers' DAG condensed (series-parallel) or a chain (linearised),
// within memory, and GraphPipe no slower
// than the sequential pipeline (its search includes the linearised
// layers).
func TestPlansAreValid(t *testing.T) {
	for _, m := range []string{"multimodal", "dlrm", "uno", "mlp", "transformer"} {
		for _, topo := range []string{"h100-nvlink", "pcie", "h100-2x8-ib"} {
			devices := len(cost.Topologies[topo].Devices)
			ls, gp, sq := plans(t, m, topo, devices, 0)
			for _, p := range []*stages.Plan{gp, sq} {
				checkPlan(t, m+" "+topo+" "+p.Method, ls, p, devices)
			}
		}
	}
}

func checkPlan(t *testing.T, what string, ls *stages.Layers, p *stages.Plan, devices int) {
	t.Helper()
	stageOf := make([]int, len(ls.Layers))
	for i := range stageOf {
		stageOf[i] = -1
	}
	used := map[int]bool{}
	for i, s := range p.Stages {
		for _, l := range s.Layers {
			if stageOf[l] >= 0 {
				t.Fatalf("%s: layer %d in stages %d and %d", what, l, stageOf[l], i)
			}
			stageOf[l] = i
		}
		for _, d := range s.Devices {
			if used[d] || d < 0 || d >= devices {
				t.Fatalf("%s: device %d used twice or out of range", what, d)
			}
			used[d] = true
		}
	}
	for l, s := range stageOf {
		if s < 0 {
			t.Fatalf("%s: layer %d in no stage", what, l)
		}
		for _, n := range ls.Succ[l] {
			if stageOf[n] < s {
				t.Errorf("%s: edge %d -> %d goes back from stage %d to %d", what, l, n, s, stageOf[n])
			}
			if p.Structure == stages.SeriesParallel && stageOf[n] != s && !slices.Contains(p.Stages[s].Succ, stageOf[n]) {
				t.Errorf("%s: edge %d -> %d has no stage edge %d -> %d", what, l, n, s, stageOf[n])
			}
		}
	}
	for i, s := range p.Stages {
		if p.Structure == stages.Linearised && i+1 < len(p.Stages) && !slices.Equal(s.Succ, []int{i + 1}) {
			t.Errorf("%s: linearised stage %d feeds %v, not the next stage alone", what, i, s.Succ)
		}
	}
	if p.Seconds <= 0 || p.Bubble < 0 || p.Bubble >= 1 {
		t.Errorf("%s: step %g s, bubble %g", what, p.Seconds, p.Bubble)
	}
	for i, s := range p.Schedule {
		st := p.Stages[i]
		if int64(st.MicroBatches)*st.MicroBatch != ls.Batch || len(s) != 2*st.MicroBatches {
			t.Errorf("%s: stage %d runs %d passes of %d micro-batches of %d (batch %d)", what, i, len(s), st.MicroBatches, st.MicroBatch, ls.Batch)
		}
		for j := 1; j < len(s); j++ {
			if s[j].Start < s[j-1].End {
				t.Errorf("%s: stage %d starts a pass before the last ended", what, i)
			}
		}
		if end := s[len(s)-1].End + p.Stages[i].Sync; end > p.Seconds*(1+1e-12) {
			t.Errorf("%s: stage %d ends at %g s, after the step's %g s", what, i, end, p.Seconds)
		}
	}
}

// TestParallelBranchesWin: on the multi-modal example over PCIe the
// branches as parallel stages beat every sequential pipeline by the
// margin GraphPipe reports (at least 1.2×), with the branches on
// disjoint devices side by side.
func TestParallelBranchesWin(t *testing.T) {
	_, gp, sq := plans(t, "multimodal", "pcie", 8, 0)
	if gp.Structure != stages.SeriesParallel {
		t.Fatalf("graphpipe chose the %s layers", gp.Structure)
	}
	if r := sq.Seconds / gp.Seconds; r < 1.2 {
		t.Errorf("graphpipe's throughput is %.2f× the sequential pipeline's, not at least 1.2×", r)
	}
	parallel := 0
	for _, s := range gp.Stages {
		if len(s.Succ) == 1 && s.Succ[0] == len(gp.Stages)-1 {
			parallel++
		}
	}
	if parallel < 3 {
		t.Errorf("%d stages feed the last side by side, not the 3 branches", parallel)
	}
}

func TestNoPlanFits(t *testing.T) {
	topo := cost.Topologies["h100-nvlink"]
	ls, err := stages.NewLayers(examplegraph.Load(t, "mlp", true, nil), topo.Roofline(0))
	if err != nil {
		t.Fatal(err)
	}
	_, err = stages.Search(ls, stages.GraphPipe, stages.Options{Topology: topo, Devices: 8, Memory: 1 << 10})
	if err == nil || !strings.Contains(err.Error(), "no graphpipe pipeline plan of 8 devices fits in 1.00 KiB per device") {
		t.Errorf("got %v", err)
	}
}

// TestBatchRefused: pipeline plans cut the batch into micro-batches, so
// a batch of one and an input whose first splittable extent is not the
// batch (an RNN's time steps) are refused, not planned as samples.
func TestBatchRefused(t *testing.T) {
	topo := cost.Topologies["h100-nvlink"]
	for _, tc := range []struct {
		model string
		set   map[string]int64
		want  string
	}{
		{"mlp", map[string]int64{"batch": 1}, "the batch is 1"},
		{"rnn", nil, "splits the input x [20 16 256] along dimension 0, not along its batch of 16"},
	} {
		_, err := stages.NewLayers(examplegraph.Load(t, tc.model, true, tc.set), topo.Roofline(0))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.model, err, tc.want)
		}
	}
}

// TestTiedWeights: the layers that read one weight are one layer (its
// gradient is summed and its update runs there), with the layer between
// them, since joining them closes a cycle; no layer is an update alone,
// and the plans are valid.
func TestTiedWeights(t *testing.T) {
	topo := cost.Topologies["pcie"]
	g := examplegraph.LoadFile(t, "testdata/tied.tdl", true, nil)
	ls, err := stages.NewLayers(g, topo.Roofline(0))
	if err != nil {
		t.Fatal(err)
	}
	layerOf := map[string]int{}
	for i, l := range ls.Layers {
		forward := false
		for _, j := range l.Nodes {
			n := g.IR.Nodes[j]
			layerOf[n.Name] = i
			forward = forward || n.Role == "forward" || n.Role == "loss"
		}
		if !forward {
			t.Errorf("layer %s has no forward operator", l.Name)
		}
	}
	for _, n := range g.IR.Nodes {
		for _, v := range n.Inputs {
			if v.Name == "w" && layerOf[n.Name] != layerOf[g.IR.Nodes[0].Name] {
				t.Errorf("%s (%s) reads w outside the first layer that does", n.Name, n.Role)
			}
		}
	}
	if len(ls.Layers) < 2 {
		t.Errorf("%d layers: the loss should stay a layer of its own", len(ls.Layers))
	}
	for _, method := range []string{stages.GraphPipe, stages.Sequential} {
		p, err := stages.Search(ls, method, stages.Options{Topology: topo, Devices: 4})
		if err != nil {
			t.Fatal(err)
		}
		checkPlan(t, "tied "+method, ls, p, 4)
	}
}

// TestMemoryLimit: under a limit below the unconstrained plan's largest
// stage, every stage fits it (more devices, other stages or fewer
// micro-batches in flight), and a limit below the weights of one layer
// is refused.
func TestMemoryLimit(t *testing.T) {
	topo := cost.Topologies["pcie"]
	ls, err := stages.NewLayers(examplegraph.Load(t, "uno", true, map[string]int64{"batch": 256}), topo.Roofline(0))
	if err != nil {
		t.Fatal(err)
	}
	peak := func(p *stages.Plan) int64 {
		var m int64
		for _, s := range p.Stages {
			m = max(m, s.MemoryBytes)
		}
		return m
	}
	free, err := stages.Search(ls, stages.GraphPipe, stages.Options{Topology: topo, Devices: 8})
	if err != nil {
		t.Fatal(err)
	}
	limit := peak(free) * 3 / 4
	tight, err := stages.Search(ls, stages.GraphPipe, stages.Options{Topology: topo, Devices: 8, Memory: limit})
	if err != nil {
		t.Fatal(err)
	}
	if got := peak(tight); got > limit {
		t.Errorf("a stage needs %d bytes a device, over the limit %d", got, limit)
	}
	if _, err := stages.Search(ls, stages.GraphPipe, stages.Options{Topology: topo, Devices: 8, Memory: 1 << 20}); err == nil {
		t.Error("a plan fits in 1 MiB a device")
	}
}
