package ir

import "tofuc/lang"

// Builders of integer index expressions that fold constants, so that
// generated index arithmetic stays as small as what a person would write.

// IndexConst is the index constant n.
func IndexConst(n int64) Expr { return &Const{T: lang.I64, Int: n} }

// IndexDim is a dimension used as an index value.
func IndexDim(d lang.Dim) Expr {
	if n, ok := d.IsConst(); ok {
		return IndexConst(n)
	}
	return &Size{D: d}
}

// ConstInt returns the value of an integer constant.
func ConstInt(e Expr) (int64, bool) {
	if c, ok := e.(*Const); ok && !c.T.IsFloat() {
		return c.Int, true
	}
	return 0, false
}

// IndexBin applies op to two index expressions.
func IndexBin(op BinOp, a, b Expr) Expr {
	return &Binary{Op: op, L: a, R: b, T: lang.I64}
}

// IndexAdd is a + b.
func IndexAdd(a, b Expr) Expr {
	x, xok := ConstInt(a)
	y, yok := ConstInt(b)
	switch {
	case xok && yok:
		return IndexConst(x + y)
	case xok && x == 0:
		return b
	case yok && y == 0:
		return a
	case yok && y < 0:
		return IndexBin(OpSub, a, IndexConst(-y))
	}
	return IndexBin(OpAdd, a, b)
}

// IndexMul is a * k.
func IndexMul(a Expr, k int64) Expr {
	if x, ok := ConstInt(a); ok {
		return IndexConst(x * k)
	}
	switch k {
	case 0:
		return IndexConst(0)
	case 1:
		return a
	}
	return IndexBin(OpMul, a, IndexConst(k))
}

// IndexMulDim is a * d.
func IndexMulDim(a Expr, d lang.Dim) Expr {
	if n, ok := d.IsConst(); ok {
		return IndexMul(a, n)
	}
	if x, ok := ConstInt(a); ok && x == 0 {
		return a
	}
	return IndexBin(OpMul, a, IndexDim(d))
}

// IndexDivDim is a / d.
func IndexDivDim(a Expr, d lang.Dim) Expr {
	if n, ok := d.IsConst(); ok && n == 1 {
		return a
	}
	return IndexBin(OpDiv, a, IndexDim(d))
}

// IndexModDim is a % d.
func IndexModDim(a Expr, d lang.Dim) Expr {
	if n, ok := d.IsConst(); ok && n == 1 {
		return IndexConst(0)
	}
	return IndexBin(OpMod, a, IndexDim(d))
}

// CommonSuffix is the longest list of variables that ends both a and b.
func CommonSuffix(a, b []*Var) []*Var {
	n := 0
	for n < len(a) && n < len(b) && a[len(a)-1-n] == b[len(b)-1-n] {
		n++
	}
	return a[len(a)-n:]
}

// Extent is the number of index tuples of vars (1 for none), their
// extents concrete.
func Extent(vars []*Var) int64 {
	n := int64(1)
	for _, v := range vars {
		c, _ := v.Extent.IsConst()
		n *= c
	}
	return n
}
