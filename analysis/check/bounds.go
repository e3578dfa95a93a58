package check

import (
	"tofuc/lang"
	"tofuc/lang/ir"
)

// checkBounds reports accesses that provably fall outside their tensor for
// some index value, unless an else default or a select guards them.
func (c *instCtx) checkBounds() {
	defs := append(append([]*ir.Def(nil), c.inst.Locals...), c.inst.Outputs...)
	for _, d := range defs {
		ir.Walk(d.Body, func(e ir.Expr) bool {
			a, ok := e.(*ir.Access)
			if !ok || a.Default != nil || c.guarded[a] {
				return true
			}
			for i, x := range a.Index {
				c.checkIndex(a, i, x)
			}
			return true
		})
	}
}

func (c *instCtx) checkIndex(a *ir.Access, dim int, x ir.Expr) {
	lo, hi, ok := indexRange(x)
	if !ok {
		return
	}
	extent := a.T.Shape[dim]
	if n, ok := lo.IsConst(); ok && n < 0 {
		c.errs.Add(a.Pos, "index %d of %s can be %s, below 0; add `else VALUE` for out-of-range reads", dim, a.T.Name, lo)
		return
	}
	if over, ok := hi.Sub(extent).IsConst(); ok && over >= 0 {
		c.errs.Add(a.Pos, "index %d of %s can reach %s, beyond its extent %s; add `else VALUE` for out-of-range reads", dim, a.T.Name, hi, extent)
	}
}

// indexRange bounds an integer index expression over the extents of its
// variables: [lo, hi], both inclusive. ok is false when it cannot.
func indexRange(x ir.Expr) (lo, hi lang.Dim, ok bool) {
	switch x := x.(type) {
	case *ir.Const:
		if x.T.IsFloat() {
			return lo, hi, false
		}
		return lang.Const(x.Int), lang.Const(x.Int), true
	case *ir.Size:
		return x.D, x.D, true
	case *ir.VarRef:
		return lang.Const(0), x.V.Extent.Sub(lang.Const(1)), true
	case *ir.Unary:
		if x.Op != "-" {
			return lo, hi, false
		}
		l, h, ok := indexRange(x.X)
		return h.Neg(), l.Neg(), ok
	case *ir.Binary:
		return binaryRange(x)
	}
	return lo, hi, false
}

func binaryRange(x *ir.Binary) (lo, hi lang.Dim, ok bool) {
	ll, lh, lok := indexRange(x.L)
	rl, rh, rok := indexRange(x.R)
	if !lok || !rok {
		return lo, hi, false
	}
	switch x.Op {
	case ir.OpAdd:
		return ll.Add(rl), lh.Add(rh), true
	case ir.OpSub:
		return ll.Sub(rh), lh.Sub(rl), true
	case ir.OpMul:
		k, kok := rl.IsConst()
		if !kok || !rl.Equal(rh) {
			return lo, hi, false
		}
		if k < 0 {
			return lh.Scale(k), ll.Scale(k), true
		}
		return ll.Scale(k), lh.Scale(k), true
	case ir.OpDiv:
		k, kok := rl.IsConst()
		if n, nok := ll.IsConst(); !kok || !rl.Equal(rh) || k <= 0 || !nok || n < 0 {
			return lo, hi, false
		}
		return ll.FloorDiv(k), lh.FloorDiv(k), true
	case ir.OpMod:
		k, kok := rl.IsConst()
		if n, nok := ll.IsConst(); !kok || !rl.Equal(rh) || k <= 0 || !nok || n < 0 {
			return lo, hi, false
		}
		return lang.Const(0), lang.Const(k - 1), true
	}
	return lo, hi, false
}
