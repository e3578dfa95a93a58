package cost

import (
	"fmt"

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
	if err := g.Validate(p); err != nil {
		return nil, err
	}
	if err := g.CheckScale(p.Devices()); err != nil {
		return nil, err
	}
	c := &Cost{StepBytes: make([]int64, len(p.Factors)), OpBytes: make([]int64, len(g.IR.Nodes))}
	views := make([]*View, len(g.IR.Nodes))
	for j, n := range g.IR.Nodes {
		views[j] = g.Root(n)
	}
	groups := int64(1)
	for i, k := range p.Factors {
		for j, n := range g.IR.Nodes {
			v, ch := views[j], p.Ops[n][i]
			if ch < Accumulate || int(ch) >= v.Strategies() || ch == Accumulate && !v.Linear() {
				return nil, fmt.Errorf("operator %s has no choice %s at step %d", n.Name, v.Name(ch), i+1)
			}
			b, ok := v.Step(k).Bytes(ch, p.Placement(n, i))
			if !ok {
				return nil, fmt.Errorf("operator %s: %s at step %d cannot read or write its tensors as laid out (partial sums only come from sums and go to accumulation)", n.Name, v.Name(ch), i+1)
			}
			b *= groups
			c.OpBytes[j] += b
			c.StepBytes[i] += b
			if i+1 == len(p.Factors) {
				continue // no step after: the last views are not needed
			}
			sub, err := v.Sub(ch, k)
			if err != nil {
				return nil, fmt.Errorf("operator %s: %w", n.Name, err)
			}
			views[j] = sub
		}
		groups *= int64(k)
	}
	for _, b := range c.StepBytes {
		c.CommBytes += b
	}
	c.Memory = g.memory(p, c.OpBytes)
	return c, nil
}

// TileBytes is the size of a tensor's largest tile under p.
func (g *Graph) TileBytes(p *Plan, v *ir.Value) int64 {
	return volume(TileShape(g.Shapes[v], p.Tensors[v], p.Factors)) * elemSize(v.DType)
}

// memory walks the nodes in order with live tiles and each node's
// communication buffers. A tensor lives until the last node whose lambda
// reads it: a backward node takes every input of its forward node, but
// the gradient of concat or reshape needs only their shapes.
func (g *Graph) memory(p *Plan, opBytes []int64) Memory {
	devices := int64(p.Devices())
	resident := map[*ir.Value]bool{}
	for _, v := range g.IR.Inputs {
		resident[v] = true
	}
	for _, pr := range g.IR.Params {
		resident[pr.Value] = true
	}
	for _, v := range g.IR.Outputs {
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
	m := Memory{PeakNode: -1}
	for v := range resident {
		if v.Const == nil {
			m.Resident += g.TileBytes(p, v)
		}
	}
	live, counted := m.Resident, map[*ir.Value]bool{}
	m.Peak = live
	for j, n := range g.IR.Nodes {
		for _, v := range n.Outputs {
			if !resident[v] && !counted[v] {
				counted[v] = true
				live += g.TileBytes(p, v)
			}
		}
		buf := (opBytes[j] + devices - 1) / devices
		m.Buffers = max(m.Buffers, buf)
		if live+buf > m.Peak {
			m.Peak, m.PeakNode = live+buf, j
		}
		for _, v := range n.Inputs {
			if l, ok := last[v]; ok && l == j && counted[v] {
				live -= g.TileBytes(p, v)
				counted[v] = false
			}
		}
		for _, v := range n.Outputs {
			if _, used := last[v]; !used && counted[v] {
				live -= g.TileBytes(p, v) // never read: dropped at once
				counted[v] = false
			}
		}
	}
	return m
}
