package execution

import (
	"fmt"

	"tofuc/analysis/cost"
	"tofuc/analysis/strategy"
	"tofuc/lang/ir"
)

// Box is a region of a tensor in its global coordinates.
type Box = strategy.Box

// Graph is the partitioned execution graph.
type Graph struct {
	Devices int
	Plan    *cost.Plan
	// Ops holds, for each node in order, its copy on each device.
	Ops [][]*Op
	// Tiles holds each tensor's tile on each device.
	Tiles map[*ir.Value][]Box
}

// Op is one operator on one device.
type Op struct {
	Node   *ir.Node
	Device int
	// Inst is what the device computes; nil when its part is empty.
	Inst *ir.Instance
	// Inputs is the region of each input it reads (nil for constants).
	Inputs []Box
	// Fetch is the fused fetch of what it reads from other devices.
	Fetch []Piece
	// Outputs is the box of each output it computes.
	Outputs []Box
	// Partial marks partial outputs, combined with Reducer over Group
	// (the devices computing the same boxes).
	Partial bool
	Reducer ir.Reducer
	Group   []int
	// key identifies the partials that combine: the output boxes and the
	// device's index in every step that is not a reduction.
	key string
	// After is the device's previous operator (a control dependency), or
	// -1: the index of its node.
	After int
}

// Piece is one region a fused fetch copies from another device's tile.
type Piece struct {
	Input, From int
	Box         Box
}

// FetchBytes is the bytes the graph's fused fetches move.
func (g *Graph) FetchBytes() int64 {
	var n int64
	for _, ops := range g.Ops {
		for _, op := range ops {
			for _, p := range op.Fetch {
				n += p.Box.Size() * int64(max(1, op.Node.Inputs[p.Input].DType.Size()))
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
		names := b.names(n)
		var ops []*Op
		for d := range eg.Devices {
			op, err := b.op(n, names, d)
			if err != nil {
				return nil, fmt.Errorf("operator %s on device %d: %v", n.Name, d, err)
			}
			op.After = -1
			if j > 0 {
				op.After = j - 1
			}
			op.Fetch = eg.fetch(op)
			ops = append(ops, op)
		}
		groups(ops)
		eg.Ops = append(eg.Ops, ops)
	}
	return eg, nil
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

// op applies the node's strategies step by step for device d.
func (b *builder) op(n *ir.Node, names []string, d int) (*Op, error) {
	op := &Op{Node: n, Device: d, Inst: n.Inst}
	for _, v := range n.Inputs {
		var box Box
		if v.Const == nil {
			box = strategy.WholeBox(b.g.Shapes[v])
		}
		op.Inputs = append(op.Inputs, box)
	}
	for _, v := range n.Outputs {
		op.Outputs = append(op.Outputs, strategy.WholeBox(b.g.Shapes[v]))
	}
	reduced := make([]bool, len(b.p.Factors))
	defer func() { op.key = groupKey(op, reduced, b.p.Factors) }()
	for i, k := range b.p.Factors {
		if names[i] == "replicate" {
			continue
		}
		a, err := b.analyse(op.Inst)
		if err != nil {
			return nil, err
		}
		s := find(a, names[i])
		if s == nil {
			return nil, fmt.Errorf("step %d: no strategy %s", i+1, names[i])
		}
		w, err := a.Worker(s, nil, digit(b.p.Factors, i, d), k)
		if err != nil {
			return nil, err
		}
		for j, box := range w.Inputs {
			if op.Inputs[j] != nil {
				op.Inputs[j] = op.Inputs[j].Shift(box)
			}
		}
		if s.Kind == strategy.SplitOutput {
			for o := range op.Outputs {
				base := op.Outputs[o][s.Dim].Lo
				op.Outputs[o][s.Dim] = strategy.Box1{Lo: base + w.Part.Lo, Hi: base + w.Part.Hi}
			}
		} else {
			op.Partial, op.Reducer = true, s.Reducer
			reduced[i] = true
		}
		if w.Empty {
			op.Inst = nil
			return op, nil
		}
		op.Inst = w.Inst
	}
	return op, nil
}

func find(a *strategy.Analysis, name string) *strategy.Strategy {
	for _, s := range a.Strategies {
		word := "split " + s.Var.Name
		if s.Kind == strategy.SplitReduction {
			word = fmt.Sprintf("reduce %s (%s)", s.Var.Name, s.Reducer)
		}
		if word == name {
			return s
		}
	}
	return nil
}

// fetch lists the pieces of op's input regions held by other devices
// and not by its own: the fused multi-region fetch.
func (eg *Graph) fetch(op *Op) []Piece {
	var out []Piece
	if op.Inst == nil {
		return nil
	}
	for j, v := range op.Node.Inputs {
		if v.Const == nil {
			out = append(out, pieces(op.Inputs[j], eg.Tiles[v], op.Device, j)...)
		}
	}
	return out
}

// pieces covers region r from the tiles, own tile first: each other
// device contributes what the devices before it (and the own one) lack,
// cut into boxes.
func pieces(r Box, tiles []Box, self, input int) []Piece {
	var out []Piece
	covered := []Box{r.Intersect(tiles[self])}
	for e, t := range tiles {
		if e == self {
			continue
		}
		for _, part := range r.Intersect(t).Subtract(covered) {
			out = append(out, Piece{Input: input, From: e, Box: part})
			covered = append(covered, part)
		}
	}
	return out
}

func groupKey(op *Op, reduced []bool, factors []int) string {
	key := fmt.Sprint(op.Outputs)
	for i, r := range reduced {
		if !r {
			key += fmt.Sprintf("/%d", digit(factors, i, op.Device))
		}
	}
	return key
}

// groups sets, for partial outputs, the devices whose partials combine:
// they compute the same boxes and differ only in the reduction steps.
func groups(ops []*Op) {
	byKey := map[string][]int{}
	for _, op := range ops {
		if op.Partial {
			byKey[op.key] = append(byKey[op.key], op.Device)
		}
	}
	for _, op := range ops {
		if op.Partial {
			op.Group = byKey[op.key]
		}
	}
}
