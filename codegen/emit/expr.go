package emit

import (
	"math"

	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"tofuc/lang"
	tir "tofuc/lang/ir"
)

// expr lowers e to its value in the domain of its dtype (Module.domain):
// a double or a float for a float dtype, an i64 (wrapped to the dtype)
// otherwise.
func (f *fn) expr(e tir.Expr) value.Value {
	switch e := e.(type) {
	case *tir.Const:
		if e.T.IsFloat() {
			return f.float(e.Float, e.T)
		}
		return i64(e.T.WrapInt(e.Int))
	case *tir.Size:
		n, ok := e.D.IsConst()
		if !ok {
			fail("symbolic extent %s", e.D)
		}
		return i64(n)
	case *tir.VarRef:
		v, ok := f.vars[e.V]
		if !ok {
			fail("index variable %s is used outside its scope", e.V.Name)
		}
		return v
	case *tir.Access:
		return f.access(e)
	case *tir.Binary:
		return f.binary(e)
	case *tir.Unary:
		return f.unary(e)
	case *tir.Select:
		return f.selectExpr(e)
	case *tir.Cast:
		if v, ok := f.constValue(e.X); ok && e.T.IsFloat() {
			return f.float(e.T.RoundFloat(v), e.T)
		}
		return f.convert(f.expr(e.X), e.X.Type(), e.T, true)
	case *tir.Call:
		return f.call(e)
	case *tir.Reduce:
		if v, ok := f.hoisted[e]; ok {
			return v
		}
		if in := f.k.SumIn; in != nil && in.Reduce == e {
			return f.summed(in.Arg)
		}
		return f.reduce(e)
	case *tir.Opaque:
		fail("opaque function %s: runs on the host only", e.Fn)
	}
	fail("unknown expression %T", e)
	return nil
}

// exprTo lowers e converted implicitly (no float rounding) to dtype t. A
// float constant is made in t's domain from its value, as the
// interpreter, which holds it in double, uses it (a constant of an f32
// attribute in an f64 expression is not rounded to f32 first).
func (f *fn) exprTo(e tir.Expr, t lang.DType) value.Value {
	if v, ok := f.constValue(e); ok && t.IsFloat() {
		return f.float(v, t)
	}
	return f.convert(f.expr(e), e.Type(), t, false)
}

// constCall is the value of a float function of constants, computed by
// TDL's definition of the function (the interpreter's; codegen/mathir's
// equals it on hosts with FMA, and is within 2 ulps of double elsewhere,
// which the f32 rounding that follows hides).
func (f *fn) constCall(e *tir.Call) (float64, bool) {
	if !e.T.IsFloat() || e.Fn == "isnan" || e.Fn == "isinf" {
		return 0, false
	}
	args := make([]float64, len(e.Args))
	p := e.Args[0].Type()
	for i, a := range e.Args {
		v, ok := f.constValue(a)
		if !ok {
			return 0, false
		}
		args[i] = v
		p = lang.Promote(p, a.Type())
	}
	if !p.IsFloat() {
		switch e.Fn {
		case "abs", "max", "min", "sign":
			return 0, false // of integers, an integer
		}
	}
	switch unary, binary := tir.FloatFunc(e.Fn); {
	case unary != nil && len(args) == 1:
		return unary(args[0]), true
	case binary != nil && len(args) == 2:
		return binary(args[0], args[1]), true
	}
	return 0, false
}

// constValue is the value of a float expression of constants only (the
// arithmetic of literals and attributes: 1 - momentum), computed in
// double as the interpreter computes it, in the modes that compute in
// f32; ok is false for any other expression, and in the exact mode. A
// kernel in f32 then rounds the value once, where it meets a value
// computed in f32, not each literal.
func (f *fn) constValue(e tir.Expr) (v float64, ok bool) {
	if !f.m.Precision.InF32() {
		return 0, false // double arithmetic at run time gives the same bits
	}
	switch e := e.(type) {
	case *tir.Const:
		if e.T.IsFloat() {
			return e.Float, true
		}
		return float64(e.Int), e.T.IsSigned() || e.T.Bits() < 64
	case *tir.Size:
		n, ok := e.D.IsConst()
		return float64(n), ok
	case *tir.Cast:
		if x, ok := f.constValue(e.X); ok && e.T.IsFloat() {
			return e.T.RoundFloat(x), true
		}
	case *tir.Call:
		return f.constCall(e)
	case *tir.Unary:
		if x, ok := f.constValue(e.X); ok && e.Op == "-" && e.T.IsFloat() {
			return -x, true
		}
	case *tir.Binary:
		if !e.T.IsFloat() || !lang.Promote(e.L.Type(), e.R.Type()).IsFloat() {
			return 0, false
		}
		a, okA := f.constValue(e.L)
		b, okB := f.constValue(e.R)
		if !okA || !okB {
			return 0, false
		}
		switch e.Op {
		case tir.OpAdd:
			return a + b, true
		case tir.OpSub:
			return a - b, true
		case tir.OpMul:
			return a * b, true
		case tir.OpDiv:
			return a / b, true
		}
	}
	return 0, false
}

func f64(x float64) value.Value {
	if math.IsNaN(x) {
		return constant.NewFloat(types.Double, math.NaN())
	}
	return constant.NewFloat(types.Double, x)
}

// float is x in the domain of float dtype t: rounded to f32 where t
// computes in f32.
func (f *fn) float(x float64, t lang.DType) value.Value {
	if f.m.domain(t) != types.Float {
		return f64(x)
	}
	if math.IsNaN(x) {
		return constant.NewFloat(types.Float, math.NaN())
	}
	return constant.NewFloat(types.Float, float64(float32(x)))
}

func (f *fn) binary(e *tir.Binary) value.Value {
	if v, ok := f.constValue(e); ok {
		return f.float(v, e.T)
	}
	if a, ok := tir.AffineOf(e, nil); ok {
		if v, ok := f.affine(a); ok {
			return v
		}
	}
	lt, rt := e.L.Type(), e.R.Type()
	if e.Op == tir.OpAnd || e.Op == tir.OpOr {
		l := f.truth(f.expr(e.L), lt)
		shortCut := i64(0)
		pred := enum.IPredEQ // && stops at false
		if e.Op == tir.OpOr {
			shortCut, pred = i64(1), enum.IPredNE
		}
		v := f.branch(f.b.NewICmp(pred, l, i64(0)),
			func() value.Value { return shortCut },
			func() value.Value { return f.truth(f.expr(e.R), rt) })
		return f.convert(v, lang.Bool, e.T, false)
	}
	p := lang.Promote(lt, rt)
	if p.IsFloat() {
		a, b := f.exprTo(e.L, p), f.exprTo(e.R, p)
		if e.Op.IsComparison() {
			return f.convert(f.b.NewZExt(f.b.NewFCmp(floatPred[e.Op], a, b), types.I64), lang.Bool, e.T, false)
		}
		var v value.Value
		switch e.Op {
		case tir.OpAdd:
			v = f.b.NewFAdd(a, b)
		case tir.OpSub:
			v = f.b.NewFSub(a, b)
		case tir.OpMul:
			v = f.b.NewFMul(a, b)
		case tir.OpDiv:
			v = f.b.NewFDiv(a, b)
		case tir.OpMod:
			v = f.mathCall("fmod", a, b)
		default:
			fail("unknown binary operator %v", e.Op)
		}
		return f.convert(v, p, e.T, false)
	}
	a, b := f.exprTo(e.L, p), f.exprTo(e.R, p)
	unsigned := p == lang.U64
	if e.Op.IsComparison() {
		pred := signedPred[e.Op]
		if unsigned {
			pred = unsignedPred[e.Op]
		}
		return f.convert(f.b.NewZExt(f.b.NewICmp(pred, a, b), types.I64), lang.Bool, e.T, false)
	}
	t := e.T
	if t.IsFloat() {
		t = p
	}
	var v value.Value
	switch e.Op {
	case tir.OpAdd:
		v = f.b.NewAdd(a, b)
	case tir.OpSub:
		v = f.b.NewSub(a, b)
	case tir.OpMul:
		v = f.b.NewMul(a, b)
	case tir.OpDiv, tir.OpMod:
		v = f.intDivide(e.Op, a, b, unsigned)
	default:
		fail("unknown binary operator %v", e.Op)
	}
	return f.convert(f.wrap(v, t), t, e.T, false)
}

var floatPred = map[tir.BinOp]enum.FPred{
	tir.OpEq: enum.FPredOEQ, tir.OpNe: enum.FPredUNE, tir.OpLt: enum.FPredOLT,
	tir.OpLe: enum.FPredOLE, tir.OpGt: enum.FPredOGT, tir.OpGe: enum.FPredOGE,
}

var signedPred = map[tir.BinOp]enum.IPred{
	tir.OpEq: enum.IPredEQ, tir.OpNe: enum.IPredNE, tir.OpLt: enum.IPredSLT,
	tir.OpLe: enum.IPredSLE, tir.OpGt: enum.IPredSGT, tir.OpGe: enum.IPredSGE,
}

var unsignedPred = map[tir.BinOp]enum.IPred{
	tir.OpEq: enum.IPredEQ, tir.OpNe: enum.IPredNE, tir.OpLt: enum.IPredULT,
	tir.OpLe: enum.IPredULE, tir.OpGt: enum.IPredUGT, tir.OpGe: enum.IPredUGE,
}

// affine emits index arithmetic in its canonical form c + Σ k·v, so that
// the same index written two ways (a worker's (j + 8) - 8 and j) lowers
// to the same code; ok is false when its constant is symbolic.
func (f *fn) affine(a tir.Affine) (value.Value, bool) {
	c, ok := a.Const.IsConst()
	if !ok {
		return nil, false
	}
	var v value.Value
	for _, t := range a.Terms {
		x := f.expr(&tir.VarRef{V: t.Var})
		if t.Coef != 1 {
			x = f.b.NewMul(x, i64(t.Coef))
		}
		if v == nil {
			v = x
		} else {
			v = f.b.NewAdd(v, x)
		}
	}
	switch {
	case v == nil:
		return i64(c), true
	case c != 0:
		return f.b.NewAdd(v, i64(c)), true
	}
	return v, true
}

// intDivide is a / b or a % b on i64 as the interpreter computes them:
// division by zero gives 0, and the most negative value divided by -1
// wraps (neither traps).
func (f *fn) intDivide(op tir.BinOp, a, b value.Value, unsigned bool) value.Value {
	zero := f.b.NewICmp(enum.IPredEQ, b, i64(0))
	if unsigned {
		safe := f.b.NewSelect(zero, i64(1), b)
		var q value.Value = f.b.NewUDiv(a, safe)
		if op == tir.OpMod {
			q = f.b.NewURem(a, safe)
		}
		return f.b.NewSelect(zero, i64(0), q)
	}
	minusOne := f.b.NewICmp(enum.IPredEQ, b, i64(-1))
	safe := f.b.NewSelect(f.b.NewOr(zero, minusOne), i64(1), b)
	if op == tir.OpMod {
		r := f.b.NewSRem(a, safe)
		return f.b.NewSelect(f.b.NewOr(zero, minusOne), i64(0), r)
	}
	q := f.b.NewSDiv(a, safe)
	q2 := f.b.NewSelect(minusOne, f.b.NewSub(i64(0), a), q)
	return f.b.NewSelect(zero, i64(0), q2)
}

func (f *fn) unary(e *tir.Unary) value.Value {
	xt := e.X.Type()
	x := f.expr(e.X)
	switch e.Op {
	case "-":
		if xt.IsFloat() {
			return f.convert(f.b.NewFNeg(x), xt, e.T, false)
		}
		t := e.T
		if t.IsFloat() {
			t = lang.I64
		}
		return f.convert(f.wrap(f.b.NewSub(i64(0), x), t), t, e.T, false)
	case "!":
		return f.convert(f.b.NewSub(i64(1), f.truth(x, xt)), lang.Bool, e.T, false)
	}
	fail("unknown unary operator %q", e.Op)
	return nil
}

func (f *fn) selectExpr(e *tir.Select) value.Value {
	c := f.truth(f.expr(e.C), e.C.Type())
	cond := f.b.NewICmp(enum.IPredNE, c, i64(0))
	if f.speculatable(e.A) && f.speculatable(e.B) {
		a, b := f.exprTo(e.A, e.T), f.exprTo(e.B, e.T)
		return f.b.NewSelect(cond, a, b)
	}
	return f.branch(cond, func() value.Value { return f.exprTo(e.A, e.T) }, func() value.Value { return f.exprTo(e.B, e.T) })
}

// speculatable reports whether e can be evaluated when its value is not
// needed: no reduction loop and no access that may leave its tensor.
func (f *fn) speculatable(e tir.Expr) bool {
	ok := true
	seen := map[*tir.Def]bool{}
	var walk func(e tir.Expr)
	walk = func(e tir.Expr) {
		tir.Walk(e, func(x tir.Expr) bool {
			switch x := x.(type) {
			case *tir.Reduce, *tir.Opaque:
				ok = false
			case *tir.Binary:
				ok = ok && x.Op != tir.OpAnd && x.Op != tir.OpOr
			case *tir.Access:
				checked, _ := f.k.Checked(x)
				for _, c := range checked {
					ok = ok && !c
				}
				if src, found := f.k.Source(x.T); found && src.Local != nil && !seen[src.Local] {
					seen[src.Local] = true
					walk(src.Local.Body)
				}
			}
			return ok
		})
	}
	walk(e)
	return ok
}

func (f *fn) call(e *tir.Call) value.Value {
	if _, ok := tir.BitFuncs[e.Fn]; ok {
		return f.bitCall(e)
	}
	if v, ok := f.constValue(e); ok {
		return f.float(v, e.T)
	}
	p := e.Args[0].Type()
	for _, a := range e.Args {
		p = lang.Promote(p, a.Type())
	}
	if !p.IsFloat() {
		switch e.Fn {
		case "abs", "max", "min", "sign":
			return f.convert(f.intCall(e, p), p, e.T, false)
		case "isnan", "isinf":
			return f.convert(i64(0), lang.Bool, e.T, false)
		}
	}
	if !p.IsFloat() {
		p = lang.F64 // a float function of integers
	}
	args := make([]value.Value, len(e.Args))
	for i, a := range e.Args {
		args[i] = f.exprTo(a, p)
	}
	switch e.Fn {
	case "isnan":
		return f.convert(f.b.NewZExt(f.b.NewFCmp(enum.FPredUNO, args[0], args[0]), types.I64), lang.Bool, e.T, false)
	case "isinf":
		abs := f.mathCall("abs", args[0])
		return f.convert(f.b.NewZExt(f.b.NewFCmp(enum.FPredOEQ, abs, f.float(math.Inf(1), p)), types.I64), lang.Bool, e.T, false)
	}
	return f.convert(f.mathCall(e.Fn, args...), p, e.T, false)
}

// bitCall lowers a bit function (lang/ir.BitFuncs) as the interpreter
// computes it (ir.IntBitFunc, ir.BitsOf, ir.FromBits).
func (f *fn) bitCall(e *tir.Call) value.Value {
	t := e.T
	if e.Fn == "bitcast" {
		return f.valueOfBits(f.bitsOf(f.expr(e.Args[0]), e.Args[0].Type()), t)
	}
	if !t.IsInt() {
		fail("%s of %s: bit functions work on integers", e.Fn, t)
	}
	a := f.exprTo(e.Args[0], t)
	switch e.Fn {
	case "bitnot":
		return f.wrap(f.b.NewXor(a, i64(-1)), t)
	}
	b := f.exprTo(e.Args[1], t)
	switch e.Fn {
	case "bitand":
		return f.b.NewAnd(a, b)
	case "bitor":
		return f.b.NewOr(a, b)
	case "bitxor":
		return f.b.NewXor(a, b)
	}
	// Counts outside [0, width) shift every bit out; LLVM leaves them
	// undefined, so the count is clamped (an unsigned comparison: a
	// negative count is large).
	width := i64(int64(t.Bits()))
	big := f.b.NewICmp(enum.IPredUGE, b, width)
	switch e.Fn {
	case "shl":
		safe := f.b.NewSelect(big, i64(0), b)
		return f.b.NewSelect(big, i64(0), f.wrap(f.b.NewShl(a, safe), t))
	case "shr":
		if t.IsSigned() {
			return f.b.NewAShr(a, f.b.NewSelect(big, i64(63), b))
		}
		safe := f.b.NewSelect(big, i64(0), b)
		return f.b.NewSelect(big, i64(0), f.b.NewLShr(a, safe))
	}
	fail("unknown bit function %s", e.Fn)
	return nil
}

// bitsOf is the bit pattern of x, a domain value of dtype t, as an
// integer of t's width (floats rounded to t first, as stored).
func (f *fn) bitsOf(x value.Value, t lang.DType) value.Value {
	switch t {
	case lang.F64:
		return f.b.NewBitCast(f.widen(x), types.I64)
	case lang.F32:
		return f.b.NewBitCast(f.single(x), types.I32)
	case lang.F16:
		return f.b.NewCall(f.m.helper(floatToF16), f.single(x))
	case lang.BF16:
		return f.b.NewCall(f.m.helper(floatToBF16), f.single(x))
	}
	if t.Bits() == 64 {
		return x
	}
	return f.b.NewTrunc(x, types.NewInt(uint64(t.Bits())))
}

// valueOfBits is the domain value of dtype t with bit pattern x, an
// integer of t's width.
func (f *fn) valueOfBits(x value.Value, t lang.DType) value.Value {
	switch t {
	case lang.F64:
		return f.b.NewBitCast(x, types.Double)
	case lang.F32:
		return f.toDomain(f.b.NewBitCast(x, types.Float), t)
	case lang.F16:
		return f.toDomain(f.b.NewCall(f.m.helper(f16ToDouble), x), t)
	case lang.BF16:
		return f.toDomain(f.b.NewCall(f.m.helper(bf16ToDouble), x), t)
	case lang.Bool:
		return f.b.NewZExt(f.b.NewICmp(enum.IPredNE, x, constant.NewInt(types.I8, 0)), types.I64)
	}
	switch {
	case t.Bits() == 64:
		return x
	case t.IsSigned():
		return f.b.NewSExt(x, types.I64)
	}
	return f.b.NewZExt(x, types.I64)
}

// mathCall calls the math library's function name (codegen/mathir) on
// args, all of one type: floats call the f32 library's form where it has
// one (Lib.Func32), else are widened to double and the result rounded
// back to float.
func (f *fn) mathCall(name string, args ...value.Value) value.Value {
	if v, ok := f.constBound(name, args); ok {
		return v
	}
	if fn, ok := f.m.math.Func32(name); ok && args[0].Type().Equal(types.Float) {
		return f.b.NewCall(fn, args...)
	}
	if args[0].Type().Equal(types.Float) {
		wide := make([]value.Value, len(args))
		for i, a := range args {
			wide[i] = f.widen(a)
		}
		return f.b.NewFPTrunc(f.mathCall(name, wide...), types.Float)
	}
	// A constant exponent gets a function of its own, without branches
	// (mathir.FuncConstY).
	if y, ok := args[len(args)-1].(*constant.Float); ok && name == "pow" && !y.NaN {
		yv, _ := y.X.Float64()
		fn, err := f.m.math.FuncConstY(name, yv)
		if err != nil {
			fail("%v", err)
		}
		return f.b.NewCall(fn, args[0])
	}
	fn, err := f.m.math.Func(name)
	if err != nil {
		fail("%v", err)
	}
	return f.b.NewCall(fn, args...)
}

// intCall computes abs, max, min or sign on integers of dtype p.
func (f *fn) intCall(e *tir.Call, p lang.DType) value.Value {
	a := f.exprTo(e.Args[0], p)
	unsigned := p == lang.U64 || !p.IsSigned()
	switch e.Fn {
	case "abs":
		if unsigned {
			return a
		}
		neg := f.b.NewICmp(enum.IPredSLT, a, i64(0))
		return f.wrap(f.b.NewSelect(neg, f.b.NewSub(i64(0), a), a), p)
	case "sign":
		var v value.Value = f.b.NewSelect(f.b.NewICmp(enum.IPredEQ, a, i64(0)), i64(0), i64(1))
		if !unsigned {
			v = f.b.NewSelect(f.b.NewICmp(enum.IPredSLT, a, i64(0)), i64(p.WrapInt(-1)), v)
		}
		return v
	}
	b := f.exprTo(e.Args[1], p)
	pred := enum.IPredSLT
	if p == lang.U64 {
		pred = enum.IPredULT
	}
	if e.Fn == "max" {
		return f.b.NewSelect(f.b.NewICmp(pred, a, b), b, a)
	}
	return f.b.NewSelect(f.b.NewICmp(pred, b, a), b, a)
}

// reduce lowers a reduction computed by one thread: loops over its
// variables, first outermost, combining in row-major order.
func (f *fn) reduce(r *tir.Reduce) value.Value {
	// On the host a float sum adds in any order (a kernel differs from
	// the interpreter only in the order of a reduction's additions,
	// docs/decisions.md): its innermost loop sums in vectors, not one
	// addition's latency per term (attention's dot products). Only the
	// sum's own loops: a product or a maximum inside it keeps its order.
	outer := f.reassoc
	f.reassoc = f.m.Flavour == Host && r.Kind == tir.Sum && r.T.IsFloat()
	defer func() { f.reassoc = outer }()
	if (r.Kind == tir.Max || r.Kind == tir.Min) && exactF32(r.Body) && f.m.domain(lang.F32) == types.Double {
		// The largest (smallest) of values that are all f32 is the same
		// in f32 as in double: kept in f32, a pool's loop runs on
		// twice the lanes.
		acc := f.nest(r.Vars, constant.NewFloat(types.Float, identityFloat(r.Kind)), func(acc value.Value) value.Value {
			return f.combine(r.Kind, lang.F32, acc, f.b.NewFPTrunc(f.expr(r.Body), types.Float))
		})
		return f.b.NewFPExt(acc, types.Double)
	}
	acc := f.nest(r.Vars, f.identity(r.Kind, r.T), func(acc value.Value) value.Value {
		return f.combine(r.Kind, r.T, acc, f.exprTo(r.Body, r.T))
	})
	return f.finishReduce(r.Kind, r.T, acc)
}

// exactF32 reports whether every value of e is an f32 (held in double):
// a read of an f32 tensor whose default, if any, is an f32 constant.
func exactF32(e tir.Expr) bool {
	a, ok := e.(*tir.Access)
	if !ok || a.T.DType != lang.F32 {
		return false
	}
	if a.Default == nil {
		return true
	}
	c, ok := a.Default.(*tir.Const)
	return ok && c.T.IsFloat() && (math.IsNaN(c.Float) || float64(float32(c.Float)) == c.Float)
}

// identityFloat is a float reducer's identity.
func identityFloat(kind tir.Reducer) float64 {
	switch kind {
	case tir.Sum:
		return 0
	case tir.Prod:
		return 1
	case tir.Max:
		return math.Inf(-1)
	}
	return math.Inf(1)
}

// identity is a reducer's identity in the domain of dtype t.
func (f *fn) identity(kind tir.Reducer, t lang.DType) value.Value {
	if t.IsFloat() {
		return f.float(identityFloat(kind), t)
	}
	lo, hi := intRange(t)
	switch kind {
	case tir.Sum:
		return i64(0)
	case tir.Prod:
		return i64(1)
	case tir.Max:
		return i64(lo)
	}
	return i64(hi)
}

// intRange is the smallest and largest value of an integer or bool dtype
// (u64 as bit patterns), as the interpreter's reductions start.
func intRange(t lang.DType) (lo, hi int64) {
	switch {
	case t == lang.Bool:
		return 0, 1
	case t == lang.U64:
		return 0, -1
	case t.IsSigned():
		b := t.Bits()
		return -1 << (b - 1), 1<<(b-1) - 1
	}
	return 0, 1<<t.Bits() - 1
}

// combine folds v into acc. Float max and min keep a NaN once seen.
func (f *fn) combine(kind tir.Reducer, t lang.DType, acc, v value.Value) value.Value {
	if t.IsFloat() {
		switch kind {
		case tir.Sum:
			add := f.b.NewFAdd(acc, v)
			if f.reassoc {
				add.FastMathFlags = []enum.FastMathFlag{enum.FastMathFlagReassoc}
			}
			return add
		case tir.Prod:
			return f.b.NewFMul(acc, v)
		}
		pred := enum.FPredOGT
		if kind == tir.Min {
			pred = enum.FPredOLT
		}
		take := f.b.NewOr(f.b.NewFCmp(pred, v, acc), f.b.NewFCmp(enum.FPredUNO, v, v))
		return f.b.NewSelect(take, v, acc)
	}
	switch kind {
	case tir.Sum:
		return f.b.NewAdd(acc, v)
	case tir.Prod:
		return f.b.NewMul(acc, v)
	}
	less := enum.IPredSLT
	if t == lang.U64 {
		less = enum.IPredULT
	}
	if kind == tir.Max {
		return f.b.NewSelect(f.b.NewICmp(less, acc, v), v, acc)
	}
	return f.b.NewSelect(f.b.NewICmp(less, v, acc), v, acc)
}

// finishReduce wraps an integer sum or product to its dtype.
func (f *fn) finishReduce(kind tir.Reducer, t lang.DType, acc value.Value) value.Value {
	if !t.IsFloat() && (kind == tir.Sum || kind == tir.Prod) {
		return f.wrap(acc, t)
	}
	return acc
}

// summed reads the sum a library computed into argument arg (f32, of the
// kernel's output shape) at the output index.
func (f *fn) summed(arg int) value.Value {
	idx := make([]value.Value, len(f.k.Vars))
	for i, v := range f.k.Vars {
		idx[i] = f.vars[v]
	}
	return f.load(f.bufs[arg], flatIndex(f, idx, f.k.Shape), lang.F32)
}

// constBound computes max or min of a value and a constant c as Go's
// math.Max and Min do, in two comparisons and selects: x where x is
// beyond c, NaN where x is NaN, else c. That holds for every c but NaN, the infinity on
// the bound's side (which wins over NaN) and the zero of the other sign
// (max(+0, -0) is +0 whichever comes first). The library's general form
// tests both operands for signed zeros and infinities: a ReLU6's clip
// was about 20 vector operations (8 here), the most of a depthwise
// convolution's epilogue.
func (f *fn) constBound(name string, args []value.Value) (value.Value, bool) {
	if (name != "max" && name != "min") || len(args) != 2 {
		return nil, false
	}
	for i, a := range args {
		c, ok := a.(*constant.Float)
		if !ok || c.NaN || c.X == nil {
			continue
		}
		infinite, negative, zero := c.X.IsInf(), c.X.Signbit(), c.X.Sign() == 0
		pred := enum.FPredUGT
		if name == "min" {
			pred, negative = enum.FPredULT, !negative
		}
		if infinite && !negative || zero && negative {
			continue
		}
		x := args[1-i]
		bound := f.b.NewSelect(f.b.NewFCmp(pred, x, c), x, c)
		// NaN as Go's: the canonical one, not x's sign and payload.
		nan := constant.NewFloat(x.Type().(*types.FloatType), math.NaN())
		return f.b.NewSelect(f.b.NewFCmp(enum.FPredUNO, x, x), nan, bound), true
	}
	return nil, false
}
