package codegen

import (
	"fmt"
	"slices"
	"time"

	"tofuc/analysis/partition/execution"
	"tofuc/analysis/schedule"
	"tofuc/codegen/kernel"
	"tofuc/lang/ir"
	"tofuc/runtime/plan"
)

// Buffer keys of a partitioned plan.
type (
	tileKey struct { // device d's tile of value v
		v *ir.Value
		d int
	}
	regionKey struct { // the region of input j that node n reads on device d
		n    *ir.Node
		j, d int
	}
	sumKey struct { // partial sum s of that region, before they are added up
		n       *ir.Node
		j, d, s int
	}
	partKey struct { // the box of output o that node n computes on device d
		n    *ir.Node
		o, d int
	}
	reducedKey struct { // partKey combined over the device's group
		n    *ir.Node
		o, d int
	}
	deviceLocalKey struct { // a materialised local of node n on device d
		n   *ir.Node
		def *ir.Def
		d   int
	}
)

// CompilePartitioned lowers the execution graph of a partition plan
// (analysis/partition/execution) over its devices into dir. Every device
// runs its operators' instances in the graph's order; before each, it
// copies the regions it reads from the devices holding them (its own
// tile first); after each, partial outputs are combined over their group
// and every device copies the parts of the output its tile holds.
// Kernels of different nodes are not fused across devices. In a
// pipeline plan's graph the graph's devices are slots: a slot's buffers
// and steps are its device's, and the slots of a device holding the
// same tile share one buffer (execution.Graph.Owner).
func CompilePartitioned(eg *execution.Graph, g *ir.Graph, dir string, opts Options) (*Compiled, error) {
	start := time.Now()
	b := newBuilder(g.Name, eg.PhysicalDevices(), opts.Precision)
	b.shared = &sharedReads{remote: map[int][]plan.StepRef{}, first: map[int]plan.StepRef{}}
	pb := &partitioned{builder: b, eg: eg, lastWrite: map[tileKey]int{}, launched: map[*ir.Node][]int{}, bound: map[*ir.Value]bool{}}
	if err := pb.build(g); err != nil {
		return nil, err
	}
	return b.finish(dir, opts, start)
}

type partitioned struct {
	*builder
	eg *execution.Graph
	// lastWrite is the step of a tile's device that last wrote it.
	lastWrite map[tileKey]int
	// launched is each node's last launch on each slot's device.
	launched map[*ir.Node][]int
	// bound are the inputs and parameters, which the runtime writes.
	bound map[*ir.Value]bool
}

func (p *partitioned) build(g *ir.Graph) error {
	for _, v := range g.Inputs {
		p.bound[v] = true
		p.bindTiles(&p.p.Inputs, v, plan.RoleInput)
		p.p.Inputs[len(p.p.Inputs)-1].Classes = g.LabelClasses(v)
	}
	for _, q := range g.Params {
		p.bound[q.Value] = true
		p.bindTiles(&p.p.Params, q.Value, plan.RoleParameter)
	}
	if p.eg.Sequence != nil {
		if err := p.sequence(); err != nil {
			return err
		}
	} else {
		for _, ops := range p.eg.Ops {
			if err := p.node(ops); err != nil {
				return err
			}
		}
	}
	for _, v := range g.Outputs {
		if v.Const != nil {
			return fmt.Errorf("output %s is a literal constant: not supported in a partitioned plan", v.Name)
		}
		p.bindTiles(&p.p.Outputs, v, plan.RoleOutput)
	}
	return nil
}

// tile returns the buffer of slot d's tile of v.
func (p *partitioned) tile(v *ir.Value, d int) int {
	key := p.tileKey(v, d)
	box := p.eg.Tiles[v][key.d]
	role := roleOf(v)
	return p.buffer(key, fmt.Sprintf("%s@%s", v.Name, p.slot(key.d)), p.eg.Device(d), v.DType, boxShape(box), role)
}

// tileKey is the key of slot d's tile of v: its owner's.
func (p *partitioned) tileKey(v *ir.Value, d int) tileKey {
	return tileKey{v, p.eg.Owner(v, d)}
}

// slot names slot d in buffer names: its device, and the slot where a
// device runs several.
func (p *partitioned) slot(d int) string {
	if p.eg.Physical == nil {
		return fmt.Sprint(d)
	}
	return fmt.Sprintf("%d.%d", p.eg.Device(d), d)
}

// dev is the device of slot d.
func (p *partitioned) dev(d int) int { return p.eg.Device(d) }

// bindTiles binds a named tensor to its tiles on every device.
func (p *partitioned) bindTiles(list *[]plan.Binding, v *ir.Value, role string) {
	b := plan.Binding{Name: v.Name, DType: v.DType.String()}
	for d, box := range p.eg.Tiles[v] {
		if !p.eg.Holds(v, d) || p.eg.Owner(v, d) != d {
			continue // its stage's slots hold v; a device's slots share a tile
		}
		id := p.tile(v, d)
		p.keep(id) // the runtime writes or reads it around the steps
		if role != plan.RoleActivation && p.p.Buffers[id].Role == plan.RoleActivation || role == plan.RoleOutput {
			p.p.Buffers[id].Role = role
		}
		b.Tiles = append(b.Tiles, plan.Tile{Buffer: id, Box: planBox(box)})
		for i, r := range box {
			if len(b.Shape) <= i {
				b.Shape = append(b.Shape, 0)
			}
			b.Shape[i] = max(b.Shape[i], r.Hi+1)
		}
	}
	*list = append(*list, b)
}

// node adds the steps of one node on every device.
func (p *partitioned) node(ops []*execution.Op) error {
	for _, op := range ops {
		if op.Inst != nil {
			if err := p.unit(op); err != nil {
				return err
			}
		}
	}
	return p.complete(ops)
}

// sequence adds the steps of the graph's units in its Sequence.
func (p *partitioned) sequence() error {
	for _, u := range p.eg.Sequence {
		ops := p.eg.Ops[u.Node]
		var err error
		if u.Slot == execution.Done {
			err = p.complete(ops)
		} else {
			err = p.unit(ops[u.Slot])
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// unit adds the steps of one slot's copy of a node.
func (p *partitioned) unit(op *execution.Op) error {
	n := op.Node
	last, err := p.device(op)
	if err != nil {
		return fmt.Errorf("%s: operator %s on device %s: %w", n.Pos, n.Name, p.slot(op.Device), err)
	}
	p.launchedOf(n)[op.Device] = last
	return nil
}

// launchedOf is each slot's last launch of n, -1 where none.
func (p *partitioned) launchedOf(n *ir.Node) []int {
	if l, ok := p.launched[n]; ok {
		return l
	}
	l := make([]int, p.eg.Devices)
	for d := range l {
		l[d] = -1
	}
	p.launched[n] = l
	return l
}

// complete combines a node's partial outputs and stores its outputs into
// the tiles they are not computed in, once every copy has run.
func (p *partitioned) complete(ops []*execution.Op) error {
	n := ops[0].Node
	ready, err := p.reduce(ops, p.launchedOf(n))
	if err != nil {
		return fmt.Errorf("%s: operator %s: %w", n.Pos, n.Name, err)
	}
	for o := range n.Outputs {
		p.distribute(ops, o, ready)
	}
	return nil
}

// device adds the copies and launches of one device's copy of a node and
// returns the index of its last launch.
func (p *partitioned) device(op *execution.Op) (int, error) {
	n, d := op.Node, op.Device
	for j, v := range n.Inputs {
		var err error
		switch {
		case v.Const != nil:
		case p.eg.ReadsOwnTile(op, j):
			err = p.zeroUnwritten(v, d)
		default:
			err = p.gatherRegion(op, j)
		}
		if err != nil {
			return 0, err
		}
	}
	last := -1
	for _, def := range schedule.Launches(op.Inst) {
		out := p.outputKey(op, def)
		k, err := kernel.Build(fmt.Sprintf("%s@%s", n.Name, p.slot(d)), out, []kernel.Stage{{Inst: op.Inst, Def: def, Bind: p.binder(op)}})
		if err != nil {
			return 0, err
		}
		k.Call = n.Pos
		if last, err = p.launch(p.dev(d), false, k); err != nil {
			return 0, err
		}
	}
	for o, v := range n.Outputs {
		if p.writesTile(op, o) {
			p.lastWrite[p.tileKey(v, d)] = last
		}
	}
	return last, nil
}

// writesTile reports whether op computes output o straight into its
// device's tile: a whole tile, final or kept as a partial sum.
func (p *partitioned) writesTile(op *execution.Op, o int) bool {
	return op.Groups[o] == nil && op.Outputs[o].Equal(p.eg.Tiles[op.Node.Outputs[o]][op.Device])
}

// outputKey is the buffer a launch of op writes, created here.
func (p *partitioned) outputKey(op *execution.Op, def *ir.Def) any {
	n, d := op.Node, op.Device
	for o, od := range op.Inst.Outputs {
		if od != def {
			continue
		}
		v := n.Outputs[o]
		if p.writesTile(op, o) {
			p.tile(v, d)
			return p.tileKey(v, d)
		}
		key := partKey{n, o, d}
		p.buffer(key, fmt.Sprintf("%s@%s part", v.Name, p.slot(d)), p.dev(d), v.DType, boxShape(op.Outputs[o]), roleOf(v))
		return key
	}
	key := deviceLocalKey{n, def, d}
	shape, _ := concrete(def.Tensor.Name, def.Tensor.Shape)
	p.buffer(key, fmt.Sprintf("%s@%s/%s", n.Name, p.slot(d), def.Tensor.Name), p.dev(d), def.Tensor.DType, shape, plan.RoleWorkspace)
	return key
}

// binder binds op's inputs to their tiles or gathered regions, constants
// folded in, and its materialised locals to workspace buffers.
func (p *partitioned) binder(op *execution.Op) func(*ir.Tensor) (kernel.Binding, error) {
	n, d := op.Node, op.Device
	return func(t *ir.Tensor) (kernel.Binding, error) {
		for j, in := range op.Inst.Inputs {
			if in != t {
				continue
			}
			v := n.Inputs[j]
			switch {
			case v.Const != nil:
				return kernel.Binding{Const: v.Const}, nil
			case p.eg.ReadsOwnTile(op, j):
				p.tile(v, d)
				return kernel.Binding{Buffer: p.tileKey(v, d)}, nil
			}
			return kernel.Binding{Buffer: regionKey{n, j, d}}, nil
		}
		if def := schedule.Local(op.Inst, t); def != nil {
			key := deviceLocalKey{n, def, d}
			shape, err := concrete(t.Name, t.Shape)
			if err != nil {
				return kernel.Binding{}, err
			}
			p.buffer(key, fmt.Sprintf("%s@%s/%s", n.Name, p.slot(d), t.Name), p.dev(d), t.DType, shape, plan.RoleWorkspace)
			return kernel.Binding{Buffer: key}, nil
		}
		return kernel.Binding{}, fmt.Errorf("tensor %s is not an input or a local of %s", t.Name, op.Inst.Op)
	}
}

// gatherRegion fills the region buffer of input j of op from the pieces
// of its fetch, its own tile's among them: one buffer per partial sum
// to add when the input is partial there, then their sum. A partial sum
// whose tiles no step writes (the devices holding it computed an empty
// part: a batch split over more devices than samples) is zero and is
// left out: its tiles hold nothing, not zeros.
func (p *partitioned) gatherRegion(op *execution.Op, j int) error {
	n, d := op.Node, op.Device
	v, in := n.Inputs[j], op.In[j]
	id := p.buffer(regionKey{n, j, d}, fmt.Sprintf("%s@%s in%d", n.Name, p.slot(d), j), p.dev(d), v.DType, in.Shape, plan.RoleWorkspace)
	sums := in.Sums
	if len(sums) > 1 {
		sums = slices.DeleteFunc(slices.Clone(sums), func(pieces []execution.Piece) bool { return p.unwritten(v, pieces) })
	}
	switch len(sums) {
	case 0:
		return fmt.Errorf("no step writes any partial sum of %s it reads", v.Name)
	case 1:
		return p.copyPieces(d, id, v, sums[0])
	}
	sum := plan.Step{Op: plan.Reduce, Reducer: "sum", To: id, Label: "add partial sums of " + v.Name}
	for s, pieces := range sums {
		part := p.buffer(sumKey{n, j, d, s}, fmt.Sprintf("%s@%s in%d sum%d", n.Name, p.slot(d), j, s), p.dev(d), v.DType, in.Shape, plan.RoleWorkspace)
		if err := p.copyPieces(d, part, v, pieces); err != nil {
			return err
		}
		sum.Parts = append(sum.Parts, part)
	}
	for _, part := range sum.Parts {
		p.touch(part) // every part lives until the sum
	}
	var err error
	if sum.Kernel, err = p.reductionKernel(sum.Reducer, v.DType, in.Shape, len(sum.Parts)); err != nil {
		return err
	}
	p.touch(id)
	p.addStep(p.dev(d), false, sum)
	return nil
}

// unwritten reports whether no step writes the tiles the pieces of v
// come from (the runtime writes an input's and a parameter's).
func (p *partitioned) unwritten(v *ir.Value, pieces []execution.Piece) bool {
	if p.bound[v] {
		return false
	}
	for _, piece := range pieces {
		if _, ok := p.lastWrite[p.tileKey(v, piece.From)]; ok {
			return false
		}
	}
	return true
}

// zeroUnwritten fills slot d's tile of v with zeros where no step has
// written it and a step is about to read it: a partial sum of a slot
// that computed an empty part (a batch split over more slots than
// samples) is zero, and its bytes may have held another buffer.
func (p *partitioned) zeroUnwritten(v *ir.Value, d int) error {
	key := p.tileKey(v, d)
	if _, ok := p.lastWrite[key]; ok || p.bound[v] {
		return nil
	}
	p.tile(v, d)
	k, err := zeroKernel(fmt.Sprintf("zeros for %s@%s", v.Name, p.slot(key.d)), key, v.DType, boxShape(p.eg.Tiles[v][key.d]))
	if err != nil {
		return err
	}
	last, err := p.launch(p.dev(d), false, k)
	if err != nil {
		return err
	}
	p.lastWrite[key] = last
	return nil
}

// copyPieces adds a copy, on slot d's device, of every piece of v from
// its slot's tile into buffer to.
func (p *partitioned) copyPieces(d, to int, v *ir.Value, pieces []execution.Piece) error {
	for _, piece := range pieces {
		if err := p.zeroUnwritten(v, piece.From); err != nil {
			return err
		}
		src := p.tile(v, piece.From)
		s := plan.Step{Op: plan.Copy, From: src, To: to, Src: planBox(piece.Box.Relative(p.eg.Tiles[v][piece.From])), At: piece.At, Label: "fetch " + v.Name}
		if w, ok := p.lastWrite[p.tileKey(v, piece.From)]; ok && p.dev(piece.From) != p.dev(d) {
			s.After = []plan.StepRef{{Device: p.dev(piece.From), Step: w}}
		}
		p.touch(src)
		p.touch(to)
		p.addStep(p.dev(d), false, s)
	}
	return nil
}

// reduce combines partial outputs over each group: every member adds an
// all-reduce of the group's parts into a buffer of its own (its tile
// when the box is its tile). In a pipeline plan's graph, the first of a
// device's slots combines the parts for all of them, by a reduce step
// reading the parts of the other devices where the group has several
// slots on one device (a collective's members are distinct devices). It
// returns, per slot and output, the step of its device after which its
// final part of that output is ready (-1: none). A reduce step names the
// kernel a GPU runtime launches for it.
func (p *partitioned) reduce(ops []*execution.Op, launched []int) ([][]int, error) {
	n := ops[0].Node
	ready := make([][]int, len(ops))
	for _, op := range ops {
		ready[op.Device] = make([]int, len(n.Outputs))
		for o := range n.Outputs {
			ready[op.Device][o] = launched[op.Device]
		}
	}
	type combination struct{ to, step int }
	combined := map[string]combination{} // by device, output and group
	for _, op := range ops {
		if op.Inst == nil {
			continue
		}
		d := op.Device
		for o, v := range n.Outputs {
			if op.Groups[o] == nil {
				continue // not partial, or kept as a partial sum
			}
			toTile := op.Outputs[o].Equal(p.eg.Tiles[v][d])
			key := fmt.Sprint(p.dev(d), o, op.Groups[o])
			if c, ok := combined[key]; ok {
				ready[d][o] = c.step
				switch {
				case !toTile:
					p.bufferOf[reducedKey{n, o, d}] = c.to
				case p.tile(v, d) != c.to:
					// The slots of a data-parallel stage share the tile.
					return nil, fmt.Errorf("slot %s combines %s into a tile of its own, which no step writes", p.slot(d), v.Name)
				}
				continue
			}
			s := plan.Step{Op: plan.Reduce, Reducer: op.Reducer.String(), Label: "combine " + v.Name}
			for _, g := range op.Groups[o] {
				if launched[g] < 0 {
					continue
				}
				part := p.bufferOf[partKey{n, o, g}]
				s.Parts, s.Group = append(s.Parts, part), append(s.Group, p.dev(g))
				p.touch(part)
				if p.dev(g) != p.dev(d) {
					s.After = append(s.After, plan.StepRef{Device: p.dev(g), Step: launched[g]})
				}
			}
			collective(&s, p.dev(d))
			var to int
			if toTile {
				to = p.tile(v, d)
			} else {
				to = p.buffer(reducedKey{n, o, d}, fmt.Sprintf("%s@%s combined", v.Name, p.slot(d)), p.dev(d), v.DType, boxShape(op.Outputs[o]), roleOf(v))
			}
			s.To = to
			var err error
			if s.Kernel, err = p.reductionKernel(s.Reducer, v.DType, p.p.Buffers[to].Shape, len(s.Parts)); err != nil {
				return nil, err
			}
			p.touch(to)
			ready[d][o] = p.addStep(p.dev(d), false, s)
			combined[key] = combination{to, ready[d][o]}
			if id, ok := p.bufferOf[p.tileKey(v, d)]; ok && id == to {
				p.lastWrite[p.tileKey(v, d)] = ready[d][o]
			}
		}
	}
	return ready, nil
}

// collective makes reduce step s of device d one member's step of an
// all-reduce: every member of a group combines the same box of the
// same parts, in the same order, so its steps are one collective (a
// ring's or a tree's traffic where a runtime calls a library, not each
// member fetching every other part). A group of one, or with a device
// twice (a pipeline stage's slots), stays a reduce step.
func collective(s *plan.Step, d int) {
	if len(s.Group) < 2 || !slices.Contains(s.Group, d) || len(slices.Compact(slices.Sorted(slices.Values(s.Group)))) < len(s.Group) {
		s.Group = nil
		return
	}
	s.Op = plan.AllReduce
}

// distribute copies the computed parts of output o into every slot's
// tile of it (a device's slots sharing a tile, once): for each box
// computed, from the slot itself or another of its device when one
// computed it, else from the first slot that did.
func (p *partitioned) distribute(ops []*execution.Op, o int, ready [][]int) {
	n := ops[0].Node
	v := n.Outputs[o]
	for e, tb := range p.eg.Tiles[v] {
		if !p.eg.Holds(v, e) || p.eg.Owner(v, e) != e {
			continue
		}
		for _, src := range p.sources(ops, o, e) {
			in := src.box.Intersect(tb)
			if own, ok := p.bufferOf[p.tileKey(v, e)]; in.Size() == 0 || ok && src.buffer == own {
				continue
			}
			to := p.tile(v, e)
			s := plan.Step{Op: plan.Copy, From: src.buffer, To: to, Src: planBox(in.Relative(src.box)), At: lows(in.Relative(tb)), Label: "store " + v.Name}
			if p.dev(src.device) != p.dev(e) {
				s.After = []plan.StepRef{{Device: p.dev(src.device), Step: ready[src.device][o]}}
			}
			p.touch(src.buffer)
			p.touch(to)
			p.lastWrite[p.tileKey(v, e)] = p.addStep(p.dev(e), false, s)
		}
	}
}

type source struct {
	device, buffer int
	box            execution.Box
}

// sources lists the distinct boxes of output o that the slots holding
// the same partial sum as e computed, each with the buffer holding its
// final values, preferring those of e's device.
func (p *partitioned) sources(ops []*execution.Op, o, e int) []source {
	var out []source
	seen := map[string]int{}
	for _, op := range ops {
		if op.Inst == nil || !p.eg.SameSum(op.Node.Outputs[o], op.Device, e) {
			continue
		}
		d := op.Device
		src := source{device: d, box: op.Outputs[o], buffer: p.finalBuffer(op, o)}
		key := fmt.Sprint(src.box)
		if i, ok := seen[key]; ok {
			if p.dev(d) == p.dev(e) && p.dev(out[i].device) != p.dev(e) {
				out[i] = src
			}
			continue
		}
		seen[key] = len(out)
		out = append(out, src)
	}
	return out
}

// finalBuffer is the buffer holding op's final values of output o.
func (p *partitioned) finalBuffer(op *execution.Op, o int) int {
	n, d := op.Node, op.Device
	if id, ok := p.bufferOf[reducedKey{n, o, d}]; ok {
		return id
	}
	if op.Groups[o] != nil || p.writesTile(op, o) {
		return p.bufferOf[p.tileKey(n.Outputs[o], d)]
	}
	return p.bufferOf[partKey{n, o, d}]
}

func boxShape(b execution.Box) []int64 {
	out := make([]int64, len(b))
	for i, r := range b {
		out[i] = r.Size()
	}
	return out
}

// planBox converts an inclusive box to the plan's half-open ranges.
func planBox(b execution.Box) []plan.Dim {
	out := make([]plan.Dim, len(b))
	for i, r := range b {
		out[i] = plan.Dim{Lo: r.Lo, Hi: r.Hi + 1}
	}
	return out
}

func lows(b execution.Box) []int64 {
	out := make([]int64, len(b))
	for i, r := range b {
		out[i] = r.Lo
	}
	return out
}
