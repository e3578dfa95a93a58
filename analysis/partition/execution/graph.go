package execution

import (
	"fmt"
	"slices"

	"tofuc/analysis/cost"
	"tofuc/analysis/strategy"
	"tofuc/lang/ir"
)

// Box is a region of a tensor in its global coordinates.
type Box = strategy.Box

// Graph is the partitioned execution graph. Its devices are slots: in
// a partition plan's graph (Build) slot d is device d; in a pipeline
// plan's (BuildStaged) a device runs several slots, one per micro-batch
// of its stage (Physical, Device), and slots hold tiles only of the
// values their stage holds (Holds).
type Graph struct {
	Devices int
	// Plan is the partition plan (nil in a pipeline plan's graph, whose
	// stages have a plan each).
	Plan *cost.Plan
	// Physical is each slot's device in a pipeline plan's graph (nil:
	// slot d is device d).
	Physical []int
	staging  *staging
	// Sequence, when not nil, is the order in which a compiled plan's
	// devices run the units (Order); nil: node by node, in graph order.
	Sequence []Unit
	// Ops holds, for each node in order, its copy on each device.
	Ops [][]*Op
	// Tiles holds each tensor's tile on each device. A tensor partial at
	// some steps (cost.Partial) has there a tile of partial sums on
	// every device, the tensor being the sum over those steps' digits.
	Tiles map[*ir.Value][]Box
}

// Op is one operator on one device.
type Op struct {
	Node   *ir.Node
	Device int
	// Inst is what the device computes; nil when its part is empty.
	Inst *ir.Instance
	// In is what it reads of each input (nil for constants).
	In []*Input
	// Outputs is the box of each output it computes.
	Outputs []Box
	// Partial marks partial outputs (a split reduction's, or partial sums
	// of an accumulation), combined with Reducer over Groups[o] (the
	// devices computing the same box whose partials add up; nil when
	// output o stays partial, as the tensor's layout asks).
	Partial bool
	Reducer ir.Reducer
	Groups  [][]int
	// After is the device's previous operator (a control dependency), or
	// -1: the index of its node.
	After int
	// partialSteps are the steps at which the outputs are partial.
	partialSteps []bool
}

// Input is what one device reads of one input: the region (Bands, boxes
// of the tensor placed one after the other per dimension, as the
// instance reads them packed into a buffer of Shape), filled by the
// pieces of Sums: one list of pieces when the tensor is whole where it
// is read, else one per partial sum to add (the devices' partials over
// the steps at which the tensor is partial and the operator does not
// accumulate).
type Input struct {
	Shape []int64
	Bands []strategy.Placed
	Sums  [][]Piece
}

// Piece is one box of a device's tile copied into an input's buffer at
// At (From may be the device itself).
type Piece struct {
	From int
	Box  Box
	At   []int64
}

// ReadsOwnTile reports whether op's input j is exactly its slot's own
// whole tile of the value: one band, equal to the tile, from the slot
// alone (in a pipeline plan's graph a slot of another stage than the
// value's reads it from that stage's slots, even a scalar).
func (eg *Graph) ReadsOwnTile(op *Op, j int) bool {
	in, v := op.In[j], op.Node.Inputs[j]
	if in == nil || !eg.Holds(v, op.Device) {
		return false
	}
	tile := eg.Tiles[v][op.Device]
	return len(in.Bands) == 1 && len(in.Sums) == 1 && in.Bands[0].Box.Equal(tile) &&
		len(in.Sums[0]) == 1 && in.Sums[0][0].From == op.Device && in.Sums[0][0].Box.Equal(tile)
}

// FetchBytes is the bytes the graph's fetches move between devices.
func (g *Graph) FetchBytes() int64 {
	var n int64
	for _, ops := range g.Ops {
		for _, op := range ops {
			for j, in := range op.In {
				if in == nil || op.Inst == nil {
					continue
				}
				for _, sum := range in.Sums {
					for _, p := range sum {
						if p.From != op.Device {
							n += p.Box.Size() * cost.ElemSize(op.Node.Inputs[j])
						}
					}
				}
			}
		}
	}
	return n
}

// Build generates the execution graph of plan p over g.
func Build(g *cost.Graph, p *cost.Plan) (*Graph, error) {
	if err := g.Validate(p); err != nil {
		return nil, err
	}
	eg := &Graph{Devices: p.Devices(), Plan: p, Tiles: map[*ir.Value][]Box{}}
	for _, v := range g.Tensors() {
		for d := range eg.Devices {
			eg.Tiles[v] = append(eg.Tiles[v], tile(g.Shapes[v], p.Tensors[v], p.Factors, d))
		}
	}
	b := &builder{g: g, p: p, analyses: map[string]*analysed{}}
	for j, n := range g.IR.Nodes {
		ops, err := eg.node(b, n, j)
		if err != nil {
			return nil, err
		}
		eg.Ops = append(eg.Ops, ops)
	}
	return eg, nil
}

// node builds node n's copy on every device, its fetches and groups; j
// is its index.
func (eg *Graph) node(b *builder, n *ir.Node, j int) ([]*Op, error) {
	names := b.names(n)
	var ops []*Op
	for d := range eg.Devices {
		op, err := b.op(n, names, d)
		if err != nil {
			return nil, fmt.Errorf("operator %s on device %d: %w", n.Name, d, err)
		}
		op.After = j - 1 // -1 for the first
		eg.fetch(op, names)
		ops = append(ops, op)
	}
	eg.groups(ops)
	return ops, nil
}

// digit is device d's index in step i's group of factors[i] workers.
func digit(factors []int, i, d int) int {
	stride := 1
	for _, k := range factors[i+1:] {
		stride *= k
	}
	return d / stride % factors[i]
}

// tile is device d's tile of a tensor.
func tile(shape []int64, dims, factors []int, d int) Box {
	b := strategy.WholeBox(shape)
	for i, dim := range dims {
		if dim < 0 {
			continue
		}
		lo, hi := strategy.Part(b[dim].Size(), digit(factors, i, d), factors[i])
		b[dim] = strategy.Box1{Lo: b[dim].Lo + lo, Hi: b[dim].Lo + hi}
	}
	return b
}

type builder struct {
	g *cost.Graph
	p *cost.Plan
	// analyses by instance text: the devices' worker instances of an
	// operator are mostly alike.
	analyses map[string]*analysed
}

type analysed struct {
	a   *strategy.Analysis
	err error
}

// names are the node's choices in words, through its representative
// views (the same names hold on every device's instance).
func (b *builder) names(n *ir.Node) []string {
	v := b.g.Root(n)
	var out []string
	for i, c := range b.p.Ops[n] {
		out = append(out, v.Name(c))
		if sub, err := v.Sub(c, b.p.Factors[i]); err == nil {
			v = sub
		}
	}
	return out
}

func (b *builder) analyse(inst *ir.Instance) (*strategy.Analysis, error) {
	key := inst.String()
	if r, ok := b.analyses[key]; ok {
		return r.a, r.err
	}
	a, err := strategy.Analyse(inst)
	b.analyses[key] = &analysed{a, err}
	return a, err
}

// segment maps positions [At, At+N) of one dimension of a worker's
// input buffer to the tensor's [Lo, Lo+N).
type segment struct{ At, Lo, N int64 }

// op applies the node's strategies step by step for device d: the
// worker's regions, in the coordinates of the instance before it, are
// mapped back to the tensor through the segments of each dimension.
func (b *builder) op(n *ir.Node, names []string, d int) (*Op, error) {
	op := &Op{Node: n, Device: d, Inst: n.Inst, partialSteps: make([]bool, len(b.p.Factors))}
	segs := make([][][]segment, len(n.Inputs)) // per input, per dimension
	for j, v := range n.Inputs {
		if v.Const != nil {
			continue
		}
		segs[j] = [][]segment{} // non-nil: a scalar tensor is read too
		for _, size := range b.g.Shapes[v] {
			segs[j] = append(segs[j], []segment{{0, 0, size}})
		}
	}
	for _, v := range n.Outputs {
		op.Outputs = append(op.Outputs, strategy.WholeBox(b.g.Shapes[v]))
	}
	defer func() { op.In = inputs(n, segs) }()
	for i, k := range b.p.Factors {
		switch names[i] {
		case "replicate":
			continue
		case "accumulate":
			op.Partial, op.Reducer, op.partialSteps[i] = true, ir.Sum, true
			continue
		}
		a, err := b.analyse(op.Inst)
		if err != nil {
			return nil, err
		}
		s, err := a.Find(names[i])
		if err != nil {
			return nil, fmt.Errorf("step %d: %w", i+1, err)
		}
		w, err := a.Worker(s, nil, digit(b.p.Factors, i, d), k)
		if err != nil {
			return nil, err
		}
		for j, bands := range w.Inputs {
			if segs[j] != nil {
				segs[j] = compose(segs[j], bands)
			}
		}
		if s.Kind == strategy.SplitOutput {
			for o := range op.Outputs {
				dim := s.Dims[o]
				base := op.Outputs[o][dim].Lo
				op.Outputs[o][dim] = strategy.Box1{Lo: base + w.Part.Lo, Hi: base + w.Part.Hi}
			}
		} else {
			op.Partial, op.Reducer, op.partialSteps[i] = true, s.Reducer, true
		}
		if w.Empty {
			op.Inst = nil
			return op, nil
		}
		op.Inst = w.Inst
	}
	return op, nil
}

// compose maps a worker's bands (in the coordinates of the buffer before
// the step) through the segments into the segments of its own buffer.
func compose(segs [][]segment, bands strategy.Bands) [][]segment {
	out := make([][]segment, len(segs))
	for dim, bs := range bands {
		var at int64
		for _, band := range bs {
			for _, s := range segs[dim] {
				lo, hi := max(band.Lo, s.At), min(band.Hi, s.At+s.N-1)
				if lo <= hi {
					out[dim] = append(out[dim], segment{At: at + lo - band.Lo, Lo: s.Lo + lo - s.At, N: hi - lo + 1})
				}
			}
			at += band.Size()
		}
		if len(out[dim]) == 0 {
			out[dim] = []segment{{0, 0, 0}} // nothing read
		}
	}
	return out
}

// inputs turns the segments of each input into its bands.
func inputs(n *ir.Node, segs [][][]segment) []*Input {
	out := make([]*Input, len(n.Inputs))
	for j, dims := range segs {
		if dims == nil {
			continue
		}
		in := &Input{Bands: []strategy.Placed{{}}}
		for _, ss := range dims {
			var size int64
			var next []strategy.Placed
			for _, p := range in.Bands {
				for _, s := range ss {
					next = append(next, strategy.Placed{
						Box: append(slices.Clone(p.Box), strategy.Box1{Lo: s.Lo, Hi: s.Lo + s.N - 1}),
						At:  append(slices.Clone(p.At), s.At)})
				}
			}
			for _, s := range ss {
				size = max(size, s.At+s.N)
			}
			in.Shape, in.Bands = append(in.Shape, size), next
		}
		out[j] = in
	}
	return out
}

// fetch fills the pieces of op's inputs: for each partial sum to add
// (one unless the input is partial at steps where op does not
// accumulate), each band covered by the tiles of the devices holding
// that sum, the own tile first.
func (eg *Graph) fetch(op *Op, names []string) {
	if op.Inst == nil {
		return
	}
	p := eg.Plan
	for j, v := range op.Node.Inputs {
		in := op.In[j]
		if in == nil {
			continue
		}
		var combine, own []int // steps summed over, steps read as the own partial
		for i, layout := range p.Tensors[v] {
			switch {
			case layout != cost.Partial:
			case names[i] == "accumulate":
				own = append(own, i)
			default:
				combine = append(combine, i)
			}
		}
		for _, t := range tuples(p.Factors, combine) {
			allowed := func(e int) bool {
				for x, i := range combine {
					if digit(p.Factors, i, e) != t[x] {
						return false
					}
				}
				for _, i := range own {
					if digit(p.Factors, i, e) != digit(p.Factors, i, op.Device) {
						return false
					}
				}
				return true
			}
			in.Sums = append(in.Sums, eg.pieces(in.Bands, eg.Tiles[v], op.Device, allowed))
		}
	}
}

// tuples lists every combination of digits of the given steps.
func tuples(factors []int, steps []int) [][]int {
	out := [][]int{nil}
	for _, i := range steps {
		var next [][]int
		for _, t := range out {
			for x := range factors[i] {
				next = append(next, append(slices.Clone(t), x))
			}
		}
		out = next
	}
	return out
}

// pieces covers the bands from the tiles of the allowed devices, the own
// tile first: each device contributes what the ones before it lack, cut
// into boxes.
func (eg *Graph) pieces(bands []strategy.Placed, tiles []Box, self int, allowed func(int) bool) []Piece {
	order := []int{self}
	for e := range tiles {
		if e != self {
			order = append(order, e)
		}
	}
	var out []Piece
	for _, band := range bands {
		var covered []Box
		for _, e := range order {
			if !allowed(e) {
				continue
			}
			for _, part := range band.Box.Intersect(tiles[e]).Subtract(covered) {
				at := make([]int64, len(part))
				for dim := range part {
					at[dim] = band.At[dim] + part[dim].Lo - band.Box[dim].Lo
				}
				out = append(out, Piece{From: e, Box: part, At: at})
				covered = append(covered, part)
			}
		}
	}
	return out
}

// groups sets, per output, the devices whose partials combine: they
// compute the same box and differ only in the steps at which the
// output is partial but its layout is not (cost.Partial keeps the
// partials: no group).
func (eg *Graph) groups(ops []*Op) {
	p := eg.Plan
	for o, v := range ops[0].Node.Outputs {
		byKey := map[string][]int{}
		keys := make([]string, len(ops))
		for _, op := range ops {
			if !op.Partial {
				continue
			}
			combined := false
			key := fmt.Sprint(op.Outputs[o])
			for i, partial := range op.partialSteps {
				if partial && p.Tensors[v][i] != cost.Partial {
					combined = true
					continue
				}
				key += fmt.Sprintf("/%d", digit(p.Factors, i, op.Device))
			}
			if combined {
				keys[op.Device] = key
				byKey[key] = append(byKey[key], op.Device)
			}
		}
		for _, op := range ops {
			if op.Groups == nil {
				op.Groups = make([][]int, len(op.Outputs))
			}
			if k := keys[op.Device]; k != "" {
				op.Groups[o] = byKey[k]
			}
		}
	}
}

// SameSum reports whether slots d and e hold the same partial sum of v:
// slots of one plan with equal digits at every step at which v is
// partial.
func (eg *Graph) SameSum(v *ir.Value, d, e int) bool {
	p, ld := eg.local(d)
	q, le := eg.local(e)
	if p != q {
		return false
	}
	for i, layout := range p.Tensors[v] {
		if layout == cost.Partial && digit(p.Factors, i, ld) != digit(p.Factors, i, le) {
			return false
		}
	}
	return true
}
