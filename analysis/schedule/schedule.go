package schedule

import (
	"tofuc/lang"
	"tofuc/lang/ir"
)

// Schedule is how a graph runs as kernels.
type Schedule struct {
	Graph *ir.Graph
	// Kernels are the launches in order; precomputed ones among them run
	// when the weights are bound.
	Kernels []*Kernel
	// Views are the nodes that launch nothing, in graph order.
	Views []*ir.Node
	// Uses counts the consumers of each value, a graph output counting as
	// two (it always leaves its kernel).
	Uses map[*ir.Value]int
	// KernelOfValue is the launch that computes each value (views and
	// inputs have none).
	KernelOfValue map[*ir.Value]int
	producer      map[*ir.Value]*ir.Node
	// ready is the kernel after which a value can be read (a view's, its
	// input's); absent: before every kernel.
	ready map[*ir.Value]int
	// precomputedLocal holds the locals that Inlined would recompute but
	// that are computed once with the weights instead (see Build).
	precomputedLocal map[nodeLocal]bool
	// prologue maps a value computed inside its consumers' kernels to
	// the node computing it (see Build).
	prologue map[*ir.Value]*ir.Node
}

// Prologue is the node computing v inside the kernels of v's consumers
// (an injective producer evaluated where it is read), or nil.
func (s *Schedule) Prologue(v *ir.Value) *ir.Node { return s.prologue[v] }

// nodeLocal is a local of one node's instance (instances may be shared).
type nodeLocal struct {
	n *ir.Node
	d *ir.Def
}

// Recomputed reports whether local d of node n is recomputed where it is
// read rather than read from a buffer.
func (s *Schedule) Recomputed(n *ir.Node, d *ir.Def) bool {
	return Inlined(n.Inst, d) && !s.precomputedLocal[nodeLocal{n, d}]
}

// Kernel is one launch: a Def of a node's instance (a materialised local
// or an output, see Launches), and the element-wise nodes fused into it.
type Kernel struct {
	// Nodes holds the node whose Def the kernel computes, then the nodes
	// fused into it in graph order; each fused node reads the value the
	// kernel computed so far, which then never leaves it.
	Nodes []*ir.Node
	// Def is the Def of Nodes[0]'s instance it computes.
	Def *ir.Def
	// Precomputed marks a kernel computed from the weights alone.
	Precomputed bool
	// Before, when not nil, is the kernel whose output this one reads
	// and that runs in this kernel's launch (see chain): each task
	// computes a block of rows of Before's output, its ChainRows leading
	// variables, then the same rows of this kernel's. Chained marks
	// that earlier kernel, which has no launch of its own.
	Before    *Kernel
	ChainRows int
	Chained   bool
}

// Root is the node whose Def the kernel computes.
func (k *Kernel) Root() *ir.Node { return k.Nodes[0] }

// Build schedules g.
func Build(g *ir.Graph) *Schedule {
	s := BuildUnchained(g)
	s.chain()
	return s
}

// BuildUnchained schedules g as Build does but pairs no kernels into
// chained launches (Kernel.Before): what an estimate for a device that
// runs none reads, without the time of finding the pairs.
func BuildUnchained(g *ir.Graph) *Schedule {
	// maps sized once: a search builds thousands of schedules
	n, inputs := len(g.Nodes), len(g.Outputs)
	for _, x := range g.Nodes {
		inputs += len(x.Inputs)
	}
	s := &Schedule{Graph: g, Uses: make(map[*ir.Value]int, inputs), KernelOfValue: make(map[*ir.Value]int, n), producer: make(map[*ir.Value]*ir.Node, n), ready: make(map[*ir.Value]int, n),
		precomputedLocal: map[nodeLocal]bool{}, prologue: map[*ir.Value]*ir.Node{}}
	consumers := make(map[*ir.Value][]*ir.Node, inputs)
	for _, n := range g.Nodes {
		for _, v := range n.Inputs {
			s.Uses[v]++
			consumers[v] = append(consumers[v], n)
		}
		for _, v := range n.Outputs {
			s.producer[v] = n
		}
	}
	for _, v := range g.Outputs {
		s.Uses[v] += 2
	}
	weight := make(map[*ir.Value]bool, len(g.Params)+n)
	for _, p := range g.Params {
		weight[p.Value] = true
	}
	for _, n := range g.Nodes {
		precomputed := fromWeights(n, weight)
		switch {
		case precomputed:
			for _, v := range n.Outputs {
				weight[v] = true
			}
		case IsView(n.Inst):
			s.Views = append(s.Views, n)
			for _, v := range n.Outputs {
				s.ready[v] = s.readyAt(n.Inputs...)
			}
			continue
		case IsInjective(n.Inst) && readThrough(n.Outputs[0], consumers[n.Outputs[0]], s.Uses):
			// Read where its consumers read it, through the index
			// transformation: no launch and no buffer.
			s.prologue[n.Outputs[0]] = n
			s.ready[n.Outputs[0]] = s.readyAt(n.Inputs...)
			continue
		}
		// A local computed from the weights alone runs once with them
		// when it is not cheap to recompute (a reduction: materialised,
		// or a row local, anyway), or when it is smaller than
		// the node's output, so that each of its elements would be
		// recomputed for many outputs (a batch norm's per-channel
		// scale: a square root and a division per element otherwise).
		onWeights := weightLocals(n, weight)
		for _, d := range n.Inst.Locals {
			if !onWeights[d] {
				continue
			}
			reused := !precomputed && smaller(d, n)
			if !recomputable(n.Inst, d) || reused {
				s.Kernels = append(s.Kernels, &Kernel{Nodes: []*ir.Node{n}, Def: d, Precomputed: true})
				s.precomputedLocal[nodeLocal{n, d}] = true
			}
		}
		if k := s.fusionTarget(n, onWeights); k >= 0 && !precomputed {
			s.Kernels[k].Nodes = append(s.Kernels[k].Nodes, n)
			s.KernelOfValue[n.Outputs[0]] = k
			s.ready[n.Outputs[0]] = k
			continue
		}
		for _, d := range Launches(n.Inst) {
			if onWeights[d] {
				continue // launched above, with the weights
			}
			if v := outputValue(n, d); v != nil {
				s.KernelOfValue[v] = len(s.Kernels)
				if !precomputed {
					s.ready[v] = len(s.Kernels)
				}
			}
			s.Kernels = append(s.Kernels, &Kernel{Nodes: []*ir.Node{n}, Def: d, Precomputed: precomputed})
		}
	}
	return s
}

// outputValue is the graph value a Def of n's instance computes, or nil
// for a local.
func outputValue(n *ir.Node, d *ir.Def) *ir.Value {
	for i, o := range n.Inst.Outputs {
		if o == d {
			return n.Outputs[i]
		}
	}
	return nil
}

// Out is the value a kernel leaves, or nil for a materialised local.
func (k *Kernel) Out() *ir.Value {
	if len(k.Nodes) > 1 {
		return k.Nodes[len(k.Nodes)-1].Outputs[0]
	}
	return outputValue(k.Nodes[0], k.Def)
}

// IsViewNode reports whether n is a view.
func (s *Schedule) IsViewNode(n *ir.Node) bool {
	for _, v := range s.Views {
		if v == n {
			return true
		}
	}
	return false
}

// Producer is the node computing v, or nil for inputs, parameters and
// constants.
func (s *Schedule) Producer(v *ir.Value) *ir.Node { return s.producer[v] }

// Internal reports whether v never leaves kernel k: it is computed in k
// and read only by a node fused into k.
func (s *Schedule) Internal(v *ir.Value, k int) bool {
	if j, ok := s.KernelOfValue[v]; !ok || j != k || s.Uses[v] != 1 {
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

// fusionTarget is the kernel an element-wise node joins, or -1: the one
// computing a floating input of the node's shape that has no other
// consumer, provided that input is the last value the kernel computes and
// the node's other inputs are ready before the kernel runs (fused groups
// stay convex). The node's locals, if any, must be computed from the
// weights alone (a batch norm's per-channel scale).
func (s *Schedule) fusionTarget(n *ir.Node, onWeights map[*ir.Def]bool) int {
	for _, d := range n.Inst.Locals {
		if !onWeights[d] {
			return -1
		}
	}
	for i, v := range n.Inputs {
		k, ok := s.KernelOfValue[v]
		// the walks of the lambda (fusibleOn) last: most inputs fail sooner
		if ok && s.Uses[v] == 1 && v.DType.IsFloat() && !s.Kernels[k].Precomputed && s.Kernels[k].Out() == v &&
			lang.ShapeEqual(v.Shape, n.Outputs[0].Shape) && s.readyAt(without(n.Inputs, i)...) < k && fusibleOn(n.Inst, i) {
			return k
		}
	}
	return -1
}

// weightLocals are the locals of n's instance computed from parameters
// and constants alone (through other such locals): with the weights, once,
// rather than per run.
func weightLocals(n *ir.Node, weight map[*ir.Value]bool) map[*ir.Def]bool {
	if len(n.Inst.Locals) == 0 {
		return nil // most nodes: no map to allocate
	}
	out := map[*ir.Def]bool{}
	for _, d := range n.Inst.Locals {
		ok := true
		ir.Walk(d.Body, func(e ir.Expr) bool {
			a, isAccess := e.(*ir.Access)
			if !isAccess {
				return ok
			}
			if l := Local(n.Inst, a.T); l != nil {
				ok = ok && out[l]
			}
			for i, in := range n.Inst.Inputs {
				if in == a.T {
					v := n.Inputs[i]
					ok = ok && (weight[v] || v.Const != nil)
				}
			}
			return ok
		})
		if ok {
			out[d] = true
		}
	}
	return out
}

// smaller reports whether local d has fewer elements than n's first
// output (both of known extents).
func smaller(d *ir.Def, n *ir.Node) bool {
	count := func(shape []lang.Dim) (int64, bool) {
		size := int64(1)
		for _, x := range shape {
			c, ok := x.IsConst()
			if !ok {
				return 0, false
			}
			size *= c
		}
		return size, true
	}
	local, ok1 := count(d.Tensor.Shape)
	out, ok2 := count(n.Outputs[0].Shape)
	return ok1 && ok2 && local < out
}

// readyAt is the last kernel that vs wait for (-1: none).
func (s *Schedule) readyAt(vs ...*ir.Value) int {
	last := -1
	for _, v := range vs {
		if k, ok := s.ready[v]; ok {
			last = max(last, k)
		}
	}
	return last
}

func without(vs []*ir.Value, i int) []*ir.Value {
	return append(append([]*ir.Value(nil), vs[:i]...), vs[i+1:]...)
}

// readThrough reports whether an injective producer's value v can be
// read by its consumers through the index instead of from a buffer:
// it is no graph output (each use of one counts twice in uses) and no
// consumer is a view (which needs v in memory). Several consumers each
// read through it: a pure reindexing recomputes nothing (a slice of a
// fused projection read by the next two slices).
func readThrough(v *ir.Value, consumers []*ir.Node, uses map[*ir.Value]int) bool {
	if len(consumers) == 0 || uses[v] != len(consumers) {
		return false
	}
	for _, c := range consumers {
		if IsView(c.Inst) {
			return false
		}
	}
	return true
}
