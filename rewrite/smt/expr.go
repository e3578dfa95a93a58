package smt

import (
	"fmt"
	"math/big"
	"strings"

	"tofuc/lang"
	"tofuc/lang/ir"
)

// index lowers integer index arithmetic to a lin, each result wrapped to
// its dtype as the interpreter does (a bool is 0 or 1).
func (l *lowerer) index(fr *frame, e ir.Expr) (lin, error) {
	if e.Type() == lang.Bool {
		c, k, err := l.cond(fr, e)
		return indicator(c, k), err
	}
	x, err := l.rawIndex(fr, e)
	if err != nil {
		return lin{}, err
	}
	w, ok := x.wrap(e.Type())
	if !ok {
		return lin{}, &unsupported{e.Type().String() + " index arithmetic in " + ir.ExprString(e)}
	}
	return w, nil
}

// rawIndex lowers e before the wrap to its dtype.
func (l *lowerer) rawIndex(fr *frame, e ir.Expr) (lin, error) {
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
		if !e.X.Type().IsFloat() {
			return l.index(fr, e.X)
		}
	case *ir.Unary:
		if e.Op == "-" {
			x, err := l.index(fr, e.X)
			return x.scale(-1), err
		}
	case *ir.Binary:
		return l.indexBinary(fr, e)
	case *ir.Select:
		return l.indexSelect(fr, e)
	case *ir.Call:
		if (e.Fn == "max" || e.Fn == "min") && len(e.Args) == 2 {
			a, b, err := l.indexPair(fr, e.Args[0], e.Args[1])
			kind := map[string]iatomKind{"max": iMax, "min": iMin}[e.Fn]
			return a.minmax(b, kind), err
		}
	}
	return lin{}, &unsupported{"index expression " + ir.ExprString(e)}
}

// indexSelect is select(c, a, b) on indices: [c]*a + [!c]*b.
func (l *lowerer) indexSelect(fr *frame, e *ir.Select) (lin, error) {
	c, k, err := l.cond(fr, e.C)
	if err != nil {
		return lin{}, err
	}
	a, b, err := l.indexPair(fr, e.A, e.B)
	if err != nil {
		return lin{}, err
	}
	nc, nk := negate(c, k)
	return indicator(c, k).mul(a).add(indicator(nc, nk).mul(b)), nil
}

// indexPair lowers two index expressions.
func (l *lowerer) indexPair(fr *frame, x, y ir.Expr) (lin, lin, error) {
	a, err := l.index(fr, x)
	if err != nil {
		return lin{}, lin{}, err
	}
	b, err := l.index(fr, y)
	return a, b, err
}

func (l *lowerer) indexBinary(fr *frame, e *ir.Binary) (lin, error) {
	a, b, err := l.indexPair(fr, e.L, e.R)
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
		return a.divLin(b, e.Op == ir.OpMod), nil
	}
	return lin{}, &unsupported{"index expression " + ir.ExprString(e)}
}

// cond lowers a boolean condition on indices.
func (l *lowerer) cond(fr *frame, e ir.Expr) (*cond, condConst, error) {
	switch e := e.(type) {
	case *ir.Const:
		return nil, condConst{true, e.Int != 0}, nil
	case *ir.Cast:
		if e.T == lang.Bool && !e.X.Type().IsFloat() {
			x, err := l.index(fr, e.X)
			if err != nil {
				return nil, condConst{}, err
			}
			c, k := negate(mkEQ(x))
			return c, k, nil
		}
	case *ir.Unary:
		if e.Op == "!" {
			c, k, err := l.cond(fr, e.X)
			if err != nil {
				return nil, k, err
			}
			c, k = negate(c, k)
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
	a, b, err := l.indexPair(fr, e.L, e.R)
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
		c, k = negate(mkEQ(a.sub(b)))
	default:
		return nil, k, &unsupported{"condition " + ir.ExprString(e)}
	}
	return c, k, nil
}

// maxTerms bounds the terms of one product in the normal form: beyond it
// the rule is left unknown rather than expanded for minutes.
const maxTerms = 1 << 16

// expr lowers a value expression.
func (l *lowerer) expr(e ir.Expr, fr *frame) (poly, error) {
	l.dl.check("expanding the sides")
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
		switch {
		case err != nil:
			return nil, err
		case e.Op == "-":
			return storeAs(x.scale(ratInt(-1)), e.X.Type(), e.T)
		}
		return constPoly(ratInt(1)).sub(truth(x)), nil
	case *ir.Binary:
		return l.binary(fr, e)
	case *ir.Call:
		p, err := l.call(fr, e)
		if err != nil {
			return nil, err
		}
		return storeAs(p, e.T, e.T)
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
	p := lang.Promote(e.L.Type(), e.R.Type())
	switch e.Op {
	case ir.OpAdd:
		return storeAs(a.add(b), p, e.T)
	case ir.OpSub:
		return storeAs(a.sub(b), p, e.T)
	case ir.OpMul:
		if len(a) == 0 && hasInfinity(b) || len(b) == 0 && hasInfinity(a) {
			return nil, &unsupported{"zero times a value that may be infinite (NaN in IEEE)"}
		}
		if len(a)*len(b) > maxTerms {
			return nil, &unsupported{fmt.Sprintf("a product of %d by %d terms (the normal form is limited to %d)", len(a), len(b), maxTerms)}
		}
		return storeAs(a.mul(b), p, e.T)
	case ir.OpDiv:
		if !p.IsFloat() {
			return nil, &unsupported{"integer division of values"}
		}
		c, ok := constOf(b)
		switch {
		case ok && c.Sign() == 0:
			return nil, &unsupported{"division by the constant zero"}
		case ok:
			return storeAs(a.scale(new(big.Rat).Inv(c)), p, e.T)
		}
		return storeAs(a.mul(fnPoly("recip", b)), p, e.T)
	case ir.OpLt:
		return fnPoly("pos", b.sub(a)), nil
	case ir.OpLe:
		return fnPoly("nneg", b.sub(a)), nil
	case ir.OpGt:
		return fnPoly("pos", a.sub(b)), nil
	case ir.OpGe:
		return fnPoly("nneg", a.sub(b)), nil
	case ir.OpEq, ir.OpNe:
		eq := fnPoly("zero", a.sub(b))
		if name, x, ok := againstInf(a, b); ok {
			eq = fnPoly(name, x) // x - -inf is no difference to compare
		}
		if e.Op == ir.OpNe {
			return constPoly(ratInt(1)).sub(eq), nil
		}
		return eq, nil
	case ir.OpAnd:
		return truth(a).mul(truth(b)), nil
	case ir.OpOr:
		ta, tb := truth(a), truth(b)
		return ta.add(tb).sub(ta.mul(tb)), nil
	}
	return nil, &unsupported{"operator " + e.Op.String() + " on values"}
}

// againstInf recognises a comparison with an infinite constant: name is
// "isinf:-inf" or "isinf:inf", x the other side.
func againstInf(a, b poly) (name string, x poly, ok bool) {
	for _, pair := range [][2]poly{{a, b}, {b, a}} {
		if p := pair[1]; len(p) == 1 && len(p[0].atoms) == 1 && p[0].atoms[0].kind == aInf &&
			len(p[0].guard) == 0 && len(p[0].bound) == 0 && p[0].coef.Cmp(ratInt(1)) == 0 {
			return "isinf:" + p[0].atoms[0].name, pair[0], true
		}
	}
	return "", nil, false
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
	if e.Fn == "bitcast" {
		if e.Args[0].Type().IsFloat() {
			// A float's bits are not a function of its real value:
			// 0.0 and -0.0 are equal, their bits are not.
			return nil, &unsupported{"bitcast of a float (its bits, the sign of zero, are not a function of its value)"}
		}
		// One uninterpreted function per target dtype: the same bits
		// read as i32 and as u32 differ.
		return fnPoly(e.Fn+"."+e.T.String(), args...), nil
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
	from := e.X.Type()
	switch {
	case e.T == lang.Bool:
		return truth(x), nil
	case e.T.IsFloat() && !floatHolds(e.T, from) && !l.holds(e.T, x):
		return fnPoly("round:"+e.T.String(), x), nil
	case e.T.IsFloat() || intHolds(e.T, from):
		return x, nil
	}
	return storeAs(x, from, e.T)
}

// storeAs converts a value computed exactly in dtype from to dtype t, as
// the interpreter does for an integer t: floats truncate, and every
// integer wraps to t's width (exactly in the bounded check, an
// uninterpreted function in the proof). Float results are kept exact:
// rounding to the operands' own precision is not modelled.
func storeAs(p poly, from, t lang.DType) (poly, error) {
	switch {
	case !t.IsInt():
		return p, nil
	case t == lang.U64 || from == lang.U64:
		return nil, &unsupported{"u64 values"}
	case from.IsFloat():
		return fnPoly("toint:"+t.String(), p), nil
	}
	if c, ok := constOf(p); ok && c.IsInt() && c.Num().IsInt64() {
		return constPoly(ratInt(t.WrapInt(c.Num().Int64()))), nil
	}
	return fnPoly("wrap:"+t.String(), p), nil
}

// precision is the significand precision of a float dtype in bits, and
// exponent its exponent width.
func precision(t lang.DType) (significand, exponent int) {
	switch t {
	case lang.F64:
		return 53, 11
	case lang.F32:
		return 24, 8
	case lang.F16:
		return 11, 5
	case lang.BF16:
		return 8, 8
	}
	return 0, 0
}

// floatHolds reports whether every value of dtype from is a value of the
// float dtype t, so that converting to t is exact. Integers convert
// exactly to f32 and f64 in this model (like arithmetic, the rounding of
// integers beyond 2^24 is not modelled), and to f16 and bf16 only from
// bool and 8-bit types.
func floatHolds(t, from lang.DType) bool {
	tp, te := precision(t)
	if from.IsFloat() {
		fp, fe := precision(from)
		return tp >= fp && te >= fe
	}
	return tp >= 24 || from == lang.Bool || from.Bits() <= 8
}

// holds reports whether every value of p is a value of the float dtype t
// whatever its static type: p is one term, a constant t represents, or a
// read of an input (or a rounding) of a dtype t holds, under any guard
// (cast_f32(cast_f64(x)) is x for an f32 x).
func (l *lowerer) holds(t lang.DType, p poly) bool {
	if len(p) != 1 || len(p[0].bound) > 0 {
		return len(p) == 0
	}
	term := p[0]
	if len(term.atoms) == 0 {
		f, exact := term.coef.Float64()
		return exact && t.RoundFloat(f) == f
	}
	if len(term.atoms) != 1 || term.coef.Cmp(ratInt(1)) != 0 {
		return false
	}
	switch a := term.atoms[0]; {
	case a.kind == aAccess:
		return floatHolds(t, l.dtypes[a.name])
	case a.kind == aFn && strings.HasPrefix(a.name, "round:"):
		return floatHolds(t, lang.ParseDType(a.name[len("round:"):]))
	}
	return false
}

// intHolds reports whether every value of integer dtype from is a value
// of integer dtype t.
func intHolds(t, from lang.DType) bool {
	switch {
	case from == lang.Bool:
		return true
	case from.IsSigned() == t.IsSigned():
		return from.Bits() <= t.Bits()
	}
	return !from.IsSigned() && from.Bits() < t.Bits()
}

func (l *lowerer) reduce(fr *frame, e *ir.Reduce) (poly, error) {
	env := make(map[*ir.Var]lin, len(fr.env)+len(e.Vars))
	for k, v := range fr.env {
		env[k] = v
	}
	var bound []bvar
	var g guard
	for _, v := range e.Vars {
		ext := dimLin(v.Extent)
		if k, ok := ext.isConst(); ok && k == 1 {
			env[v] = linConst(0) // a range of one value is that value
			continue
		}
		b := bvar{l.freshVar(), ext}
		bound = append(bound, b)
		env[v] = linName(b.name)
		g = g.inRange(env[v], ext)
	}
	body, err := l.expr(e.Body, &frame{fr.node, env})
	if err != nil {
		return nil, err
	}
	body = guardPoly(g).mul(body)
	if e.Kind != ir.Sum && len(bound) > 0 {
		return storeAs(atomPoly(newRed(e.Kind.String(), bound, body)), e.T, e.T)
	}
	for _, t := range body {
		t.bound = append(append([]bvar(nil), bound...), t.bound...)
	}
	return storeAs(body, e.T, e.T)
}
