package autodiff

import (
	"fmt"
	"math"

	"tofuc/lang"
	"tofuc/lang/ir"
)

// term is one read of a tensor in a body and its coefficient: the body's
// derivative with respect to that read, times the seed.
type term struct {
	read *ir.Access
	coef ir.Expr
	// reduce holds the variables of the reductions enclosing the read.
	reduce []*ir.Var
}

// diff collects the terms of e's derivative times seed. wrt says which
// tensors are differentiated.
type diff struct {
	wrt   map[*ir.Tensor]bool
	terms []term
	err   error
	stack []*ir.Var // enclosing reduction variables
}

func (d *diff) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf(format, args...)
	}
}

func fconst(t lang.DType, v float64) ir.Expr { return &ir.Const{T: t, Float: v} }

func bin(op ir.BinOp, a, b ir.Expr) ir.Expr {
	return simplifyBinary(&ir.Binary{Op: op, L: a, R: b, T: a.Type()})
}

func neg(a ir.Expr) ir.Expr {
	if k, ok := a.(*ir.Const); ok {
		return fconst(k.T, -k.Float)
	}
	if u, ok := a.(*ir.Unary); ok && u.Op == "-" {
		return u.X
	}
	return &ir.Unary{Op: "-", X: a, T: a.Type()}
}

func call(fn string, t lang.DType, args ...ir.Expr) ir.Expr {
	return &ir.Call{Fn: fn, Args: args, T: t}
}

func sel(c, a, b ir.Expr) ir.Expr { return &ir.Select{C: c, A: a, B: b, T: a.Type()} }

func cmp(op ir.BinOp, a, b ir.Expr) ir.Expr { return &ir.Binary{Op: op, L: a, R: b, T: lang.Bool} }

// grad adds the terms of d(e) * seed. seed has e's (float) dtype.
func (d *diff) grad(e ir.Expr, seed ir.Expr) {
	if d.err != nil || isZero(seed) || !e.Type().IsFloat() {
		return // integer and bool values carry no gradient
	}
	t := e.Type()
	switch x := e.(type) {
	case *ir.Const, *ir.Size, *ir.VarRef:
	case *ir.Access:
		if d.wrt[x.T] {
			d.terms = append(d.terms, term{read: x, coef: seed, reduce: append([]*ir.Var(nil), d.stack...)})
		}
		if x.Default != nil {
			// The default is the value wherever the index leaves the tensor.
			d.grad(x.Default, sel(outside(x), seed, fconst(t, 0)))
		}
	case *ir.Unary:
		d.grad(x.X, neg(seed))
	case *ir.Cast:
		if x.X.Type().IsFloat() {
			d.grad(x.X, cast(seed, x.X.Type()))
		}
	case *ir.Binary:
		d.binary(x, seed)
	case *ir.Call:
		d.call(x, seed, t)
	case *ir.Select:
		zero := fconst(t, 0)
		d.grad(x.A, sel(x.C, seed, zero))
		d.grad(x.B, sel(x.C, zero, seed))
	case *ir.Reduce:
		d.reduce(x, seed)
	case *ir.Opaque:
		d.fail("opaque %s has no derivative, so the operator is not differentiable", x.Fn)
	default:
		d.fail("cannot differentiate %s", ir.ExprString(e))
	}
}

// outside is the condition that an access's index leaves its tensor.
func outside(a *ir.Access) ir.Expr {
	var cond ir.Expr
	for d, idx := range a.Index {
		c := cmp(ir.OpOr, cmp(ir.OpLt, idx, ir.IndexConst(0)), cmp(ir.OpGe, idx, ir.IndexDim(a.T.Shape[d])))
		if cond == nil {
			cond = c
		} else {
			cond = cmp(ir.OpOr, cond, c)
		}
	}
	if cond == nil {
		return &ir.Const{T: lang.Bool}
	}
	return cond
}

func cast(e ir.Expr, t lang.DType) ir.Expr {
	if e.Type() == t {
		return e
	}
	return &ir.Cast{X: e, T: t}
}

func (d *diff) binary(x *ir.Binary, seed ir.Expr) {
	l, r := x.L, x.R
	switch x.Op {
	case ir.OpAdd:
		d.grad(l, seed)
		d.grad(r, seed)
	case ir.OpSub:
		d.grad(l, seed)
		d.grad(r, neg(seed))
	case ir.OpMul:
		d.grad(l, bin(ir.OpMul, seed, r))
		d.grad(r, bin(ir.OpMul, seed, l))
	case ir.OpDiv:
		d.grad(l, bin(ir.OpDiv, seed, r))
		d.grad(r, neg(bin(ir.OpDiv, bin(ir.OpMul, seed, l), bin(ir.OpMul, r, r))))
	default:
		// Comparisons and logic give bools: no gradient; % on floats is
		// rejected by the checker.
	}
}

// call differentiates the math functions.
func (d *diff) call(x *ir.Call, seed ir.Expr, t lang.DType) {
	a := x.Args[0]
	one := fconst(t, 1)
	switch x.Fn {
	case "pow":
		b := x.Args[1]
		d.grad(a, bin(ir.OpMul, seed, bin(ir.OpMul, b, call("pow", t, a, bin(ir.OpSub, b, one)))))
		d.grad(b, bin(ir.OpMul, seed, bin(ir.OpMul, x, call("log", t, a))))
	case "max", "min":
		op := ir.OpGe
		if x.Fn == "min" {
			op = ir.OpLe
		}
		first := cmp(op, a, x.Args[1]) // ties go to the first argument
		zero := fconst(t, 0)
		d.grad(a, sel(first, seed, zero))
		d.grad(x.Args[1], sel(first, zero, seed))
	case "atan2":
		b := x.Args[1]
		den := bin(ir.OpAdd, bin(ir.OpMul, a, a), bin(ir.OpMul, b, b))
		d.grad(a, bin(ir.OpMul, seed, bin(ir.OpDiv, b, den)))
		d.grad(b, bin(ir.OpMul, seed, neg(bin(ir.OpDiv, a, den))))
	default:
		da, ok := Derivative(x, t)
		switch {
		case !ok:
			d.fail("no derivative for %s", x.Fn)
		case da != nil: // nil: piecewise constant
			d.grad(a, bin(ir.OpMul, seed, da))
		}
	}
}

// Derivative is f'(a) for a call x = f(a) of a math function of one
// argument, in dtype t: an expression of a and x; nil for a piecewise
// constant function (floor, ceil, round, sign, isnan, isinf); ok is false
// for a function of two arguments or one without a derivative.
// Differentiation and analysis/rounding's error bounds read it.
func Derivative(x *ir.Call, t lang.DType) (da ir.Expr, ok bool) {
	a := x.Args[0]
	one := fconst(t, 1)
	switch x.Fn {
	case "exp":
		return x, true
	case "log":
		return bin(ir.OpDiv, one, a), true
	case "sqrt":
		return bin(ir.OpDiv, fconst(t, 0.5), x), true
	case "rsqrt":
		return bin(ir.OpMul, fconst(t, -0.5), bin(ir.OpDiv, x, a)), true
	case "tanh":
		return bin(ir.OpSub, one, bin(ir.OpMul, x, x)), true
	case "sigmoid":
		return bin(ir.OpMul, x, bin(ir.OpSub, one, x)), true
	case "erf":
		return bin(ir.OpMul, fconst(t, 2/math.Sqrt(math.Pi)), call("exp", t, neg(bin(ir.OpMul, a, a)))), true
	case "abs":
		return call("sign", t, a), true
	case "sin":
		return call("cos", t, a), true
	case "cos":
		return neg(call("sin", t, a)), true
	case "tan":
		return bin(ir.OpAdd, one, bin(ir.OpMul, x, x)), true
	case "asin":
		return call("rsqrt", t, bin(ir.OpSub, one, bin(ir.OpMul, a, a))), true
	case "acos":
		return neg(call("rsqrt", t, bin(ir.OpSub, one, bin(ir.OpMul, a, a)))), true
	case "atan":
		return bin(ir.OpDiv, one, bin(ir.OpAdd, one, bin(ir.OpMul, a, a))), true
	case "sinh":
		return call("cosh", t, a), true
	case "cosh":
		return call("sinh", t, a), true
	case "asinh":
		return call("rsqrt", t, bin(ir.OpAdd, bin(ir.OpMul, a, a), one)), true
	case "acosh":
		return call("rsqrt", t, bin(ir.OpSub, bin(ir.OpMul, a, a), one)), true
	case "atanh":
		return bin(ir.OpDiv, one, bin(ir.OpSub, one, bin(ir.OpMul, a, a))), true
	case "reciprocal":
		return neg(bin(ir.OpMul, x, x)), true
	case "floor", "ceil", "round", "sign", "isnan", "isinf":
		return nil, true
	}
	return nil, false
}

// reduce differentiates a reduction: a sum passes the seed to every
// element; max and min to the elements equal to the result; prod to each
// element times the product of the others (the product divided by it).
func (d *diff) reduce(x *ir.Reduce, seed ir.Expr) {
	d.stack = append(d.stack, x.Vars...)
	defer func() { d.stack = d.stack[:len(d.stack)-len(x.Vars)] }()
	switch x.Kind {
	case ir.Sum:
		d.grad(x.Body, seed)
	case ir.Max, ir.Min:
		// The maximal elements share the gradient evenly (a value read
		// twice is one element read twice: each read gets half).
		hit := cmp(ir.OpEq, x.Body, x)
		count := &ir.Reduce{Kind: ir.Sum, Vars: x.Vars, Body: sel(hit, fconst(x.T, 1), fconst(x.T, 0)), T: x.T}
		d.grad(x.Body, sel(hit, bin(ir.OpDiv, seed, count), fconst(x.T, 0)))
	case ir.Prod:
		d.grad(x.Body, bin(ir.OpMul, seed, others(x)))
	}
}

// others is, at the current element of a product, the product of all the
// other elements (exact where an element is 0, unlike product / element):
// the product again over fresh variables, with the current element
// replaced by 1.
func others(x *ir.Reduce) ir.Expr {
	fresh := make([]*ir.Var, len(x.Vars))
	sub := map[*ir.Var]ir.Expr{}
	var same ir.Expr
	for i, v := range x.Vars {
		fresh[i] = &ir.Var{Name: v.Name, Extent: v.Extent}
		sub[v] = &ir.VarRef{V: fresh[i]}
		eq := cmp(ir.OpEq, &ir.VarRef{V: fresh[i]}, &ir.VarRef{V: v})
		if same == nil {
			same = eq
		} else {
			same = cmp(ir.OpAnd, same, eq)
		}
	}
	body := sel(same, fconst(x.T, 1), substitute(x.Body, sub))
	return &ir.Reduce{Kind: ir.Prod, Vars: fresh, Body: body, T: x.T}
}

func isZero(e ir.Expr) bool {
	k, ok := e.(*ir.Const)
	return ok && k.Float == 0 && k.Int == 0
}

func isOne(e ir.Expr) bool {
	k, ok := e.(*ir.Const)
	return ok && k.T.IsFloat() && k.Float == 1
}

// simplifyBinary folds the algebra that the chain rule produces: products
// with 0 and 1, sums with 0, constants.
func simplifyBinary(b *ir.Binary) ir.Expr {
	l, r := b.L, b.R
	lk, lc := l.(*ir.Const)
	rk, rc := r.(*ir.Const)
	if lc && rc && b.T.IsFloat() {
		var v float64
		switch b.Op {
		case ir.OpAdd:
			v = lk.Float + rk.Float
		case ir.OpSub:
			v = lk.Float - rk.Float
		case ir.OpMul:
			v = lk.Float * rk.Float
		case ir.OpDiv:
			v = lk.Float / rk.Float
		default:
			return b
		}
		return fconst(b.T, v)
	}
	switch b.Op {
	case ir.OpAdd:
		if isZero(l) {
			return r
		}
		if isZero(r) {
			return l
		}
	case ir.OpSub:
		if isZero(r) {
			return l
		}
		if isZero(l) {
			return neg(r)
		}
	case ir.OpMul:
		if isZero(l) || isZero(r) {
			return fconst(b.T, 0)
		}
		if isOne(l) {
			return r
		}
		if isOne(r) {
			return l
		}
	case ir.OpDiv:
		if isOne(r) {
			return l
		}
		if isZero(l) {
			return fconst(b.T, 0)
		}
	}
	return b
}
