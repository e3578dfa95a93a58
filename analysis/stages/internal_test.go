package stages

import (
	"math"
	"testing"

	"tofuc/analysis/cost"
)

// dag is a Layers of n unit layers with the given edges.
func dag(n int, edges ...[2]int) *Layers {
	ls := &Layers{Batch: 8, Layers: make([]Layer, n), Succ: make([][]int, n), Pred: make([][]int, n), Bytes: map[[2]int]float64{}}
	for i := range ls.Layers {
		ls.Layers[i] = Layer{Nodes: []int{i}, Forward: Affine{0, 1}, Backward: Affine{0, 2}}
	}
	for _, e := range edges {
		ls.Succ[e[0]] = append(ls.Succ[e[0]], e[1])
		ls.Pred[e[1]] = append(ls.Pred[e[1]], e[0])
		ls.Bytes[e] = 1
	}
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
		p := &planner{ls: dag(tc.stages), opt: Options{Topology: topo}}
		plan := &Plan{MicroBatch: 1, MicroBatches: tc.micro}
		for i := range tc.stages {
			s := Stage{Layers: []int{i}, Devices: []int{i}, Forward: 1, Backward: 2}
			if i+1 < tc.stages {
				s.Succ = []int{i + 1}
				p.ls.Bytes[[2]int{i, i + 1}] = 1
			}
			s.InFlight = min(tc.stages-i, tc.micro)
			plan.Stages = append(plan.Stages, s)
		}
		if err := p.simulate(plan, p.flows(plan, false)); err != nil {
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
