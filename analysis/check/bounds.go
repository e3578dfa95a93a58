package check

import (
	"tofuc/analysis/interval"
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

// checkIndex reports an affine index whose range provably leaves [0,
// extent): its bounds are attained, so some index value reads outside.
// Other indices (division, remainder, select, max) are checked at run time.
func (c *instCtx) checkIndex(a *ir.Access, dim int, x ir.Expr) {
	if !interval.Affine(x) {
		return
	}
	iv, err := interval.Of(x, nil)
	if err != nil {
		return
	}
	extent := a.T.Shape[dim]
	if iv.Lo.Neg().Sub(lang.Const(1)).NonNegative() {
		c.errs.Add(a.Pos, "index %d of %s can be %s, below 0; add `else VALUE` for out-of-range reads", dim, a.T.Name, iv.Lo)
		return
	}
	if iv.Hi.Sub(extent).NonNegative() {
		c.errs.Add(a.Pos, "index %d of %s can reach %s, beyond its extent %s; add `else VALUE` for out-of-range reads", dim, a.T.Name, iv.Hi, extent)
	}
}
