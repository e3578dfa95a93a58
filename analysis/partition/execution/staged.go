package execution

import (
	"fmt"
	"slices"

	"tofuc/analysis/cost"
	"tofuc/analysis/strategy"
	"tofuc/lang/ir"
	"tofuc/runtime/plan"
)

// Part is one stage of a pipeline plan: its nodes, partitioned by Plan
// over Plan.Devices() slots, slot i run on the physical device
// Devices[i]. A stage's micro-batches are slots: a device runs one slot
// per micro-batch, each computing that micro-batch's samples.
type Part struct {
	Nodes   []int // indices into the graph's nodes
	Plan    *cost.Plan
	Devices []int
}

// staging is what a graph of parts knows beyond a single plan's graph.
type staging struct {
	parts    []Part
	devices  int
	offsets  []int // each part's first slot
	slotPart []int // each slot's part
	// home is the part whose slots hold a value's tiles: its producer's,
	// or for an input or a parameter its first reader's.
	home map[*ir.Value]int
}

// BuildStaged generates the execution graph of a pipeline plan over
// devices: each part's nodes run on its slots only, as its plan
// partitions them (Build's graph per part), and a value another part
// reads is fetched from the tiles of the part that holds it. Where
// slots of one device compute the same boxes of an operator's whole
// outputs (a weight's update, replicated by a data-parallel stage's
// plan), only the first computes them and the others share its tiles
// (Owner).
func BuildStaged(g *cost.Graph, parts []Part, devices int) (*Graph, error) {
	st, physical, partOf, err := newStaging(g, parts, devices)
	if err != nil {
		return nil, err
	}
	eg := &Graph{Devices: len(physical), Physical: physical, staging: st, Tiles: map[*ir.Value][]Box{}}
	subs := make([]*Graph, len(parts))
	builders := make([]*builder, len(parts))
	for i, part := range parts {
		subs[i] = &Graph{Devices: part.Plan.Devices(), Plan: part.Plan, Tiles: map[*ir.Value][]Box{}}
		for _, v := range g.Tensors() {
			for d := range subs[i].Devices {
				subs[i].Tiles[v] = append(subs[i].Tiles[v], tile(g.Shapes[v], part.Plan.Tensors[v], part.Plan.Factors, d))
			}
		}
		builders[i] = &builder{g: g, p: part.Plan, analyses: map[string]*analysed{}}
	}
	for _, v := range g.Tensors() {
		h := st.home[v]
		eg.Tiles[v] = make([]Box, eg.Devices)
		copy(eg.Tiles[v][st.offsets[h]:], subs[h].Tiles[v])
	}
	for j, n := range g.IR.Nodes {
		i := partOf[j]
		local, err := subs[i].node(builders[i], n, j)
		if err != nil {
			return nil, err
		}
		ops := make([]*Op, eg.Devices)
		for d := range ops {
			ops[d] = &Op{Node: n, Device: d, After: j - 1, Groups: make([][]int, len(n.Outputs))}
			for _, v := range n.Outputs {
				ops[d].Outputs = append(ops[d].Outputs, strategy.WholeBox(g.Shapes[v]))
			}
		}
		for _, op := range local {
			op.shift(st.offsets[i])
			ops[op.Device] = op
			if err := eg.fetchAcross(op, i); err != nil {
				return nil, fmt.Errorf("operator %s: %w", n.Name, err)
			}
		}
		eg.dedupe(ops)
		eg.Ops = append(eg.Ops, ops)
	}
	return eg, nil
}

// newStaging checks the parts and numbers their slots: it returns each
// slot's device and each node's part.
func newStaging(g *cost.Graph, parts []Part, devices int) (*staging, []int, []int, error) {
	st := &staging{parts: parts, devices: devices, home: map[*ir.Value]int{}}
	partOf := make([]int, len(g.IR.Nodes))
	for j := range partOf {
		partOf[j] = -1
	}
	var physical []int
	for i, part := range parts {
		if len(part.Plan.Factors) > 0 { // none: one slot, every tensor whole
			if err := g.Validate(part.Plan); err != nil {
				return nil, nil, nil, fmt.Errorf("stage %d: %w", i, err)
			}
		}
		if len(part.Devices) != part.Plan.Devices() {
			return nil, nil, nil, fmt.Errorf("stage %d: %d devices for the %d slots of its plan", i, len(part.Devices), part.Plan.Devices())
		}
		st.offsets = append(st.offsets, len(physical))
		for _, dev := range part.Devices {
			if dev < 0 || dev >= devices {
				return nil, nil, nil, fmt.Errorf("stage %d: device %d of %d", i, dev, devices)
			}
			st.slotPart = append(st.slotPart, i)
			physical = append(physical, dev)
		}
		for _, j := range part.Nodes {
			if j < 0 || j >= len(partOf) || partOf[j] >= 0 {
				return nil, nil, nil, fmt.Errorf("stage %d: node %d is not a node of the graph or is in another stage", i, j)
			}
			partOf[j] = i
		}
	}
	for j, n := range g.IR.Nodes {
		if partOf[j] < 0 {
			return nil, nil, nil, fmt.Errorf("operator %s is in no stage", n.Name)
		}
		for _, v := range n.Outputs {
			st.home[v] = partOf[j]
		}
	}
	for j, n := range g.IR.Nodes {
		for _, v := range n.Inputs {
			if _, ok := st.home[v]; !ok && v.Const == nil {
				st.home[v] = partOf[j]
			}
		}
	}
	for _, v := range g.Tensors() {
		if _, ok := st.home[v]; !ok {
			st.home[v] = 0 // an input or a parameter no operator reads
		}
	}
	if len(physical) > plan.MaxTiles {
		return nil, nil, nil, fmt.Errorf("%d slots (micro-batches times devices, over the stages): a plan binds an input to at most %d tiles", len(physical), plan.MaxTiles)
	}
	return st, physical, partOf, nil
}

// shift moves an op of a part's own graph to the part's slots.
func (op *Op) shift(offset int) {
	op.Device += offset
	for _, in := range op.In {
		if in == nil {
			continue
		}
		for _, sum := range in.Sums {
			for k := range sum {
				sum[k].From += offset
			}
		}
	}
	for o, group := range op.Groups {
		if group == nil {
			continue
		}
		shifted := make([]int, len(group))
		for k, d := range group {
			shifted[k] = d + offset
		}
		op.Groups[o] = shifted
	}
}

// fetchAcross fetches op's inputs held by another part than its own (i)
// from that part's tiles; a value that part keeps as partial sums is
// refused (a stage's gradients stay with its updates).
func (eg *Graph) fetchAcross(op *Op, i int) error {
	if op.Inst == nil {
		return nil
	}
	for j, v := range op.Node.Inputs {
		h, ok := eg.staging.home[v]
		if !ok || h == i || op.In[j] == nil {
			continue
		}
		if slices.Contains(eg.staging.parts[h].Plan.Tensors[v], cost.Partial) {
			return fmt.Errorf("it reads %s, which another stage keeps as partial sums", v.Name)
		}
		holds := func(e int) bool { return eg.Holds(v, e) }
		op.In[j].Sums = [][]Piece{eg.pieces(op.In[j].Bands, eg.Tiles[v], op.Device, holds)}
	}
	return nil
}

// dedupe leaves one copy per device of what several of its slots compute
// alike: the same boxes of whole outputs from the same regions.
func (eg *Graph) dedupe(ops []*Op) {
	first := map[string]bool{}
	for _, op := range ops {
		if op.Inst == nil || op.Partial {
			continue
		}
		key := fmt.Sprint(eg.Device(op.Device), op.Outputs, bandsOf(op.In))
		if first[key] {
			op.Inst = nil
			continue
		}
		first[key] = true
	}
}

func bandsOf(ins []*Input) [][]strategy.Placed {
	out := make([][]strategy.Placed, len(ins))
	for j, in := range ins {
		if in != nil {
			out[j] = in.Bands
		}
	}
	return out
}

// Device is the device slot d runs on.
func (eg *Graph) Device(d int) int {
	if eg.Physical == nil {
		return d
	}
	return eg.Physical[d]
}

// PhysicalDevices is the number of devices the slots run on.
func (eg *Graph) PhysicalDevices() int {
	if eg.staging == nil {
		return eg.Devices
	}
	return eg.staging.devices
}

// Holds reports whether slot d holds a tile of v (in a pipeline's graph,
// only the slots of the part that holds v do).
func (eg *Graph) Holds(v *ir.Value, d int) bool {
	if eg.staging == nil {
		return true
	}
	h, ok := eg.staging.home[v]
	return ok && eg.staging.slotPart[d] == h
}

// Owner is the first slot on d's device holding the same tile of v as
// slot d (the same box of the same partial sum): the slots of a device
// share its buffer. It is d itself outside pipelines.
func (eg *Graph) Owner(v *ir.Value, d int) int {
	if eg.staging == nil {
		return d
	}
	part := eg.staging.slotPart[d]
	for e := eg.staging.offsets[part]; e < d; e++ {
		if eg.Physical[e] == eg.Physical[d] && eg.Tiles[v][e].Equal(eg.Tiles[v][d]) && eg.SameSum(v, e, d) {
			return e
		}
	}
	return d
}

// local is slot d's part's plan and d's index among its slots.
func (eg *Graph) local(d int) (*cost.Plan, int) {
	if eg.staging == nil {
		return eg.Plan, d
	}
	part := eg.staging.slotPart[d]
	return eg.staging.parts[part].Plan, d - eg.staging.offsets[part]
}
