package stages

import (
	"maps"
	"math"
	"slices"
	"testing"

	"tofuc/analysis/cost"
)

// dag is a Layers of n unit layers with the given edges.
func dag(n int, edges ...[2]int) *Layers {
	ls := &Layers{Batch: 8, Layers: make([]Layer, n)}
	for i := range ls.Layers {
		ls.Layers[i] = Layer{Nodes: []int{i}, Work: Work{Forward: Affine{0, 1}, Backward: Affine{0, 2}}}
	}
	for _, e := range edges {
		ls.Sends = append(ls.Sends, Send{From: e[0], To: []int{e[1]}, PerSample: 1})
	}
	ls.link()
	return ls
}

// shape writes a decomposition: L leaves, S(...) series, P(...) parallel.
func shape(n *spNode) string {
	if n.layer >= 0 {
		return "L"
	}
	s := "S("
	if n.parallel {
		s = "P("
	}
	for _, c := range n.children {
		s += shape(c)
	}
	return s + ")"
}

func TestDecompose(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ls    *Layers
		shape string
	}{
		{"chain", dag(3, [2]int{0, 1}, [2]int{1, 2}), "S(LLL)"},
		// three branches from a source, joined: S(L P(L L S(LL)) L)
		{"branches", dag(6, [2]int{0, 1}, [2]int{0, 2}, [2]int{0, 3}, [2]int{3, 4}, [2]int{1, 5}, [2]int{2, 5}, [2]int{4, 5}), "S(LP(LLS(LL))L)"},
		// two inputs' branches, no common source
		{"two sources", dag(5, [2]int{0, 1}, [2]int{2, 3}, [2]int{1, 4}, [2]int{3, 4}), "S(P(S(LL)S(LL))L)"},
		// a residual: 0 feeds 1 and 2, 1 feeds 2
		{"residual", dag(3, [2]int{0, 1}, [2]int{0, 2}, [2]int{1, 2}), "S(LLL)"},
		// an N (0→2, 1→2, 1→3) is no series-parallel graph: linearised
		{"N", dag(4, [2]int{0, 2}, [2]int{1, 2}, [2]int{1, 3}), "S(LLLL)"},
		// an N between a source and a sink: one series, not one nested
		// in another
		{"N inside", dag(6, [2]int{0, 1}, [2]int{0, 2}, [2]int{1, 3}, [2]int{2, 3}, [2]int{2, 4}, [2]int{3, 5}, [2]int{4, 5}), "S(LLLLLL)"},
	} {
		got := shape(tc.ls.decompose([]int{0, 1, 2, 3, 4, 5}[:len(tc.ls.Layers)]))
		if got != tc.shape {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.shape)
		}
	}
}

// TestScheduleChain: S equal stages, M micro-batches, free transfers:
// 1F1B takes (M + S − 1) forward-and-backward times.
func TestScheduleChain(t *testing.T) {
	topo := &cost.Topology{Name: "free", Devices: make([]cost.TopologyDevice, 4),
		Links: []cost.Link{{Devices: []int{0, 1, 2, 3}, Bandwidth: math.Inf(1)}}}
	for _, tc := range []struct{ stages, micro int }{{2, 4}, {4, 8}, {3, 1}, {4, 2}} {
		var chain [][2]int
		for i := range tc.stages - 1 {
			chain = append(chain, [2]int{i, i + 1})
		}
		p := &planner{ls: dag(tc.stages, chain...), opt: Options{Topology: topo}}
		plan := &Plan{MicroBatch: 1, MicroBatches: tc.micro}
		for i := range tc.stages {
			plan.Stages = append(plan.Stages, Stage{Layers: []int{i}, Devices: []int{i}, Forward: 1, Backward: 2, MicroBatch: 1, MicroBatches: tc.micro})
		}
		flows := p.flows(plan, false)
		p.edges(plan, flows)
		p.inFlight(plan)
		for i, s := range plan.Stages {
			if want := min(tc.stages-i, tc.micro); s.InFlight != want {
				t.Errorf("%d stages, %d micro-batches: stage %d holds %d in flight, want %d", tc.stages, tc.micro, i, s.InFlight, want)
			}
		}
		if err := p.simulate(plan, flows); err != nil {
			t.Fatal(err)
		}
		want := float64(tc.micro+tc.stages-1) * 3
		if plan.Seconds != want {
			t.Errorf("%d stages, %d micro-batches: %g s, want %g", tc.stages, tc.micro, plan.Seconds, want)
		}
		bubble := 1 - float64(tc.micro)*3/want
		if math.Abs(plan.Bubble-bubble) > 1e-12 {
			t.Errorf("%d stages, %d micro-batches: bubble %g, want %g", tc.stages, tc.micro, plan.Bubble, bubble)
		}
	}
}

// TestFlows: a value read by two later stages is sent once to each in
// a stage graph, and once along every hop in a chain, where the stage
// between passes it on; in-flight counts follow the longest path to the
// loss.
func TestFlows(t *testing.T) {
	// 0 feeds 1 and 3 (a skip), 1 feeds 2, 2 feeds 3; 0's value is read
	// by two layers of stage 1.
	ls := dag(5, [2]int{1, 2}, [2]int{2, 3}, [2]int{3, 4})
	ls.Sends = append(ls.Sends, Send{From: 0, To: []int{1, 2, 4}, PerSample: 10})
	ls.link()
	p := &planner{ls: ls}
	var plan Plan
	for _, layers := range [][]int{{0}, {1, 2}, {3}, {4}} {
		plan.Stages = append(plan.Stages, Stage{Layers: layers, MicroBatch: 1, MicroBatches: 8})
	}
	dag := p.flows(&plan, false)
	if want := map[[2]int]float64{{0, 1}: 10, {0, 3}: 10, {1, 2}: 1, {2, 3}: 1}; !maps.Equal(dag, want) {
		t.Errorf("stage graph flows %v, want %v", dag, want)
	}
	chain := p.flows(&plan, true)
	if want := map[[2]int]float64{{0, 1}: 10, {1, 2}: 11, {2, 3}: 11}; !maps.Equal(chain, want) {
		t.Errorf("chain flows %v, want %v", chain, want)
	}
	p.edges(&plan, dag)
	p.inFlight(&plan)
	var inFlight []int
	for _, s := range plan.Stages {
		inFlight = append(inFlight, s.InFlight)
	}
	if want := []int{4, 3, 2, 1}; !slices.Equal(inFlight, want) {
		t.Errorf("in flight %v, want %v", inFlight, want)
	}
}

// TestBounded: a series of more children than maxSeries is cut into
// maxSeries chunks of consecutive children, none empty and none longer
// than maxSeries (however the work is spread), the layers in order.
func TestBounded(t *testing.T) {
	for _, n := range []int{33, 100, 501, 2000} {
		var chain [][2]int
		for i := range n - 1 {
			chain = append(chain, [2]int{i, i + 1})
		}
		ls := dag(n, chain...)
		ls.Layers[n-1].Forward = Affine{1000, 0} // one heavy layer
		root := ls.bounded(ls.sequential())
		if len(root.children) != maxSeries {
			t.Errorf("%d layers: %d chunks", n, len(root.children))
		}
		var walk func(*spNode)
		walk = func(s *spNode) {
			if s.layer < 0 && (len(s.children) == 0 || len(s.children) > maxSeries) {
				t.Errorf("%d layers: a series of %d children", n, len(s.children))
			}
			for _, c := range s.children {
				walk(c)
			}
		}
		walk(root)
		if got := segmentLayers(root.children); !slices.Equal(got, root.layers) || len(got) != n {
			t.Errorf("%d layers: the chunks hold %v", n, got)
		}
	}
	ls := dag(3)
	if short := ls.bounded(linear([]int{0, 1, 2})); shape(short) != "S(LLL)" {
		t.Errorf("a short series became %s", shape(short))
	}
}

// TestScheduleMixedSizes: a stage of micro-batches of one sample feeds
// one of two; a pass waits for every pass of the other stage that
// shares a sample with it, and the first stage holds in flight the
// samples the second runs forward before its first backward pass and
// one more of its micro-batches (sizes differ): all four. Worked by
// hand: stage 0 runs F0 F1 F2 F3 B0 B1 B2 B3, stage 1 F0 B0 F1 B1, each
// pass 1 s forward, 2 s backward; the step ends at 13 s.
func TestScheduleMixedSizes(t *testing.T) {
	topo := &cost.Topology{Name: "free", Devices: make([]cost.TopologyDevice, 2),
		Links: []cost.Link{{Devices: []int{0, 1}, Bandwidth: math.Inf(1)}}}
	p := &planner{ls: dag(2, [2]int{0, 1}), opt: Options{Topology: topo}}
	p.ls.Batch = 4
	plan := &Plan{Stages: []Stage{
		{Layers: []int{0}, Devices: []int{0}, Forward: 1, Backward: 2, MicroBatch: 1, MicroBatches: 4},
		{Layers: []int{1}, Devices: []int{1}, Forward: 1, Backward: 2, MicroBatch: 2, MicroBatches: 2},
	}}
	flows := p.flows(plan, false)
	p.edges(plan, flows)
	p.inFlight(plan)
	if plan.Stages[0].InFlight != 4 || plan.Stages[1].InFlight != 1 {
		t.Errorf("in flight %d and %d, want 4 and 1", plan.Stages[0].InFlight, plan.Stages[1].InFlight)
	}
	if err := p.simulate(plan, flows); err != nil {
		t.Fatal(err)
	}
	if plan.Seconds != 13 || math.Abs(plan.Bubble-(1-18.0/26)) > 1e-12 {
		t.Errorf("step %g s, bubble %g; want 13 s, 8/26", plan.Seconds, plan.Bubble)
	}
	var ends []float64
	for _, task := range plan.Schedule[0] {
		ends = append(ends, task.End)
	}
	if want := []float64{1, 2, 3, 4, 7, 9, 11, 13}; !slices.Equal(ends, want) {
		t.Errorf("stage 0's passes end at %v, want %v", ends, want)
	}
}

// TestPerStageMicroBatches: in a chain of layers that each fill a
// device's memory, whose last layer costs the same whatever its
// micro-batch (a fixed cost) and whose first two cost per sample,
// GraphPipe runs the first stages on small micro-batches, which
// pipeline, and the last on the whole batch, which it pays once: faster
// than any one size for all (the sequential pipeline's).
func TestPerStageMicroBatches(t *testing.T) {
	ls := dag(3, [2]int{0, 1}, [2]int{1, 2})
	for i := range 2 {
		ls.Layers[i].Work = Work{Forward: Affine{0, 10}, Backward: Affine{0, 10}, StateBytes: 60}
	}
	ls.Layers[2].Work = Work{Forward: Affine{100, 0}, Backward: Affine{100, 0}, StateBytes: 60}
	topo := &cost.Topology{Name: "free", Devices: make([]cost.TopologyDevice, 3),
		Links: []cost.Link{{Devices: []int{0, 1, 2}, Bandwidth: math.Inf(1)}}}
	opt := Options{Topology: topo, Devices: 3, Memory: 100}
	gp, err := Search(ls, GraphPipe, opt)
	if err != nil {
		t.Fatal(err)
	}
	sq, err := Search(ls, Sequential, opt)
	if err != nil {
		t.Fatal(err)
	}
	var sizes []int64
	for _, s := range gp.Stages {
		sizes = append(sizes, s.MicroBatch)
	}
	if len(gp.Stages) != 3 || sizes[2] != 8 || sizes[0] == 8 || gp.Seconds >= sq.Seconds {
		t.Errorf("graphpipe: stages of %v samples, %g s; sequential %g s", sizes, gp.Seconds, sq.Seconds)
	}
}

// TestScheduleNeverDeadlocks: every chain of two to four stages and
// every branching graph of four, at every combination of micro-batch
// sizes dividing the batch, schedules to the end: each stage's warm-up
// runs forward all the samples the stages it feeds run forward before
// their first backward pass.
func TestScheduleNeverDeadlocks(t *testing.T) {
	topo := &cost.Topology{Name: "free", Devices: make([]cost.TopologyDevice, 4),
		Links: []cost.Link{{Devices: []int{0, 1, 2, 3}, Bandwidth: math.Inf(1)}}}
	graphs := map[string][][2]int{
		"chain of 2": {{0, 1}}, "chain of 3": {{0, 1}, {1, 2}}, "chain of 4": {{0, 1}, {1, 2}, {2, 3}},
		"fork-join": {{0, 1}, {0, 2}, {1, 3}, {2, 3}}, "two into one": {{0, 2}, {1, 2}, {2, 3}},
	}
	for _, batch := range []int64{12, 16, 360} {
		var sizes []int64
		for b := int64(1); b <= batch; b++ {
			if batch%b == 0 && batch/b <= 64 {
				sizes = append(sizes, b)
			}
		}
		for name, edges := range graphs {
			n := 0
			for _, e := range edges {
				n = max(n, e[1]+1)
			}
			ls := dag(n, edges...)
			ls.Batch = batch
			p := &planner{ls: ls, opt: Options{Topology: topo}}
			combo := make([]int, n)
			for {
				plan := &Plan{}
				for i := range n {
					b := sizes[combo[i]]
					plan.Stages = append(plan.Stages, Stage{Layers: []int{i}, Devices: []int{i}, Forward: 1, Backward: 2, MicroBatch: b, MicroBatches: int(batch / b)})
				}
				flows := p.flows(plan, false)
				p.edges(plan, flows)
				p.inFlight(plan)
				if err := p.simulate(plan, flows); err != nil {
					var got []int64
					for _, s := range plan.Stages {
						got = append(got, s.MicroBatch)
					}
					t.Fatalf("%s, batch %d, sizes %v: %v", name, batch, got, err)
				}
				k := 0
				for k < n && combo[k] == len(sizes)-1 {
					combo[k] = 0
					k++
				}
				if k == n {
					break
				}
				combo[k]++
			}
		}
	}
}
