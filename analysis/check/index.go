package check

import "tofuc/lang/ir"

func idxVal(e ir.Expr) cval { return cval{kind: cIndex, exprs: []ir.Expr{e}} }
