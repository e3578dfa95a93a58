package cost

import (
	"fmt"
	"slices"

	"tofuc/analysis/schedule"
	"tofuc/lang/ir"
)

// Simulation is a simulated step (FlexFlow's execution simulator).
type Simulation struct {
	// Seconds is the step: when the last task of the representative
	// device ends.
	Seconds float64
	// Compute and Transfer are the busy times of its compute stream and
	// its link: what overlapping them saves is Compute + Transfer -
	// Seconds.
	Compute, Transfer float64
}

// Simulate runs plan p of g on the first p.Devices() devices of t as a
// task graph. The devices are alike (Tofu's symmetry), so one
// representative device is simulated: per node, a fetch of the data its
// workers lack (the cost model's fetched bytes, shared by the devices),
// the kernel of its last view (the roofline of the worker's instance:
// the longer of its FLOPs at the peak and its bytes at the memory
// bandwidth, plus a launch overhead per kernel), then a store (the
// redistribution or the combination of partial results). Fetches and
// stores use the device's link (each step's bytes at the speed of the
// slowest of its links to its group at that step: stepLinks), kernels
// its compute stream; a task starts when its
// inputs are ready and its stream is free, the ready task of the
// earliest node first, so transfers overlap kernels where the graph
// allows.
func (g *Graph) Simulate(p *Plan, t *Topology) (*Simulation, error) {
	if err := g.Validate(p); err != nil {
		return nil, err
	}
	dev, links, err := t.stepLinks(p.Factors)
	if err != nil {
		return nil, err
	}
	return g.simulate(p, dev, links, newTaskGraph(g), g.nodeTasks)
}

// nodeTasks are a node's fetch, kernel and store seconds.
type nodeTasks struct{ fetch, kernel, store float64 }

// simulate runs plan p (valid) on device dev and its steps' links as
// task graph tg, the tasks of each node j from tasksOf.
func (g *Graph) simulate(p *Plan, dev Device, links []Link, tg *taskGraph, tasksOf func(p *Plan, j int, dev Device, links []Link) (nodeTasks, error)) (*Simulation, error) {
	dur := make([]float64, 3*len(g.IR.Nodes))
	for j := range g.IR.Nodes {
		tasks, err := tasksOf(p, j, dev, links)
		if err != nil {
			return nil, err
		}
		dur[3*j], dur[3*j+1], dur[3*j+2] = tasks.fetch, tasks.kernel, tasks.store
	}
	return tg.run(dur), nil
}

// nodeTasks prices node j of plan p on device dev: per step, the bytes
// a device fetches and stores over that step's link, and half the
// step's latency each where the step moves data; and its last view's
// kernel.
func (g *Graph) nodeTasks(p *Plan, j int, dev Device, links []Link) (nodeTasks, error) {
	n := g.IR.Nodes[j]
	var tasks nodeTasks
	view := g.Root(n)
	devices := float64(p.Devices())
	groups := int64(1)
	for i, k := range p.Factors {
		link := links[i]
		sc, ch, pl := view.Step(k), p.Ops[n][i], p.Placement(n, i)
		f, st := transfers(sc, ch, pl)
		tasks.fetch += float64(groups*f) / devices / link.Bandwidth
		tasks.store += float64(groups*st) / devices / link.Bandwidth
		if f+st > 0 {
			tasks.fetch += link.Latency / 2
			tasks.store += link.Latency / 2
		}
		var err error
		if view, err = view.Sub(ch, k); err != nil { // the last is the kernel's
			return tasks, fmt.Errorf("operator %s: %w", n.Name, err)
		}
		groups *= int64(k)
	}
	var err error
	if tasks.kernel, err = view.KernelSeconds(dev); err != nil {
		return tasks, fmt.Errorf("operator %s: %w", n.Name, err)
	}
	return tasks, nil
}

// FirstFetches are the bytes node n's workers fetch of each input at
// the first step of plan p: the regions they read and do not hold.
func (g *Graph) FirstFetches(p *Plan, n *ir.Node) []int64 {
	sc, c, pl := g.Root(n).Step(p.Factors[0]), p.Ops[n][0], p.Placement(n, 0)
	out := make([]int64, len(pl.In))
	for i := range pl.In {
		out[i] = inputFetch(sc, c, pl, i)
	}
	return out
}

// inputFetch is the bytes a step's workers fetch of input i.
func inputFetch(sc *StepCost, c Choice, pl Placement, i int) int64 {
	return max(0, sc.Fetch[Slot(c)][i][Col(pl.In[i])]) * pl.InCopies[i]
}

// transfers splits a node's bytes at one step into fetched and stored.
func transfers(sc *StepCost, c Choice, pl Placement) (fetch, store int64) {
	for i := range pl.In {
		fetch += inputFetch(sc, c, pl, i)
	}
	for o, d := range pl.Out {
		store += max(0, sc.Store[Slot(c)][o][Col(d)]) * pl.OutCopies[o]
	}
	return fetch, store
}

// SimulateOne is the step of g on device 0 of t alone: its schedule's
// kernels (fusion and views as compiled) back to back on the roofline,
// and where the device has an io_bandwidth, its inputs copied in before
// them and its outputs out after them, and its step_seconds.
func SimulateOne(g *ir.Graph, t *Topology) (*Simulation, error) {
	e, err := Roofline(g, t.Roofline(0))
	if err != nil {
		return nil, err
	}
	sim := &Simulation{Compute: e.Time}
	if bw := t.Devices[0].IOBandwidth; bw > 0 {
		var bytes int64
		for _, v := range append(append([]*ir.Value(nil), g.Inputs...), g.Outputs...) {
			bytes += ValueBytes(v)
		}
		sim.Transfer = float64(bytes) / bw
	}
	sim.Seconds = sim.Compute + sim.Transfer + t.Devices[0].StepSeconds
	return sim, nil
}

// taskGraph is the task graph of the representative device: per node a
// fetch, a kernel and a store (tasks 3j, 3j+1, 3j+2). A node's fetch
// waits for the stores of the nodes whose outputs it reads, its kernel
// for its fetch and those stores, its store for its kernel.
type taskGraph struct {
	// users are the tasks that wait for each task, waiting how many
	// tasks each waits for.
	users   [][]int
	waiting []int
}

// newTaskGraph is g's task graph.
func newTaskGraph(g *Graph) *taskGraph {
	n := len(g.IR.Nodes)
	tg := &taskGraph{users: make([][]int, 3*n), waiting: make([]int, 3*n)}
	dependsOn := func(task, on int) {
		tg.users[on] = append(tg.users[on], task)
		tg.waiting[task]++
	}
	producer := map[*ir.Value]int{}
	for j, node := range g.IR.Nodes {
		for _, v := range node.Inputs {
			if pj, ok := producer[v]; ok {
				dependsOn(3*j, 3*pj+2)
				dependsOn(3*j+1, 3*pj+2)
			}
		}
		dependsOn(3*j+1, 3*j)
		dependsOn(3*j+2, 3*j+1)
		for _, v := range node.Outputs {
			producer[v] = j
		}
	}
	return tg
}

// KernelSeconds is the roofline time of the view's kernels on d
// (Device.Seconds: its FLOPs at the peak, with the padding and the
// half-performance size of each contraction it launches, its inputs'
// and outputs' bytes at the memory bandwidth, and its contractions'
// serial bytes), plus a launch overhead per kernel.
func (v *View) KernelSeconds(d Device) (float64, error) {
	v.kernelOnce.Do(func() {
		inst := v.Inst
		v.kernel.flops, v.kernel.err = InstanceFLOPs(inst)
		for _, t := range inst.Inputs {
			v.kernel.bytes += tensorBytes(t.DType, t.Shape)
		}
		for _, o := range inst.Outputs {
			v.kernel.bytes += tensorBytes(o.Tensor.DType, o.Tensor.Shape)
		}
		launches := schedule.Launches(inst)
		v.kernel.launches = len(launches)
		for _, l := range launches {
			if c, ok := ContractionOf(l, nil); ok {
				v.kernel.contractions = append(v.kernel.contractions, c)
			}
		}
	})
	k := v.kernel
	var padding, serial int64
	for _, c := range k.contractions {
		padding += c.Padding(d.TileRows, d.TileCols, d.NarrowCols)
		serial += c.SerialBytes()
	}
	return d.Seconds(d.ComputeSeconds(k.flops, padding, len(k.contractions)), k.bytes, serial) + float64(k.launches)*d.Launch, k.err
}

// kernelSize is what the roofline reads of a view.
type kernelSize struct {
	flops, bytes int64
	launches     int
	// contractions are the shapes of its launches that are
	// contractions, each with its smaller side as the rows (a view does
	// not say which inputs are weights).
	contractions []ContractionShape
	err          error
}

// run list-schedules the tasks: repeatedly the task whose dependencies
// are done with the earliest start, ties to the lowest index, on its
// stream (kernels on the compute stream, fetches and stores on the link).
func (tg *taskGraph) run(dur []float64) *Simulation {
	n := len(dur)
	waiting := slices.Clone(tg.waiting)
	ready := make([]float64, n) // when the dependencies are done
	var free [2]float64         // the link, the compute stream
	out := &Simulation{}
	h := make(taskHeap, 0, n)
	for t := range n {
		if waiting[t] == 0 {
			h.push(taskItem{0, t})
		}
	}
	for len(h) > 0 {
		it := h.pop()
		stream := 0
		if it.task%3 == 1 {
			stream = 1
		}
		start := max(it.at, free[stream])
		end := start + dur[it.task]
		if dur[it.task] > 0 {
			free[stream] = end
		}
		if stream == 1 {
			out.Compute += dur[it.task]
		} else {
			out.Transfer += dur[it.task]
		}
		out.Seconds = max(out.Seconds, end)
		for _, u := range tg.users[it.task] {
			ready[u] = max(ready[u], end)
			if waiting[u]--; waiting[u] == 0 {
				h.push(taskItem{ready[u], u})
			}
		}
	}
	return out
}

type taskItem struct {
	at   float64
	task int
}

func (a taskItem) before(b taskItem) bool {
	return a.at < b.at || a.at == b.at && a.task < b.task
}

// taskHeap is a binary min-heap of tasks by start, then index (typed:
// container/heap's interface calls were a fifth of a delta proposal).
type taskHeap []taskItem

func (h *taskHeap) push(x taskItem) {
	*h = append(*h, x)
	q := *h
	for i := len(q) - 1; i > 0; {
		parent := (i - 1) / 2
		if !q[i].before(q[parent]) {
			break
		}
		q[i], q[parent] = q[parent], q[i]
		i = parent
	}
}

func (h *taskHeap) pop() taskItem {
	q := *h
	top := q[0]
	last := len(q) - 1
	q[0] = q[last]
	q = q[:last]
	for i := 0; ; {
		small, l, r := i, 2*i+1, 2*i+2
		if l < len(q) && q[l].before(q[small]) {
			small = l
		}
		if r < len(q) && q[r].before(q[small]) {
			small = r
		}
		if small == i {
			break
		}
		q[i], q[small] = q[small], q[i]
		i = small
	}
	*h = q
	return top
}
