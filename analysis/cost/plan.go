package cost

import (
	"fmt"

	"tofuc/lang/ir"
)

// Plan is a partition strategy: per recursion step, how every tensor is
// split and which strategy every operator runs.
type Plan struct {
	// Factors are the workers per step, k1 ≥ k2 ≥ …; their product is the
	// number of devices.
	Factors []int
	// Tensors holds, per tensor, the dimension it is split along at each
	// step (-1: replicated at that step).
	Tensors map[*ir.Value][]int
	// Ops holds, per node, its choice at each step, relative to its view
	// at that step.
	Ops map[*ir.Node][]Choice
}

// NewPlan is an empty plan over the given factors.
func NewPlan(factors []int) *Plan {
	return &Plan{Factors: factors, Tensors: map[*ir.Value][]int{}, Ops: map[*ir.Node][]Choice{}}
}

// Devices is the product of the factors.
func (p *Plan) Devices() int {
	n := 1
	for _, k := range p.Factors {
		n *= k
	}
	return n
}

// TileShape is the shape of the largest tile of a tensor after the splits
// dims (one per step) over factors.
func TileShape(shape []int64, dims, factors []int) []int64 {
	out := append([]int64(nil), shape...)
	for i, d := range dims {
		if d >= 0 {
			out[d] = (out[d] + int64(factors[i]) - 1) / int64(factors[i])
		}
	}
	return out
}

// Splittable lists the dimensions a tile can be split along into k parts
// (those with at least k values).
func Splittable(tile []int64, k int) []int {
	var out []int
	for d, n := range tile {
		if n >= int64(k) {
			out = append(out, d)
		}
	}
	return out
}

// Layouts lists the layouts of tensor v at a step over k workers, its
// tile before the step being tile: a split along each dimension with at
// least k values, Replicated, and for the partial gradients of a weight
// (PartialOK) Partial.
func (g *Graph) Layouts(v *ir.Value, tile []int64, k int) []int {
	out := append(Splittable(tile, k), Replicated)
	if g.PartialOK(v) {
		out = append(out, Partial)
	}
	return out
}

// Dims is the layout of each value at step i (Replicated for constants).
func (p *Plan) Dims(vs []*ir.Value, i int) []int {
	out := make([]int, len(vs))
	for j, v := range vs {
		out[j] = Replicated
		if v.Const == nil {
			out[j] = p.Tensors[v][i]
		}
	}
	return out
}

// Placement is how a node's tensors are laid out at one step: each
// one's layout and how many devices of a group need what the step moves
// of it (Copies).
type Placement struct {
	In, Out             []int
	InCopies, OutCopies []int64
}

// Placement is node n's placement at step i.
func (p *Plan) Placement(n *ir.Node, i int) Placement {
	pl := Placement{In: p.Dims(n.Inputs, i), Out: p.Dims(n.Outputs, i)}
	copies := func(vs []*ir.Value) []int64 {
		out := make([]int64, len(vs))
		for j, v := range vs {
			out[j] = 1
			if v.Const == nil {
				out[j] = Copies(p.Tensors[v], p.Factors, i)
			}
		}
		return out
	}
	pl.InCopies, pl.OutCopies = copies(n.Inputs), copies(n.Outputs)
	return pl
}

// Copies is how many devices of a group of step i need each element a
// transfer of that step brings to the group: Tofu's recursive accounting
// charges a step's transfers once per group, which is exact when the
// later steps split the tensor (each device of the group receives its
// share) but not when they keep it whole: a tensor replicated (or held
// as partial sums) at a later step is needed whole on each of its
// workers. So the product of the factors of the later steps at which
// the tensor's layout is not a split.
func Copies(layouts, factors []int, i int) int64 {
	n := int64(1)
	for j := i + 1; j < len(factors); j++ {
		if layouts[j] < 0 {
			n *= int64(factors[j])
		}
	}
	return n
}

// Validate checks that p covers g: a split per step for every tensor
// within its rank, and a choice per step for every node.
func (g *Graph) Validate(p *Plan) error {
	if len(p.Factors) == 0 {
		return fmt.Errorf("the plan has no steps")
	}
	for _, k := range p.Factors {
		if k < 2 {
			return fmt.Errorf("a step splits over %d workers; every step needs at least 2", k)
		}
	}
	m := len(p.Factors)
	for _, v := range g.tensors {
		ds, ok := p.Tensors[v]
		if !ok || len(ds) != m {
			return fmt.Errorf("tensor %s: expected a split for each of the %d steps", v.Name, m)
		}
		for _, d := range ds {
			if d < Partial || d >= len(g.Shapes[v]) {
				return fmt.Errorf("tensor %s has no dimension %d (rank %d)", v.Name, d, len(g.Shapes[v]))
			}
			if d == Partial && !g.PartialOK(v) {
				return fmt.Errorf("tensor %s cannot be held as partial sums (only a weight's gradients can)", v.Name)
			}
		}
	}
	for _, n := range g.IR.Nodes {
		if cs, ok := p.Ops[n]; !ok || len(cs) != m {
			return fmt.Errorf("operator %s: expected a strategy for each of the %d steps", n.Name, m)
		}
	}
	return nil
}
