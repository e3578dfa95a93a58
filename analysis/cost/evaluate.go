package cost

import (
	"fmt"
	"slices"

	"tofuc/lang/ir"
)

// Cost is what a plan costs.
type Cost struct {
	// CommBytes is the bytes communicated per training (or inference)
	// step, over all devices.
	CommBytes int64
	// StepBytes is each recursion step's share (Tofu's δ_i).
	StepBytes []int64
	// OpBytes is each node's share, in node order.
	OpBytes []int64
	Memory  Memory
}

// Memory is the memory of one device.
type Memory struct {
	// Peak is the largest live memory during the step.
	Peak int64
	// PeakNode is the node running at the peak (-1: none).
	PeakNode int
	// Resident is what is live throughout: parameters, inputs, outputs.
	Resident int64
	// Buffers is the largest communication buffer of one operator.
	Buffers int64
}

// Evaluate prices a plan (see the package comment).
func (g *Graph) Evaluate(p *Plan) (*Cost, error) {
	if err := g.checkPlan(p); err != nil {
		return nil, err
	}
	return g.evaluate(p, g.nodeBytes)
}

// checkPlan is what pricing a plan needs of it: valid, and its costs
// within int64 (CheckScale).
func (g *Graph) checkPlan(p *Plan) error {
	if err := g.Validate(p); err != nil {
		return err
	}
	return g.CheckScale(p.Devices())
}

// evaluate prices plan p (checked), each node's bytes at each step from
// nodeBytes.
func (g *Graph) evaluate(p *Plan, nodeBytes func(*Plan, int) ([]int64, error)) (*Cost, error) {
	c := &Cost{StepBytes: make([]int64, len(p.Factors)), OpBytes: make([]int64, len(g.IR.Nodes))}
	for j := range g.IR.Nodes {
		steps, err := nodeBytes(p, j)
		if err != nil {
			return nil, err
		}
		for i, b := range steps {
			c.OpBytes[j] += b
			c.StepBytes[i] += b
		}
	}
	for _, b := range c.StepBytes {
		c.CommBytes += b
	}
	c.Memory = g.memory(p, c.OpBytes)
	return c, nil
}

// nodeBytes is what node j of plan p communicates at each step, over
// all devices.
func (g *Graph) nodeBytes(p *Plan, j int) ([]int64, error) {
	n := g.IR.Nodes[j]
	v := g.Root(n)
	steps := make([]int64, len(p.Factors))
	groups := int64(1)
	for i, k := range p.Factors {
		ch := p.Ops[n][i]
		if ch < Accumulate || int(ch) >= v.Strategies() || ch == Accumulate && !v.Linear() {
			return nil, fmt.Errorf("operator %s has no choice %s at step %d", n.Name, v.Name(ch), i+1)
		}
		b, ok := v.Step(k).Bytes(ch, p.Placement(n, i))
		if !ok {
			return nil, fmt.Errorf("operator %s: %s at step %d cannot read or write its tensors as laid out (partial sums only come from sums and go to accumulation)", n.Name, v.Name(ch), i+1)
		}
		steps[i] = b * groups
		if i+1 == len(p.Factors) {
			break // no step after: the last view is not needed
		}
		sub, err := v.Sub(ch, k)
		if err != nil {
			return nil, fmt.Errorf("operator %s: %w", n.Name, err)
		}
		v = sub
		groups *= int64(k)
	}
	return steps, nil
}

// TileBytes is the size of a tensor's largest tile under p.
func (g *Graph) TileBytes(p *Plan, v *ir.Value) int64 {
	return tileVolume(g.Shapes[v], p.Tensors[v], p.Factors) * elemSize(v.DType)
}

// tileVolume is the volume of TileShape(shape, dims, factors), without
// building the shape (memory pricing asks it of every tensor of every
// plan a search sees).
func tileVolume(shape []int64, dims, factors []int) int64 {
	n := int64(1)
	for k, e := range shape {
		for i, d := range dims {
			if d == k {
				e = (e + int64(factors[i]) - 1) / int64(factors[i])
			}
		}
		n *= e
	}
	return n
}

// memory walks the nodes in order with live tiles and each node's
// communication buffers (the tensors each node adds and frees:
// lifetimes).
func (g *Graph) memory(p *Plan, opBytes []int64) Memory {
	devices := int64(p.Devices())
	life := g.lifetimes()
	m := Memory{PeakNode: -1}
	for _, v := range life.resident {
		m.Resident += g.TileBytes(p, v)
	}
	live := m.Resident
	m.Peak = live
	added := make([]int64, 0, life.added) // each added tile's bytes, in the order added
	for j := range g.IR.Nodes {
		for _, v := range life.adds[j] {
			b := g.TileBytes(p, v)
			added = append(added, b)
			live += b
		}
		buf := (opBytes[j] + devices - 1) / devices
		m.Buffers = max(m.Buffers, buf)
		if live+buf > m.Peak {
			m.Peak, m.PeakNode = live+buf, j
		}
		for _, id := range life.frees[j] {
			live -= added[id]
		}
	}
	return m
}

// lifetimes are the tensors live throughout a step (inputs, parameters,
// outputs: resident) and those each node adds (the others it writes)
// and frees after it runs (those whose last reader it is, and those it
// writes that none reads). A tensor lives until the last node whose
// lambda reads it: a backward node takes every input of its forward
// node, but the gradient of concat or reshape needs only their shapes.
type lifetimes struct {
	resident []*ir.Value
	adds     [][]*ir.Value
	// frees are the tensors each node frees, by the order in which the
	// nodes added them (added in all), so that a walk prices each tile
	// once.
	frees [][]int
	added int
}

// lifetimes is g's, found once.
func (g *Graph) lifetimes() *lifetimes {
	g.lifeOnce.Do(func() {
		life := &lifetimes{adds: make([][]*ir.Value, len(g.IR.Nodes)), frees: make([][]int, len(g.IR.Nodes))}
		resident := map[*ir.Value]bool{}
		for _, v := range append(append(slices.Clone(g.IR.Inputs), g.paramValues()...), g.IR.Outputs...) {
			if !resident[v] && v.Const == nil {
				life.resident = append(life.resident, v)
			}
			resident[v] = true
		}
		last := map[*ir.Value]int{}
		for j, n := range g.IR.Nodes {
			read := g.Root(n).Reads()
			for i, v := range n.Inputs {
				if read[i] {
					last[v] = j
				}
			}
		}
		live := map[*ir.Value]int{} // a live tensor's order among those added
		for j, n := range g.IR.Nodes {
			for _, v := range n.Outputs {
				if _, ok := live[v]; !resident[v] && !ok {
					live[v] = life.added
					life.added++
					life.adds[j] = append(life.adds[j], v)
				}
			}
			for _, v := range n.Inputs {
				if id, ok := live[v]; ok && last[v] == j {
					if _, read := last[v]; read {
						delete(live, v)
						life.frees[j] = append(life.frees[j], id)
					}
				}
			}
			for _, v := range n.Outputs {
				if id, ok := live[v]; ok {
					if _, read := last[v]; !read {
						delete(live, v) // never read: dropped at once
						life.frees[j] = append(life.frees[j], id)
					}
				}
			}
		}
		g.life = life
	})
	return g.life
}

// paramValues are the values of g's parameters.
func (g *Graph) paramValues() []*ir.Value {
	var out []*ir.Value
	for _, p := range g.IR.Params {
		out = append(out, p.Value)
	}
	return out
}
