package strategy

import (
	"tofuc/lang"
	"tofuc/lang/ir"
)

// flops counts an instance's arithmetic: one per operation (arithmetic,
// comparison, math function, select) and one per combination in a
// reduction, times the iteration space; index arithmetic is not counted.
func flops(inst *ir.Instance) lang.Dim {
	defs := append(append([]*ir.Def(nil), inst.Locals...), inst.Outputs...)
	return countFLOPs(defs, func(v *ir.Var) lang.Dim { return v.Extent })
}

// workerFLOPs is a worker's work under s, symbolic in the part symbols:
// the split variables range over the part, each local it needs over the
// bands of its region (not their hull: lstm_cell split along j computes
// four bands of its gates, 1/k of the work), the rest over their extents.
func (a *Analysis) workerFLOPs(s *Strategy) lang.Dim {
	ext := map[*ir.Var]lang.Dim{}
	for v, part := range s.splits {
		ext[v] = part.Size()
	}
	var defs []*ir.Def
	for _, d := range a.Inst.Locals {
		r, ok := s.locals[d.Tensor]
		if !ok {
			continue // not needed by this worker
		}
		for j, v := range d.Vars {
			ext[v] = r.Bands[j].Size().Max(lang.Const(0))
		}
		defs = append(defs, d)
	}
	defs = append(defs, a.Inst.Outputs...)
	return countFLOPs(defs, func(v *ir.Var) lang.Dim {
		if n, ok := ext[v]; ok {
			return n
		}
		return v.Extent
	})
}

// countFLOPs is the work of the defs with each variable ranging over
// extent(v).
func countFLOPs(defs []*ir.Def, extent func(*ir.Var) lang.Dim) lang.Dim {
	total := lang.Const(0)
	for _, d := range defs {
		n := lang.Const(1)
		for _, v := range d.Vars {
			n = n.Mul(extent(v))
		}
		total = total.Add(n.Mul(cost(d.Body, extent)))
	}
	return total
}

// cost is the work of one evaluation of e.
func cost(e ir.Expr, extent func(*ir.Var) lang.Dim) lang.Dim {
	switch x := e.(type) {
	case *ir.Access:
		if x.Default != nil {
			return cost(x.Default, extent) // index arithmetic is free
		}
		return lang.Const(0)
	case *ir.Opaque:
		return lang.Const(0) // unknown; not counted
	case *ir.Reduce:
		n := lang.Const(1)
		for _, v := range x.Vars {
			n = n.Mul(extent(v))
		}
		return n.Mul(cost(x.Body, extent).Add(lang.Const(1)))
	case *ir.Const, *ir.Size, *ir.VarRef:
		return lang.Const(0)
	}
	c := lang.Const(1)
	if _, ok := e.(*ir.Cast); ok {
		c = lang.Const(0)
	}
	for _, ch := range ir.Children(e) {
		c = c.Add(cost(ch, extent))
	}
	return c
}

// elementwise reports whether the operator reads every input at the
// output's own index (right-aligned, over the same extents, with 0 for
// broadcast dimensions of extent 1; an else default is a constant), with no reduction, local or data-dependent read, and reads at
// least one input: its inputs and output can always be partitioned alike.
func elementwise(inst *ir.Instance) bool {
	if len(inst.Outputs) != 1 || len(inst.Locals) != 0 {
		return false
	}
	out := inst.Outputs[0]
	ok, reads := true, false
	ir.Walk(out.Body, func(e ir.Expr) bool {
		switch x := e.(type) {
		case *ir.Reduce, *ir.Opaque:
			ok = false
		case *ir.Access:
			_, constDefault := x.Default.(*ir.Const)
			ok = ok && alignedIndex(x, out.Vars) && (x.Default == nil || constDefault)
			reads = true
			return false
		}
		return ok
	})
	return ok && reads // a generator with no input is not element-wise
}

func alignedIndex(a *ir.Access, vars []*ir.Var) bool {
	off := len(vars) - len(a.Index)
	if off < 0 {
		return false
	}
	for d, idx := range a.Index {
		if r, ok := idx.(*ir.VarRef); ok && r.V == vars[off+d] && a.T.Shape[d].Equal(r.V.Extent) {
			continue
		}
		if k, ok := ir.ConstInt(idx); ok && k == 0 {
			if n, c := a.T.Shape[d].IsConst(); c && n == 1 {
				continue
			}
		}
		return false
	}
	return true
}

// linear reports whether every output of inst is a linear function of its
// inputs taken together: sums, differences, negations and reductions by
// sum of reads, multiplied or (for floats) divided by values that read no
// tensor, through float conversions and selections on conditions that
// read no tensor; locals count as reads when they are linear themselves.
// Partial sums of the inputs then give partial sums of the outputs
// (a gradient sum of partial gradients, a transpose of one).
func linear(inst *ir.Instance) bool {
	lin := map[*ir.Tensor]bool{}
	for _, t := range inst.Inputs {
		lin[t] = true
	}
	for _, d := range inst.Locals {
		lin[d.Tensor] = degree(d.Body, lin) == 1
	}
	for _, d := range inst.Outputs {
		if degree(d.Body, lin) != 1 {
			return false
		}
	}
	return true
}

// degree is 0 for an expression that reads no tensor, 1 for a linear one
// in the tensors of lin, and -1 otherwise.
func degree(e ir.Expr, lin map[*ir.Tensor]bool) int {
	switch x := e.(type) {
	case *ir.Const, *ir.Size, *ir.VarRef:
		return 0
	case *ir.Access:
		if !lin[x.T] || x.Default != nil && !isZeroConst(x.Default) {
			return -1
		}
		for _, idx := range x.Index {
			if degree(idx, lin) != 0 {
				return -1 // data-dependent index
			}
		}
		return 1
	case *ir.Unary:
		if x.Op != "-" {
			return constOnly(degree(x.X, lin))
		}
		return degree(x.X, lin)
	case *ir.Cast:
		if d := degree(x.X, lin); d == 0 || x.T.IsFloat() && x.X.Type().IsFloat() {
			return d
		}
		return -1
	case *ir.Binary:
		l, r := degree(x.L, lin), degree(x.R, lin)
		switch {
		case l < 0 || r < 0:
			return -1
		case x.Op == ir.OpAdd || x.Op == ir.OpSub:
			if l != r && l+r == 1 {
				return -1 // a constant term
			}
			return l
		case x.Op == ir.OpMul && l+r <= 1, x.Op == ir.OpDiv && r == 0 && x.T.IsFloat():
			return l + r
		}
		return constOnly(l + r)
	case *ir.Select:
		if degree(x.C, lin) != 0 {
			return -1
		}
		a, b := degree(x.A, lin), degree(x.B, lin)
		switch {
		case a == b:
			return a
		case a == 1 && isZeroConst(x.B), b == 1 && isZeroConst(x.A):
			return 1
		}
		return -1
	case *ir.Reduce:
		d := degree(x.Body, lin)
		if d == 1 && x.Kind != ir.Sum {
			return -1
		}
		return d
	}
	for _, c := range ir.Children(e) {
		if degree(c, lin) != 0 {
			return -1
		}
	}
	return 0
}

// constOnly keeps degree 0 (an operation on values that read no tensor)
// and makes anything else non-linear.
func constOnly(d int) int {
	if d == 0 {
		return 0
	}
	return -1
}

func isZeroConst(e ir.Expr) bool {
	c, ok := e.(*ir.Const)
	return ok && c.Float == 0 && c.Int == 0
}
