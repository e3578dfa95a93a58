package cost

import (
	"math"
	"testing"

	"tofuc/runtime/plan"
)

// TestAllReduceRing: a large all-reduce costs a ring's 2(g−1)/g of its
// bytes through the slowest link plus 2(g−1) latencies; a small one a
// tree's 2·⌈log₂ g⌉ latencies, where those are fewer.
func TestAllReduceRing(t *testing.T) {
	l := Link{Bandwidth: 100e9, Latency: 5e-6}
	const big, g = 1 << 30, 8
	ring := 2.0*(g-1)/g*big/l.Bandwidth + 2*(g-1)*l.Latency
	if got := AllReduceSeconds(big, g, l); math.Abs(got-ring) > 1e-12 {
		t.Errorf("1 GiB over 8: %g s, the ring's %g", got, ring)
	}
	tree := 2*64/l.Bandwidth + 2*3*l.Latency
	if got := AllReduceSeconds(64, g, l); math.Abs(got-tree) > 1e-15 {
		t.Errorf("64 B over 8: %g s, the tree's %g", got, tree)
	}
	if got := AllReduceSeconds(big, 1, l); got != 0 {
		t.Errorf("a group of one: %g s", got)
	}
}

// TestSimulatePlanAllReduce: a plan whose four devices all-reduce a
// buffer steps as long as the ring, over the slowest link of the ring
// (devices 2 and 3 on a slower link than the rest), every member
// together.
func TestSimulatePlanAllReduce(t *testing.T) {
	const n, bytes = 4, 1 << 26
	p := &plan.Plan{Devices: n, Kernels: []plan.Kernel{{Reducer: "sum"}}, Steps: make([][]plan.Step, n)}
	var parts, group []int
	for d := range n {
		p.Buffers = append(p.Buffers, plan.Buffer{ID: d, Device: d, DType: "f32", Bytes: bytes})
		parts, group = append(parts, d), append(group, d)
	}
	for d := range n {
		p.Steps[d] = []plan.Step{{Op: plan.AllReduce, Reducer: "sum", Parts: parts, Group: group, To: d}}
	}
	fast, slow := Link{Devices: []int{0, 1, 2, 3}, Bandwidth: 400e9, Latency: 2e-6}, Link{Devices: []int{2, 3}, Bandwidth: 50e9, Latency: 1e-6}
	top := &Topology{Name: "two links", Links: []Link{fast, slow}}
	for range n {
		top.Devices = append(top.Devices, TopologyDevice{PeakFLOPS: 1e12, MemoryBandwidth: 1e12, MemoryBytes: 1 << 30})
	}
	sim, err := SimulatePlan(p, top)
	if err != nil {
		t.Fatal(err)
	}
	// The ring 0-1-2-3-0: the link 2-3 is the faster of the two between
	// them (400 GB/s), so the slowest is 400 GB/s, latency 2 µs.
	want := AllReduceSeconds(bytes, n, Link{Bandwidth: 400e9, Latency: 2e-6})
	if math.Abs(sim.Seconds-want) > 1e-12 || math.Abs(sim.Transfer-want) > 1e-12 {
		t.Errorf("step %g s, transfers %g s: want the ring's %g", sim.Seconds, sim.Transfer, want)
	}
	top.Links[0].Devices = []int{0, 1, 3}
	top.Links = append(top.Links, Link{Devices: []int{1, 2}, Bandwidth: 400e9, Latency: 2e-6})
	if sim, err = SimulatePlan(p, top); err != nil {
		t.Fatal(err)
	}
	if want := AllReduceSeconds(bytes, n, Link{Bandwidth: 50e9, Latency: 2e-6}); math.Abs(sim.Seconds-want) > 1e-12 {
		t.Errorf("with 2-3 on the slow link only: step %g s, want %g", sim.Seconds, want)
	}
}
