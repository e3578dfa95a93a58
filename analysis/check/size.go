package check

import (
	"fmt"

	"tofuc/lang"
	"tofuc/lang/ir"
)

// shapeProblem says why no pass can work with a tensor of this dtype and
// shape: a dimension whose arithmetic left int64 (lang.Overflow), or a
// concrete shape whose size in bytes does. It is "" for a usable shape.
func shapeProblem(dt lang.DType, shape []lang.Dim) string {
	for i, d := range shape {
		if d.Overflows() {
			return fmt.Sprintf("dimension %d overflows 64-bit integers", i)
		}
	}
	if _, ok := lang.ConstShape(shape); !ok {
		return "" // symbolic: sized when it is bound
	}
	if _, ok := lang.ShapeBytes(dt, shape); !ok {
		return fmt.Sprintf("%s%s would take more than 2^63 bytes", dt, lang.ShapeString(shape))
	}
	return ""
}

// checkSizes rejects an instance whose locals, outputs or index ranges
// cannot be sized (see shapeProblem), at the call site.
func (c *instCtx) checkSizes(site lang.Pos) {
	pos := site
	if !pos.IsValid() {
		pos = c.decl.Pos
	}
	for _, d := range append(append([]*ir.Def(nil), c.inst.Locals...), c.inst.Outputs...) {
		if p := shapeProblem(d.Tensor.DType, d.Tensor.Shape); p != "" {
			c.errs.Add(pos, "%s: tensor %s: %s", c.decl.Name, d.Tensor.Name, p)
			continue
		}
		ir.Walk(d.Body, func(e ir.Expr) bool {
			if r, ok := e.(*ir.Reduce); ok {
				for _, v := range r.Vars {
					if v.Extent.Overflows() {
						c.errs.Add(pos, "%s: the range of %s in %s overflows 64-bit integers", c.decl.Name, v.Name, d.Tensor.Name)
					}
				}
			}
			return true
		})
	}
}
