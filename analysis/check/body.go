package check

import (
	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/lang/suggest"
)

// Elaboration of lambda bodies into IR expressions.

var reducers = map[string]ir.Reducer{"sum": ir.Sum, "max": ir.Max, "min": ir.Min, "prod": ir.Prod}

// elabTop elaborates a Def body; a bare tensor-valued or pack result is an error.
func (c *instCtx) elabTop(e lang.Expr) ir.Expr { return c.elab(e) }

// paramPos is the position of the lambda parameter that made variable i
// (a pack's variables share their parameter's).
func paramPos(l *lang.Lambda, i int) lang.Pos {
	if i < len(l.Params) {
		return l.Params[i].Pos
	}
	return l.Pos
}

func isLambda(e lang.Expr) bool {
	for {
		switch x := e.(type) {
		case *lang.Paren:
			e = x.X
		case *lang.Lambda:
			return true
		default:
			return false
		}
	}
}

func (c *instCtx) weakConst(k *ir.Const) ir.Expr {
	c.weak[k] = true
	return k
}

func (c *instCtx) elab(e lang.Expr) ir.Expr {
	switch e := e.(type) {
	case *lang.Num:
		if e.IsFloat {
			return c.weakConst(&ir.Const{T: lang.F32, Float: e.Float})
		}
		return c.weakConst(&ir.Const{T: lang.I64, Int: e.Int})
	case *lang.BoolLit:
		k := &ir.Const{T: lang.Bool}
		if e.Value {
			k.Int = 1
		}
		return k
	case *lang.StrLit:
		c.fail(e.Pos, "a string is not a tensor value")
	case *lang.Paren:
		return c.elab(e.X)
	case *lang.Ident:
		return c.ident(e)
	case *lang.Unary:
		return c.unary(e)
	case *lang.Binary:
		return c.binary(e)
	case *lang.Index:
		return c.access(e)
	case *lang.Call:
		return c.call(e)
	case *lang.Lambda:
		c.fail(e.Pos, "a lambda can only define an operator's output, a let, or the argument of a reducer")
	case *lang.List:
		c.fail(e.Pos, "a list is not a tensor value")
	}
	c.fail(e.ExprPos(), "unexpected expression")
	return nil
}

func (c *instCtx) ident(e *lang.Ident) ir.Expr {
	if v, ok := c.vars[e.Name]; ok {
		c.used[v] = true
		r := &ir.VarRef{V: v}
		c.weak[r] = true
		return r
	}
	if t, ok := c.tensors[e.Name]; ok {
		if t.Rank() != 0 {
			c.fail(e.Pos, "%s is a tensor of rank %d; index it", e.Name, t.Rank())
		}
		return &ir.Access{Pos: e.Pos, T: t}
	}
	if _, ok := c.packs[e.Name]; ok {
		c.fail(e.Pos, "%s is a pack of index variables; splice it into an index with *%s", e.Name, e.Name)
	}
	if v, ok := c.consts[e.Name]; ok {
		return c.constExpr(e.Pos, v)
	}
	if v, ok := predeclared[e.Name]; ok {
		return c.constExpr(e.Pos, v)
	}
	c.fail(e.Pos, "undefined: %s%s", e.Name, suggest.DidYouMean(e.Name, c.names()))
	return nil
}

// constExpr turns a compile-time scalar into an IR value.
func (c *instCtx) constExpr(pos lang.Pos, v cval) ir.Expr {
	switch v.kind {
	case cInt:
		x := ir.IndexDim(v.dim)
		c.weak[x] = true
		return x
	case cFloat:
		return c.weakConst(&ir.Const{T: lang.F32, Float: v.f})
	case cBool:
		k := &ir.Const{T: lang.Bool}
		if v.b {
			k.Int = 1
		}
		return k
	case cIndex:
		c.weak[v.exprs[0]] = true
		return v.exprs[0]
	}
	c.fail(pos, "a %s (%s) is not a scalar value", v.kind, v)
	return nil
}

func (c *instCtx) unary(e *lang.Unary) ir.Expr {
	x := c.elab(e.X)
	if e.Op == "!" {
		if x.Type() != lang.Bool {
			c.fail(e.Pos, "! needs a bool, found %s", x.Type())
		}
		return &ir.Unary{Op: "!", X: x, T: lang.Bool}
	}
	if x.Type() == lang.Bool {
		c.fail(e.Pos, "cannot negate a bool")
	}
	if k, ok := x.(*ir.Const); ok {
		n := &ir.Const{T: k.T, Int: k.T.WrapInt(-k.Int), Float: -k.Float}
		if c.weak[x] {
			c.weak[n] = true
		}
		return n
	}
	u := &ir.Unary{Op: "-", X: x, T: x.Type()}
	if c.weak[x] {
		c.weak[u] = true
	}
	return u
}

var binOps = map[string]ir.BinOp{
	"+": ir.OpAdd, "-": ir.OpSub, "*": ir.OpMul, "/": ir.OpDiv, "%": ir.OpMod,
	"==": ir.OpEq, "!=": ir.OpNe, "<": ir.OpLt, "<=": ir.OpLe, ">": ir.OpGt, ">=": ir.OpGe,
	"&&": ir.OpAnd, "||": ir.OpOr,
}

func (c *instCtx) binary(e *lang.Binary) ir.Expr {
	op := binOps[e.Op]
	if op == ir.OpAnd || op == ir.OpOr {
		return c.logic(e, op)
	}
	l, r := c.elab(e.L), c.elab(e.R)
	if !op.IsComparison() && (l.Type() == lang.Bool || r.Type() == lang.Bool) {
		c.fail(e.Pos, "arithmetic %s on a bool; convert it with f32(...) or select", e.Op)
	}
	l, r, t := c.unify(l, r)
	if op == ir.OpMod && t.IsFloat() {
		c.fail(e.Pos, "%% needs integers, found %s", t)
	}
	if k, ok := ir.ConstInt(r); ok && k == 0 && (op == ir.OpDiv || op == ir.OpMod) && !t.IsFloat() {
		c.fail(e.Pos, "integer %s by zero", map[ir.BinOp]string{ir.OpDiv: "division", ir.OpMod: "remainder"}[op])
	}
	if op.IsComparison() {
		if x := foldCompare(op, l, r); x != nil {
			return x
		}
		return &ir.Binary{Op: op, L: l, R: r, T: lang.Bool}
	}
	if x := foldInt(op, l, r); x != nil {
		c.weak[x] = c.weak[l] && c.weak[r]
		return x
	}
	b := &ir.Binary{Op: op, L: l, R: r, T: t}
	if c.weak[l] && c.weak[r] {
		c.weak[b] = true
	}
	return b
}

// logic elaborates && and ||, which short-circuit: a left operand known
// at compile time that decides the result (false for &&, true for ||) is
// the result, and the right one is neither evaluated nor checked, as
// select's unchosen branch (`len(axes) > 0 && axes[0] == 1` guards the
// read; `causal && j > i` is false when causal is); one that does not
// decide drops out.
func (c *instCtx) logic(e *lang.Binary, op ir.BinOp) ir.Expr {
	if v, ok := c.compileTime(e.L); ok && v.kind == cBool && v.b == (op == ir.OpOr) {
		return c.constExpr(e.Pos, v)
	}
	l, r := c.elab(e.L), c.elab(e.R)
	if l.Type() != lang.Bool || r.Type() != lang.Bool {
		c.fail(e.Pos, "%s needs two bools, found %s and %s", e.Op, l.Type(), r.Type())
	}
	if _, ok := constBool(l); ok {
		return r
	}
	return &ir.Binary{Op: op, L: l, R: r, T: lang.Bool}
}

// constBool is the value of a bool constant.
func constBool(e ir.Expr) (bool, bool) {
	k, ok := e.(*ir.Const)
	if !ok || k.T != lang.Bool {
		return false, false
	}
	return k.Int != 0, true
}

// foldCompare folds a comparison of two constants of one dtype (an
// attribute against a literal: `stage >= 2`), or returns nil.
func foldCompare(op ir.BinOp, l, r ir.Expr) ir.Expr {
	x, xok := l.(*ir.Const)
	y, yok := r.(*ir.Const)
	if !xok || !yok || x.T != y.T {
		return nil
	}
	var cmp int
	if x.T.IsFloat() {
		if x.Float != x.Float || y.Float != y.Float {
			return nil // NaN: leave it to the evaluation
		}
		cmp = compareValues(x.Float, y.Float)
	} else {
		cmp = compareValues(x.Int, y.Int)
	}
	holds := map[ir.BinOp]bool{ir.OpEq: cmp == 0, ir.OpNe: cmp != 0, ir.OpLt: cmp < 0, ir.OpLe: cmp <= 0, ir.OpGt: cmp > 0, ir.OpGe: cmp >= 0}[op]
	k := &ir.Const{T: lang.Bool}
	if holds {
		k.Int = 1
	}
	return k
}

func compareValues[T int64 | float64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// foldInt folds integer index arithmetic on constants.
func foldInt(op ir.BinOp, l, r ir.Expr) ir.Expr {
	x, xok := ir.ConstInt(l)
	y, yok := ir.ConstInt(r)
	if !xok || !yok || l.Type() != lang.I64 {
		switch {
		case op == ir.OpAdd && l.Type() == lang.I64:
			return ir.IndexAdd(l, r)
		case op == ir.OpSub && yok && l.Type() == lang.I64:
			return ir.IndexAdd(l, ir.IndexConst(-y))
		case op == ir.OpMul && yok && l.Type() == lang.I64:
			return ir.IndexMul(l, y)
		case op == ir.OpDiv && yok && y == 1 && l.Type() == lang.I64:
			return l // a head's group of one: h / 1 stays affine
		}
		return nil
	}
	switch op {
	case ir.OpAdd:
		return ir.IndexConst(x + y)
	case ir.OpSub:
		return ir.IndexConst(x - y)
	case ir.OpMul:
		return ir.IndexConst(x * y)
	case ir.OpDiv:
		if y != 0 {
			return ir.IndexConst(x / y)
		}
	case ir.OpMod:
		if y != 0 {
			return ir.IndexConst(x % y)
		}
	}
	return nil
}

// unify converts the operands of a binary operation to one dtype: an
// untyped operand takes the other's dtype; otherwise they promote.
func (c *instCtx) unify(l, r ir.Expr) (ir.Expr, ir.Expr, lang.DType) {
	lt, rt := l.Type(), r.Type()
	lw, rw := c.weak[l], c.weak[r]
	var t lang.DType
	switch {
	case lw && !rw:
		t = adopt(lt, rt)
	case rw && !lw:
		t = adopt(rt, lt)
	default:
		t = lang.Promote(lt, rt)
	}
	nl, nr := c.convert(l, t), c.convert(r, t)
	return nl, nr, t
}

// adopt is the dtype an untyped operand of dtype w takes next to dtype t.
func adopt(w, t lang.DType) lang.DType {
	if w.IsFloat() && !t.IsFloat() {
		return w
	}
	return t
}

func (c *instCtx) convert(e ir.Expr, t lang.DType) ir.Expr {
	if e.Type() == t {
		return e
	}
	out := c.castTo(e, t)
	if c.weak[e] {
		c.weak[out] = true
	}
	return out
}

func (c *instCtx) call(e *lang.Call) ir.Expr {
	if e.Opaque {
		c.fail(e.Pos, "index the result of opaque %s: opaque %s(...)[i, ...]", e.Name, e.Name)
	}
	if _, isTensor := c.tensors[e.Name]; isTensor {
		c.fail(e.Pos, "%s is a tensor; index it with [...]", e.Name)
	}
	if k, ok := reducers[e.Name]; ok && len(e.Args) == 1 {
		if isLambda(e.Args[0]) {
			return c.reduce(e, k)
		}
		if _, isBuiltin := builtins[e.Name]; !isBuiltin {
			c.fail(e.Pos, "the argument of %s must be a lambda: %s(lambda k: ...)", e.Name, e.Name)
		}
	}
	if len(e.Attrs) > 0 {
		c.fail(e.Pos, "%s takes no attributes inside a lambda", e.Name)
	}
	if e.Name == "select" {
		return c.selectExpr(e)
	}
	if e.Name == "like" {
		return c.like(e)
	}
	if t := lang.ParseDType(e.Name); t != lang.Invalid {
		if len(e.Args) != 1 {
			c.fail(e.Pos, "%s(...) converts one value", e.Name)
		}
		return c.castTo(c.elab(e.Args[0]), t)
	}
	if n, ok := ir.MathFuncs[e.Name]; ok {
		if len(e.Args) != n {
			c.fail(e.Pos, "%s takes %d arguments, found %d", e.Name, n, len(e.Args))
		}
		return c.math(e)
	}
	if e.Name == "bitcast" {
		return c.bitcast(e)
	}
	if n, ok := ir.BitFuncs[e.Name]; ok {
		if len(e.Args) != n {
			c.fail(e.Pos, "%s takes %d arguments, found %d", e.Name, n, len(e.Args))
		}
		return c.bits(e)
	}
	if _, ok := builtins[e.Name]; ok {
		return c.constExpr(e.Pos, c.ev.eval(e))
	}
	c.fail(e.Pos, "unknown function %s%s (operators cannot be called inside a lambda)", e.Name, suggest.DidYouMean(e.Name, append(builtinNames(), mathNames()...)))
	return nil
}

// like(t, v) converts v to the dtype of the tensor t, for operators that
// keep their input's dtype whatever it is (`like(x, 1)` is a one of x's
// dtype).
func (c *instCtx) like(e *lang.Call) ir.Expr {
	if len(e.Args) != 2 {
		c.fail(e.Pos, "like takes a tensor and a value, found %d arguments", len(e.Args))
	}
	id, ok := e.Args[0].(*lang.Ident)
	if !ok || c.tensors[id.Name] == nil {
		c.fail(e.Args[0].ExprPos(), "the first argument of like must name a tensor")
	}
	return c.castTo(c.elab(e.Args[1]), c.tensors[id.Name].DType)
}

func mathNames() []string {
	out := []string{"sum", "prod", "select", "like"}
	for n := range ir.MathFuncs {
		out = append(out, n)
	}
	for n := range ir.BitFuncs {
		out = append(out, n)
	}
	return out
}

var intMath = map[string]bool{"abs": true, "max": true, "min": true, "sign": true}

func (c *instCtx) math(e *lang.Call) ir.Expr {
	args := make([]ir.Expr, len(e.Args))
	for i, a := range e.Args {
		args[i] = c.elab(a)
		if args[i].Type() == lang.Bool {
			c.fail(a.ExprPos(), "%s of a bool", e.Name)
		}
	}
	weak := c.weak[args[0]]
	t := args[0].Type()
	if len(args) == 2 {
		args[0], args[1], t = c.unify(args[0], args[1])
		weak = weak && c.weak[args[1]]
	}
	if !t.IsFloat() && !intMath[e.Name] {
		t = lang.F32
		for i := range args {
			args[i] = c.castTo(args[i], t)
		}
	}
	result := t
	if e.Name == "isnan" || e.Name == "isinf" {
		result = lang.Bool
	}
	call := &ir.Call{Fn: e.Name, Args: args, T: result}
	if weak && result != lang.Bool {
		c.weak[call] = true
	}
	return call
}

// bits elaborates a bit function of integers (ir.BitFuncs): the
// operands of a binary one unify as arithmetic's do, and the result has
// their dtype.
func (c *instCtx) bits(e *lang.Call) ir.Expr {
	args := make([]ir.Expr, len(e.Args))
	for i, a := range e.Args {
		args[i] = c.elab(a)
	}
	weak := c.weak[args[0]]
	t := args[0].Type()
	if len(args) == 2 {
		args[0], args[1], t = c.unify(args[0], args[1])
		weak = weak && c.weak[args[1]]
	}
	if !t.IsInt() {
		c.fail(e.Pos, "%s works on the bits of integers, found %s (bitcast(x, i32) reinterprets a float's bits)", e.Name, t)
	}
	call := &ir.Call{Fn: e.Name, Args: args, T: t}
	if weak {
		c.weak[call] = true
	}
	return call
}

// bitcast(x, T) reinterprets the bits of x as dtype T, of the same width
// (bool is 8 bits wide).
func (c *instCtx) bitcast(e *lang.Call) ir.Expr {
	if len(e.Args) != 2 {
		c.fail(e.Pos, "bitcast takes a value and a dtype: bitcast(x, i32), found %d arguments", len(e.Args))
	}
	id, ok := e.Args[1].(*lang.Ident)
	t := lang.Invalid
	if ok {
		t = lang.ParseDType(id.Name)
	}
	if t == lang.Invalid {
		c.fail(e.Args[1].ExprPos(), "the second argument of bitcast must be a dtype (i32, f32, ...)")
	}
	x := c.elab(e.Args[0])
	if c.weak[x] {
		c.fail(e.Args[0].ExprPos(), "bitcast of an untyped value: convert it first (bitcast(f32(1.0), i32))")
	}
	if x.Type().Bits() != t.Bits() {
		c.fail(e.Pos, "bitcast from %s to %s: the widths differ (%d and %d bits)", x.Type(), t, x.Type().Bits(), t.Bits())
	}
	if x.Type() == t {
		return x
	}
	return &ir.Call{Fn: "bitcast", Args: []ir.Expr{x}, T: t}
}

func (c *instCtx) selectExpr(e *lang.Call) ir.Expr {
	if len(e.Args) != 3 {
		c.fail(e.Pos, "select takes 3 arguments (condition, then, else), found %d", len(e.Args))
	}
	if v, ok := c.compileTime(e.Args[0]); ok && v.kind == cBool {
		// A condition known at compile time picks its branch now, so the
		// other may be invalid for these attributes.
		if v.b {
			return c.elab(e.Args[1])
		}
		return c.elab(e.Args[2])
	}
	cond := c.elab(e.Args[0])
	if cond.Type() != lang.Bool {
		c.fail(e.Args[0].ExprPos(), "the condition of select must be a bool, found %s", cond.Type())
	}
	// Accesses in the branches are guarded by the condition: the checker
	// cannot tell which indices they are evaluated at.
	a := c.guardedElab(e.Args[1])
	b := c.guardedElab(e.Args[2])
	a, b, t := c.unify(a, b)
	if k, ok := constBool(cond); ok {
		// Decided once the attributes are known (both branches were
		// checked): `select(causal && j > i, -inf, score)`. The branch
		// is untyped only where the select would have been.
		pick := b
		if k {
			pick = a
		}
		if !c.weak[a] || !c.weak[b] {
			delete(c.weak, pick)
		}
		return pick
	}
	s := &ir.Select{C: cond, A: a, B: b, T: t}
	if c.weak[a] && c.weak[b] {
		c.weak[s] = true
	}
	return s
}

// compileTime evaluates e if it is a compile-time value, reporting nothing
// when it is not.
func (c *instCtx) compileTime(e lang.Expr) (cval, bool) {
	var scratch lang.ErrorList
	ev := &evaluator{env: c, errs: &scratch}
	var v cval
	ok := try(func() { v = ev.eval(e) })
	return v, ok && v.kind != cIndex
}

func (c *instCtx) guardedElab(e lang.Expr) ir.Expr {
	x := c.elab(e)
	ir.Walk(x, func(n ir.Expr) bool {
		if a, ok := n.(*ir.Access); ok {
			c.guarded[a] = true
		}
		return true
	})
	return x
}

func (c *instCtx) reduce(e *lang.Call, k ir.Reducer) ir.Expr {
	l := c.lambdaOf(e.Args[0], "the argument of "+e.Name)
	vars := c.pendingParams(l, e.Name)
	body := c.elab(l.Body)
	c.inferExtents(vars, body, l)
	for i, v := range vars {
		if !c.used[v] {
			c.fail(paramPos(l, i), "reduction variable %s is never used (the %s would repeat its body %s times)", v.Name, e.Name, v.Extent)
		}
	}
	c.popParams(l)
	t := body.Type()
	if t == lang.Bool {
		if k == ir.Sum || k == ir.Prod {
			t = lang.I64
			body = c.castTo(body, t)
		}
	}
	r := &ir.Reduce{Kind: k, Vars: vars, Body: body, T: t}
	if c.weak[body] {
		c.weak[r] = true
	}
	return r
}

// access elaborates T[index...] (with an optional else default) and opaque
// calls indexed by their result.
func (c *instCtx) access(e *lang.Index) ir.Expr {
	if call, ok := e.X.(*lang.Call); ok && call.Opaque {
		return c.opaque(e, call)
	}
	id, ok := e.X.(*lang.Ident)
	if !ok {
		c.fail(e.Pos, "only tensors can be indexed")
	}
	t, ok := c.tensors[id.Name]
	if !ok {
		if v, isConst := c.consts[id.Name]; isConst && v.kind == cList {
			return c.constExpr(e.Pos, c.ev.eval(e)) // an element of a list attribute
		} else if isConst {
			c.fail(e.Pos, "%s is not a tensor and cannot be indexed", id.Name)
		}
		c.fail(id.Pos, "undefined tensor %s%s", id.Name, suggest.DidYouMean(id.Name, c.tensorNames()))
	}
	idx := c.indexList(e.Idx, false)
	idx = c.broadcastIndex(e, t, idx)
	if len(idx) != t.Rank() {
		c.fail(e.Pos, "%s has rank %d (shape %s) but is indexed with %d indices", t.Name, t.Rank(), lang.ShapeString(t.Shape), len(idx))
	}
	for i, x := range idx {
		if x == nil {
			c.fail(e.Idx[min(i, len(e.Idx)-1)].Pos, "a slice ':' is only allowed in the arguments of an opaque function")
		}
		if x.Type() == lang.Bool || x.Type().IsFloat() {
			c.fail(e.Pos, "index %d of %s must be an integer, found %s", i, t.Name, x.Type())
		}
	}
	a := &ir.Access{Pos: e.Pos, T: t, Index: idx}
	if e.Default != nil {
		d := c.elab(e.Default)
		if d.Type() != t.DType && !c.weak[d] && !(d.Type().IsFloat() && t.DType.IsFloat()) {
			c.fail(e.Default.ExprPos(), "the default of %s must be a %s, found %s", t.Name, t.DType, d.Type())
		}
		a.Default = c.castTo(d, t.DType)
	}
	return a
}

func (c *instCtx) tensorNames() []string {
	var out []string
	for n := range c.tensors {
		out = append(out, n)
	}
	return out
}

// indexList expands pack splices and spliced functions; a nil entry is a
// full slice (allowed only when slices is set).
func (c *instCtx) indexList(elems []*lang.IndexElem, slices bool) []ir.Expr {
	var out []ir.Expr
	for _, el := range elems {
		switch {
		case el.Slice:
			if !slices {
				c.fail(el.Pos, "a slice ':' is only allowed in the arguments of an opaque function")
			}
			out = append(out, nil)
		case el.Pack != "":
			vs, ok := c.packs[el.Pack]
			if !ok {
				c.fail(el.Pos, "*%s: %s is not a pack of index variables%s", el.Pack, el.Pack, suggest.DidYouMean(el.Pack, packNames(c.packs)))
			}
			for _, v := range vs {
				c.used[v] = true
				out = append(out, &ir.VarRef{V: v})
			}
		case el.Func != nil:
			v := c.ev.eval(el.Func)
			if v.kind != cList {
				c.fail(el.Pos, "*%s(...) must give a list of indices, found %s", el.Func.Name, v.kind)
			}
			for _, x := range v.list {
				out = append(out, c.ev.index(el.Func, x))
			}
		default:
			out = append(out, c.elab(el.Expr))
		}
	}
	return out
}

func packNames(m map[string][]*ir.Var) []string {
	var out []string
	for n := range m {
		out = append(out, n)
	}
	return out
}

// broadcastIndex applies NumPy broadcasting to an access that splices one
// pack alone, t[*i]: the trailing variables index t, and a dimension of
// extent 1 is indexed with 0 where the variable's extent is not 1.
func (c *instCtx) broadcastIndex(e *lang.Index, t *ir.Tensor, idx []ir.Expr) []ir.Expr {
	if len(e.Idx) != 1 || e.Idx[0].Pack == "" || len(idx) < t.Rank() {
		return idx
	}
	idx = idx[len(idx)-t.Rank():]
	out := make([]ir.Expr, len(idx))
	for d, x := range idx {
		out[d] = x
		if isOne(t.Shape[d]) && !isOne(x.(*ir.VarRef).V.Extent) {
			out[d] = ir.IndexConst(0)
		}
	}
	return out
}

func (c *instCtx) opaque(e *lang.Index, call *lang.Call) ir.Expr {
	fn, ok := lang.OpaqueFuncs[call.Name]
	if !ok {
		c.fail(call.Pos, "unknown opaque function %s%s", call.Name, suggest.DidYouMean(call.Name, opaqueNames()))
	}
	if len(call.Args) != fn.Arity {
		c.fail(call.Pos, "opaque %s takes %d arguments, found %d", call.Name, fn.Arity, len(call.Args))
	}
	o := &ir.Opaque{Pos: call.Pos, Fn: call.Name}
	var shapes [][]lang.Dim
	for _, a := range call.Args {
		ix, ok := a.(*lang.Index)
		id, isIdent := a.(*lang.Ident)
		var view *ir.View
		switch {
		case ok:
			name, _ := ix.X.(*lang.Ident)
			if name == nil || c.tensors[name.Name] == nil {
				c.fail(a.ExprPos(), "an argument of opaque %s must be a tensor or a slice of one", call.Name)
			}
			view = &ir.View{T: c.tensors[name.Name], Index: c.indexList(ix.Idx, true)}
		case isIdent && c.tensors[id.Name] != nil:
			t := c.tensors[id.Name]
			view = &ir.View{T: t, Index: make([]ir.Expr, t.Rank())}
		default:
			c.fail(a.ExprPos(), "an argument of opaque %s must be a tensor or a slice of one", call.Name)
		}
		if len(view.Index) != view.T.Rank() {
			c.fail(a.ExprPos(), "%s has rank %d but is indexed with %d entries", view.T.Name, view.T.Rank(), len(view.Index))
		}
		var shape []lang.Dim
		for d, x := range view.Index {
			if x == nil {
				shape = append(shape, view.T.Shape[d])
			}
		}
		shapes = append(shapes, shape)
		o.Args = append(o.Args, view)
		o.T = view.T.DType
	}
	res, err := fn.Shape(shapes)
	if err != nil {
		c.fail(call.Pos, "opaque %s %v", call.Name, err)
	}
	o.Shape = res
	o.Index = c.indexList(e.Idx, false)
	if len(o.Index) != len(res) {
		c.fail(e.Pos, "the result of opaque %s has rank %d but is indexed with %d indices", call.Name, len(res), len(o.Index))
	}
	return o
}

func opaqueNames() []string {
	var out []string
	for n := range lang.OpaqueFuncs {
		out = append(out, n)
	}
	return out
}
