package smt

import (
	"math/big"

	"tofuc/lang"
	"tofuc/lang/ir"
)

// index lowers integer index arithmetic to a lin.
func (l *lowerer) index(fr *frame, e ir.Expr) (lin, error) {
	switch e := e.(type) {
	case *ir.Const:
		return linConst(e.Int), nil
	case *ir.Size:
		return dimLin(e.D), nil
	case *ir.VarRef:
		if v, ok := fr.env[e.V]; ok {
			return v, nil
		}
		return lin{}, &unsupported{"unbound index variable " + e.V.Name}
	case *ir.Cast:
		if !e.T.IsFloat() && !e.X.Type().IsFloat() {
			return l.index(fr, e.X)
		}
	case *ir.Unary:
		if e.Op == "-" {
			x, err := l.index(fr, e.X)
			return x.scale(-1), err
		}
	case *ir.Binary:
		return l.indexBinary(fr, e)
	}
	return lin{}, &unsupported{"index expression " + ir.ExprString(e)}
}

func (l *lowerer) indexBinary(fr *frame, e *ir.Binary) (lin, error) {
	a, err := l.index(fr, e.L)
	if err != nil {
		return lin{}, err
	}
	b, err := l.index(fr, e.R)
	if err != nil {
		return lin{}, err
	}
	switch e.Op {
	case ir.OpAdd:
		return a.add(b), nil
	case ir.OpSub:
		return a.sub(b), nil
	case ir.OpMul:
		return a.mul(b), nil
	case ir.OpDiv, ir.OpMod:
		c, ok := b.isConst()
		if !ok {
			return a.divLin(b, e.Op == ir.OpMod), nil
		}
		if c <= 0 {
			break
		}
		if e.Op == ir.OpDiv {
			return a.divOp(iTruncDiv, c), nil
		}
		return a.mod(c), nil
	}
	return lin{}, &unsupported{"index expression " + ir.ExprString(e)}
}

// cond lowers a boolean condition on indices.
func (l *lowerer) cond(fr *frame, e ir.Expr) (*cond, condConst, error) {
	switch e := e.(type) {
	case *ir.Const:
		return nil, condConst{true, e.Int != 0}, nil
	case *ir.Unary:
		if e.Op == "!" {
			c, k, err := l.cond(fr, e.X)
			if err != nil || k.known {
				return nil, condConst{k.known, !k.val}, err
			}
			c, k = c.not()
			return c, k, nil
		}
	case *ir.Binary:
		return l.condBinary(fr, e)
	}
	return nil, condConst{}, &unsupported{"condition " + ir.ExprString(e)}
}

func (l *lowerer) condBinary(fr *frame, e *ir.Binary) (*cond, condConst, error) {
	if e.Op == ir.OpAnd || e.Op == ir.OpOr {
		a, ak, err := l.cond(fr, e.L)
		if err != nil {
			return nil, ak, err
		}
		b, bk, err := l.cond(fr, e.R)
		if err != nil {
			return nil, bk, err
		}
		op := map[ir.BinOp]condOp{ir.OpAnd: cAnd, ir.OpOr: cOr}[e.Op]
		c, k := mkJunction(op, []*cond{a, b}, []condConst{ak, bk})
		return c, k, nil
	}
	a, err := l.index(fr, e.L)
	if err != nil {
		return nil, condConst{}, err
	}
	b, err := l.index(fr, e.R)
	if err != nil {
		return nil, condConst{}, err
	}
	var c *cond
	var k condConst
	switch e.Op {
	case ir.OpLt:
		c, k = mkGE(b.sub(a).add(linConst(-1)))
	case ir.OpLe:
		c, k = mkGE(b.sub(a))
	case ir.OpGt:
		c, k = mkGE(a.sub(b).add(linConst(-1)))
	case ir.OpGe:
		c, k = mkGE(a.sub(b))
	case ir.OpEq:
		c, k = mkEQ(a.sub(b))
	case ir.OpNe:
		if c, k = mkEQ(a.sub(b)); !k.known {
			c, k = c.not()
		} else {
			k.val = !k.val
		}
	default:
		return nil, k, &unsupported{"condition " + ir.ExprString(e)}
	}
	return c, k, nil
}

// expr lowers a value expression.
func (l *lowerer) expr(e ir.Expr, fr *frame) (poly, error) {
	if indexPure(e) {
		return l.pureValue(fr, e)
	}
	switch e := e.(type) {
	case *ir.Const:
		return floatPoly(e.Float)
	case *ir.Access:
		return l.access(fr, e)
	case *ir.Unary:
		x, err := l.expr(e.X, fr)
		if e.Op == "-" {
			return x.scale(ratInt(-1)), err
		}
		return constPoly(ratInt(1)).sub(truth(x)), err
	case *ir.Binary:
		return l.binary(fr, e)
	case *ir.Call:
		return l.call(fr, e)
	case *ir.Select:
		return l.selectExpr(fr, e)
	case *ir.Cast:
		return l.cast(fr, e)
	case *ir.Reduce:
		return l.reduce(fr, e)
	}
	return nil, &unsupported{"expression " + ir.ExprString(e)}
}

// pureValue is index arithmetic used as a value: a constant, a guard or a
// number atom.
func (l *lowerer) pureValue(fr *frame, e ir.Expr) (poly, error) {
	if e.Type() == lang.Bool {
		c, k, err := l.cond(fr, e)
		if err != nil {
			return nil, err
		}
		if k.known {
			if k.val {
				return constPoly(ratInt(1)), nil
			}
			return nil, nil
		}
		return guardPoly(guard{}).withGuard(c, k), nil
	}
	if s, ok := e.(*ir.Select); ok {
		return l.selectExpr(fr, s)
	}
	x, err := l.index(fr, e)
	if err != nil {
		return nil, err
	}
	if k, ok := x.isConst(); ok {
		return constPoly(ratInt(k)), nil
	}
	return atomPoly(newNum(x)), nil
}

// truth is a value read as a boolean, 0 or 1.
func truth(p poly) poly {
	return constPoly(ratInt(1)).sub(fnPoly("zero", p))
}

func (l *lowerer) binary(fr *frame, e *ir.Binary) (poly, error) {
	a, err := l.expr(e.L, fr)
	if err != nil {
		return nil, err
	}
	b, err := l.expr(e.R, fr)
	if err != nil {
		return nil, err
	}
	switch e.Op {
	case ir.OpAdd:
		return a.add(b), nil
	case ir.OpSub:
		return a.sub(b), nil
	case ir.OpMul:
		return a.mul(b), nil
	case ir.OpDiv:
		if !e.T.IsFloat() {
			return nil, &unsupported{"integer division of values"}
		}
		if c, ok := constOf(b); ok && c.Sign() != 0 {
			return a.scale(new(big.Rat).Inv(c)), nil
		}
		return a.mul(fnPoly("recip", b)), nil
	case ir.OpLt:
		return fnPoly("pos", b.sub(a)), nil
	case ir.OpLe:
		return fnPoly("nneg", b.sub(a)), nil
	case ir.OpGt:
		return fnPoly("pos", a.sub(b)), nil
	case ir.OpGe:
		return fnPoly("nneg", a.sub(b)), nil
	case ir.OpEq:
		return fnPoly("zero", a.sub(b)), nil
	case ir.OpNe:
		return constPoly(ratInt(1)).sub(fnPoly("zero", a.sub(b))), nil
	case ir.OpAnd:
		return truth(a).mul(truth(b)), nil
	case ir.OpOr:
		ta, tb := truth(a), truth(b)
		return ta.add(tb).sub(ta.mul(tb)), nil
	}
	return nil, &unsupported{"operator " + e.Op.String() + " on values"}
}

// constOf reports whether p is a constant.
func constOf(p poly) (*big.Rat, bool) {
	switch {
	case len(p) == 0:
		return new(big.Rat), true
	case len(p) == 1 && len(p[0].atoms) == 0 && len(p[0].bound) == 0 && len(p[0].guard) == 0:
		return p[0].coef, true
	}
	return nil, false
}

func (l *lowerer) call(fr *frame, e *ir.Call) (poly, error) {
	args := make([]poly, len(e.Args))
	for i, a := range e.Args {
		p, err := l.expr(a, fr)
		if err != nil {
			return nil, err
		}
		args[i] = p
	}
	return fnPoly(e.Fn, args...), nil
}

func (l *lowerer) selectExpr(fr *frame, e *ir.Select) (poly, error) {
	a, err := l.expr(e.A, fr)
	if err != nil {
		return nil, err
	}
	b, err := l.expr(e.B, fr)
	if err != nil {
		return nil, err
	}
	if indexPure(e.C) {
		c, k, err := l.cond(fr, e.C)
		if err != nil {
			return nil, err
		}
		if k.known {
			if k.val {
				return a, nil
			}
			return b, nil
		}
		nc, nk := c.not()
		return a.withGuard(c, k).add(b.withGuard(nc, nk)), nil
	}
	c, err := l.expr(e.C, fr)
	if err != nil {
		return nil, err
	}
	t := truth(c)
	return t.mul(a).add(constPoly(ratInt(1)).sub(t).mul(b)), nil
}

func (l *lowerer) cast(fr *frame, e *ir.Cast) (poly, error) {
	x, err := l.expr(e.X, fr)
	if err != nil {
		return nil, err
	}
	switch {
	case e.T == lang.Bool:
		return truth(x), nil
	case !e.T.IsFloat() && e.X.Type().IsFloat():
		return fnPoly("trunc", x), nil
	}
	return x, nil
}

func (l *lowerer) reduce(fr *frame, e *ir.Reduce) (poly, error) {
	env := make(map[*ir.Var]lin, len(fr.env)+len(e.Vars))
	for k, v := range fr.env {
		env[k] = v
	}
	bound := make([]bvar, len(e.Vars))
	var g guard
	for i, v := range e.Vars {
		bound[i] = bvar{l.freshVar(), dimLin(v.Extent)}
		env[v] = linName(bound[i].name)
		lo, lk := mkGE(env[v])
		hi, hk := mkGE(bound[i].ext.sub(env[v]).add(linConst(-1)))
		g, _ = g.with(lo, lk)
		g, _ = g.with(hi, hk)
	}
	body, err := l.expr(e.Body, &frame{fr.node, env})
	if err != nil {
		return nil, err
	}
	body = guardPoly(g).mul(body)
	if e.Kind != ir.Sum {
		return atomPoly(newRed(e.Kind.String(), bound, body)), nil
	}
	for _, t := range body {
		t.bound = append(append([]bvar(nil), bound...), t.bound...)
	}
	return body, nil
}
