package strategy

import (
	"tofuc/lang"
	"tofuc/lang/ir"
)

// flops counts an instance's arithmetic: one per operation (arithmetic,
// comparison, math function, select) and one per combination in a
// reduction, times the iteration space; index arithmetic is not counted.
func flops(inst *ir.Instance) lang.Dim {
	total := lang.Const(0)
	for _, d := range append(append([]*ir.Def(nil), inst.Locals...), inst.Outputs...) {
		n := lang.Const(1)
		for _, v := range d.Vars {
			n = n.Mul(v.Extent)
		}
		total = total.Add(n.Mul(cost(d.Body)))
	}
	return total
}

// cost is the work of one evaluation of e.
func cost(e ir.Expr) lang.Dim {
	switch x := e.(type) {
	case *ir.Access:
		if x.Default != nil {
			return cost(x.Default) // index arithmetic is free
		}
		return lang.Const(0)
	case *ir.Opaque:
		return lang.Const(0) // unknown; not counted
	case *ir.Reduce:
		n := lang.Const(1)
		for _, v := range x.Vars {
			n = n.Mul(v.Extent)
		}
		return n.Mul(cost(x.Body).Add(lang.Const(1)))
	case *ir.Const, *ir.Size, *ir.VarRef:
		return lang.Const(0)
	}
	c := lang.Const(1)
	if _, ok := e.(*ir.Cast); ok {
		c = lang.Const(0)
	}
	for _, ch := range ir.Children(e) {
		c = c.Add(cost(ch))
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
