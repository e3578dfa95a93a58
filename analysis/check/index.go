package check

import (
	"tofuc/lang"
	"tofuc/lang/ir"
)

// Builders of integer index expressions, folding constants so that the IR
// of an instance stays as small as what a person would write.

func idxVal(e ir.Expr) cval { return cval{kind: cIndex, exprs: []ir.Expr{e}} }

func idxConst(n int64) ir.Expr { return &ir.Const{T: lang.I64, Int: n} }

// idxDim is a dimension used as an index value.
func idxDim(d lang.Dim) ir.Expr {
	if n, ok := d.IsConst(); ok {
		return idxConst(n)
	}
	return &ir.Size{D: d}
}

func constOf(e ir.Expr) (int64, bool) {
	if c, ok := e.(*ir.Const); ok && !c.T.IsFloat() {
		return c.Int, true
	}
	return 0, false
}

func idxBin(op ir.BinOp, a, b ir.Expr) ir.Expr {
	return &ir.Binary{Op: op, L: a, R: b, T: lang.I64}
}

func idxAdd(a, b ir.Expr) ir.Expr {
	x, xok := constOf(a)
	y, yok := constOf(b)
	switch {
	case xok && yok:
		return idxConst(x + y)
	case xok && x == 0:
		return b
	case yok && y == 0:
		return a
	case yok && y < 0:
		return idxBin(ir.OpSub, a, idxConst(-y))
	}
	return idxBin(ir.OpAdd, a, b)
}

func idxMul(a ir.Expr, k int64) ir.Expr {
	if x, ok := constOf(a); ok {
		return idxConst(x * k)
	}
	switch k {
	case 0:
		return idxConst(0)
	case 1:
		return a
	}
	return idxBin(ir.OpMul, a, idxConst(k))
}

func idxMulDim(a ir.Expr, d lang.Dim) ir.Expr {
	if n, ok := d.IsConst(); ok {
		return idxMul(a, n)
	}
	if x, ok := constOf(a); ok && x == 0 {
		return a
	}
	return idxBin(ir.OpMul, a, idxDim(d))
}

func idxDivDim(a ir.Expr, d lang.Dim) ir.Expr {
	if n, ok := d.IsConst(); ok && n == 1 {
		return a
	}
	return idxBin(ir.OpDiv, a, idxDim(d))
}

func idxModDim(a ir.Expr, d lang.Dim) ir.Expr {
	if n, ok := d.IsConst(); ok && n == 1 {
		return idxConst(0)
	}
	return idxBin(ir.OpMod, a, idxDim(d))
}
