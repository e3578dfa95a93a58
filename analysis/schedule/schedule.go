package schedule

import (
	"tofuc/lang"
	"tofuc/lang/ir"
)

// Schedule is how a graph runs as kernels.
type Schedule struct {
	Graph *ir.Graph
	// Kernels in launch order; precomputed ones among them run when the
	// weights are bound.
	Kernels []*Kernel
	// Views are the nodes that launch nothing, in graph order.
	Views []*ir.Node
	// KernelOf maps every node that is not a view to its kernel's index.
	KernelOf map[*ir.Node]int
	// Uses counts the consumers of each value, a graph output counting as
	// two (it always leaves its kernel).
	Uses     map[*ir.Value]int
	producer map[*ir.Value]*ir.Node
}

// Kernel is one launch: a node and the element-wise nodes fused into it.
type Kernel struct {
	// Nodes holds the node that starts the kernel, then the nodes fused
	// into it in graph order; each fused node reads the value of an
	// earlier one.
	Nodes []*ir.Node
	// Precomputed marks a kernel computed from the weights alone.
	Precomputed bool
}

// Root is the node that starts the kernel.
func (k *Kernel) Root() *ir.Node { return k.Nodes[0] }

// Build schedules g.
func Build(g *ir.Graph) *Schedule {
	s := &Schedule{Graph: g, KernelOf: map[*ir.Node]int{}, Uses: map[*ir.Value]int{}, producer: map[*ir.Value]*ir.Node{}}
	for _, n := range g.Nodes {
		for _, v := range n.Inputs {
			s.Uses[v]++
		}
		for _, v := range n.Outputs {
			s.producer[v] = n
		}
	}
	for _, v := range g.Outputs {
		s.Uses[v] += 2
	}
	weight := map[*ir.Value]bool{}
	for _, p := range g.Params {
		weight[p.Value] = true
	}
	kernelOfValue := map[*ir.Value]int{}
	for _, n := range g.Nodes {
		if fromWeights(n, weight) {
			for _, v := range n.Outputs {
				weight[v] = true
			}
			s.KernelOf[n] = len(s.Kernels)
			s.Kernels = append(s.Kernels, &Kernel{Nodes: []*ir.Node{n}, Precomputed: true})
			continue
		}
		if IsView(n.Inst) {
			s.Views = append(s.Views, n)
			continue
		}
		k := s.fusionTarget(n, kernelOfValue)
		if k < 0 {
			k = len(s.Kernels)
			s.Kernels = append(s.Kernels, &Kernel{})
		}
		s.Kernels[k].Nodes = append(s.Kernels[k].Nodes, n)
		s.KernelOf[n] = k
		for _, v := range n.Outputs {
			kernelOfValue[v] = k
		}
	}
	return s
}

// IsViewNode reports whether n is a view.
func (s *Schedule) IsViewNode(n *ir.Node) bool {
	_, ok := s.KernelOf[n]
	return !ok
}

// Producer is the node computing v, or nil for inputs, parameters and
// constants.
func (s *Schedule) Producer(v *ir.Value) *ir.Node { return s.producer[v] }

// Internal reports whether v never leaves kernel k: it is computed by a
// node of k and read only by later nodes of k (a fused intermediate).
func (s *Schedule) Internal(v *ir.Value, k int) bool {
	p := s.producer[v]
	if p == nil || s.IsViewNode(p) || s.KernelOf[p] != k || s.Uses[v] != 1 {
		return false
	}
	for _, n := range s.Kernels[k].Nodes[1:] {
		for _, in := range n.Inputs {
			if in == v {
				return true
			}
		}
	}
	return false
}

// fromWeights reports whether every input of n is a parameter, a constant
// or computed from them alone.
func fromWeights(n *ir.Node, weight map[*ir.Value]bool) bool {
	for _, v := range n.Inputs {
		if !weight[v] && v.Const == nil {
			return false
		}
	}
	return true
}

// fusionTarget is the kernel an element-wise node joins, or -1.
func (s *Schedule) fusionTarget(n *ir.Node, kernelOf map[*ir.Value]int) int {
	if !Elementwise(n.Inst) {
		return -1
	}
	for _, v := range n.Inputs {
		if k, ok := kernelOf[v]; ok && s.Uses[v] == 1 && v.DType.IsFloat() && lang.ShapeEqual(v.Shape, n.Outputs[0].Shape) {
			return k
		}
	}
	return -1
}
