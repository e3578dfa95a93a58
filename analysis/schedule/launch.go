package schedule

import "tofuc/lang/ir"

// maxInline bounds the size of a local recomputed where it is read: its
// expression nodes, each read of another recomputed local counting that
// local's size.
const maxInline = 256

// Launches lists the Defs of inst that run as kernels, in order: the
// locals that are materialised, then the outputs. A local is recomputed
// where it is read instead (Inlined) when its lambda has no reduction and
// no opaque call, and its size with the recomputed locals it reads is at
// most maxInline: its elements are then cheap and independent, and
// storing them would cost more memory traffic than computing them again.
// One that calls a costly function (exp, tanh, ...), itself or through
// the locals it recomputes, and that a sum reads at an index leaving out
// one of the reader's variables, is launched all the same: recomputed,
// each of its elements would run the costly calls once for every value
// of that variable (the attention weights' gradients, summed over the
// keys at every channel of a query, took 0.3 s a launch; launched, the
// sum is a GEMM of the stored local).
// A row local (Rows) is not launched either: the output's kernel computes
// it once per row.
func Launches(inst *ir.Instance) []*ir.Def {
	var out []*ir.Def
	for _, d := range inst.Locals {
		if !Inlined(inst, d) {
			out = append(out, d)
		}
	}
	return append(out, inst.Outputs...)
}

// Inlined reports whether local d of inst is recomputed where it is read
// (see Launches), or computed once per row of the output by the output's
// kernel (a row local, see Rows); outputs never are.
func Inlined(inst *ir.Instance, d *ir.Def) bool {
	return recomputable(inst, d) || IsRowLocal(inst, d)
}

// inlineSize is the size of local d recomputed, or false when d is not a
// local or holds a reduction or an opaque call; memo holds the sizes of
// the locals seen (-1 for those that cannot be recomputed). Reads of
// locals that are materialised count as plain reads.
func inlineSize(inst *ir.Instance, d *ir.Def, memo map[*ir.Def]int) (int, bool) {
	if n, ok := memo[d]; ok {
		return n, n >= 0
	}
	memo[d] = -1
	if Local(inst, d.Tensor) == nil {
		return 0, false
	}
	size, ok := 0, true
	ir.Walk(d.Body, func(e ir.Expr) bool {
		switch e := e.(type) {
		case *ir.Reduce, *ir.Opaque:
			ok = false
		case *ir.Access:
			if l := Local(inst, e.T); l != nil {
				if n, inl := inlineSize(inst, l, memo); inl && n <= maxInline {
					size += n // recomputed here; a materialised local is a plain read
				}
			}
		}
		size++
		return ok
	})
	if !ok {
		return 0, false
	}
	memo[d] = size
	return size, true
}

// Local is the local of inst defining t, or nil.
func Local(inst *ir.Instance, t *ir.Tensor) *ir.Def {
	for _, d := range inst.Locals {
		if d.Tensor == t {
			return d
		}
	}
	return nil
}

// Operand is a buffer a kernel reads or writes: a graph value, or a
// materialised local of the kernel's root instance.
type Operand struct {
	Value *ir.Value // nil for a local
	Local *ir.Def
}

// Reads lists the buffers kernel k reads, each once, in the order of
// their first read: what its Def's lambda reads (through the recomputed
// locals it reads), then the inputs of each fused node other than the
// value it fuses; a value computed in a prologue stands for what its
// producer reads. Graph constants are operands too; a code generator may
// fold them in.
func (s *Schedule) Reads(k int) []Operand {
	kern := s.Kernels[k]
	var out []Operand
	seen := map[Operand]bool{}
	add := func(o Operand) {
		if !seen[o] {
			seen[o] = true
			out = append(out, o)
		}
	}
	root := kern.Root()
	visited := map[*ir.Def]bool{}
	var walk func(d *ir.Def)
	walk = func(d *ir.Def) {
		visited[d] = true
		ir.Walk(d.Body, func(e ir.Expr) bool {
			if a, ok := e.(*ir.Access); ok {
				s.readTensor(root, a.T, add, visited, walk)
			}
			if o, ok := e.(*ir.Opaque); ok {
				for _, v := range o.Args {
					s.readTensor(root, v.T, add, visited, walk)
				}
			}
			return true
		})
	}
	walk(kern.Def)
	for _, n := range kern.Nodes[1:] {
		for _, v := range n.Inputs {
			if !s.Internal(v, k) {
				s.readValue(v, add)
			}
		}
	}
	return out
}

// readValue adds the operand of value v, or for a value computed in a
// prologue the operands its producer reads.
func (s *Schedule) readValue(v *ir.Value, add func(Operand)) {
	p := s.prologue[v]
	if p == nil {
		add(Operand{Value: v})
		return
	}
	for _, in := range p.Inputs {
		s.readValue(in, add)
	}
}

// readTensor adds the operand behind tensor t of n's instance, or walks
// the local that is recomputed.
func (s *Schedule) readTensor(n *ir.Node, t *ir.Tensor, add func(Operand), visited map[*ir.Def]bool, walk func(*ir.Def)) {
	for i, in := range n.Inst.Inputs {
		if in == t {
			s.readValue(n.Inputs[i], add)
			return
		}
	}
	l := Local(n.Inst, t)
	switch {
	case l == nil:
	case !s.Recomputed(n, l):
		add(Operand{Local: l})
	case !visited[l]:
		walk(l)
	}
}

// Write is the buffer kernel k writes.
func (s *Schedule) Write(k int) Operand {
	kern := s.Kernels[k]
	if v := kern.Out(); v != nil {
		return Operand{Value: v}
	}
	return Operand{Local: kern.Def}
}
