// Package rounding bounds the rounding error of a compiled kernel from
// its arithmetic: the policy under which tests compare what a kernel
// computed in a precision mode that computes in f32 with the
// interpreter's float64 result (docs/precision.md).
//
// Bound rewrites an operator instance into one that also computes, for
// every element of every output, a first-order bound E on the
// difference between the kernel's result and the interpreter's, in units
// of U (the unit roundoff of f32). It is running error analysis
// (Higham, "Accuracy and Stability of Numerical Algorithms", 3.3): every
// rounded operation adds its unit times the magnitude of its result, and
// the errors of its operands propagate through its derivatives:
//
//	E(a ± b) = E(a) + E(b) + w·|a ± b|
//	E(a · b) = |b|·E(a) + |a|·E(b) + w·|a·b|
//	E(a / b) = E(a)/|b| + |a|·E(b)/b² + w·|a/b|
//	E(f(a))  = |f'(a)|·E(a) + w·|f(a)|
//	E(Σ t)   = Σ E(t) + g(n-1)·w·Σ |t|      (n terms, in any order)
//
// where w is the unit of the operation's arithmetic relative to U (1 for
// f32, 2⁻²⁹ for double) and the interpreter's values stand for the
// exact ones. A sum's additions count g(a) = min(a, λ√a) roundings:
// the worst case a (any order) up to a = λ², then Higham and Mary's
// probabilistic bound ("A new approach to probabilistic rounding error
// analysis", 2019), which holds for a sum of n terms with probability
// at least 1 − n·2·exp(−λ²/2) when rounding errors are independent;
// with λ = 8, 1 − n·2.5·10⁻¹⁴. The worst case grows with the depth K of a
// contraction as K·U, far beyond the errors of any order of summation
// (√K·U in practice), so loose that whole wrong terms would pass. Reads of inputs are exact; a store or cast to a narrower
// float adds that format's unit. For a contraction this is the bound
// g(K)·U·M of its depth K over M = Σ|a||b|, the interpreter's evaluation
// on absolute values, plus the output's rounding.
//
// The bound is first order (terms in U² are dropped) and holds where the
// computation is continuous: a comparison, floor or integer cast whose
// argument lies within its error of a jump may flip, which it does not
// cover (tests draw their inputs at random, away from jumps).
package rounding

import (
	"fmt"
	"math"

	"tofuc/analysis/autodiff"
	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/lang/precision"
)

// U is the unit the bounds are in: f32's unit roundoff, 2⁻²⁴.
const U = 0x1p-24

// Lambda is λ of the probabilistic bound of a sum's additions.
const Lambda = 8

// additions is g(a), the roundings a sum's a additions count.
func additions(a int64) float64 {
	return min(float64(a), Lambda*math.Sqrt(float64(a)))
}

// Bound returns an instance that computes inst's outputs followed by one
// bound per output (f64, the output's shape, in units of U) for a kernel
// computing in mode p, or an error naming what it cannot bound (an opaque
// call of computed values, a reduction of symbolic length).
func Bound(inst *ir.Instance, p precision.Mode) (out *ir.Instance, err error) {
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(unbounded)
			if !ok {
				panic(r)
			}
			err = fmt.Errorf("%s: %w", inst.Op, e.error)
		}
	}()
	b := &bounder{mode: p, errs: map[*ir.Tensor]*ir.Tensor{}, inputs: map[*ir.Tensor]bool{}}
	for _, t := range inst.Inputs {
		b.inputs[t] = true
	}
	out = &ir.Instance{Op: inst.Op + ".bound", Pos: inst.Pos, Attrs: inst.Attrs, Inputs: inst.Inputs}
	for _, d := range inst.Locals {
		out.Locals = append(out.Locals, d, b.def(d))
	}
	out.Outputs = append(out.Outputs, inst.Outputs...)
	for _, d := range inst.Outputs {
		out.Outputs = append(out.Outputs, b.def(d))
	}
	return out, nil
}

type unbounded struct{ error }

func fail(format string, args ...any) { panic(unbounded{fmt.Errorf(format, args...)}) }

type bounder struct {
	mode   precision.Mode
	errs   map[*ir.Tensor]*ir.Tensor // a local's bound tensor
	inputs map[*ir.Tensor]bool
}

// def is the definition of d's bound: its body's, plus the rounding of
// its store.
func (b *bounder) def(d *ir.Def) *ir.Def {
	t := &ir.Tensor{Name: d.Tensor.Name + ".bound", DType: lang.F64, Shape: d.Tensor.Shape}
	b.errs[d.Tensor] = t
	body := b.bound(d.Body)
	if u := formatUnit(d.Tensor.DType); u > 0 {
		body = add(body, charge(2*u, d.Body))
	}
	return &ir.Def{Pos: d.Pos, Tensor: t, Vars: d.Vars, Body: body}
}

// unit is the unit roundoff, relative to U, of an operation computing
// values of dtype t: f32, f16 and bf16 compute in f32 in the modes that
// do (precision.Mode.InF32), everything else in double; integers are
// exact.
func (b *bounder) unit(t lang.DType) float64 {
	switch {
	case !t.IsFloat():
		return 0
	case t != lang.F64 && b.mode.InF32():
		return 1
	}
	return 0x1p-53 / U
}

// formatUnit is the unit roundoff of float dtype t relative to U, 0 for
// f64 and integers. Where a value is stored or cast to t, the
// interpreter rounds it, and the kernel's value, computed in t's
// arithmetic or wider, rounds to it too: the two may round to
// neighbours, an ulp (two units) apart, which is what a store or cast
// adds.
func formatUnit(t lang.DType) float64 {
	switch t {
	case lang.F32:
		return 1
	case lang.F16:
		return 0x1p-11 / U
	case lang.BF16:
		return 0x1p-8 / U
	}
	return 0
}

// bound is the IR of E(e), an f64 expression.
func (b *bounder) bound(e ir.Expr) ir.Expr {
	if !e.Type().IsFloat() {
		return num(0) // integers and bools are exact
	}
	switch e := e.(type) {
	case *ir.Const:
		if b.unit(e.T) == 1 && float64(float32(e.Float)) != e.Float {
			return abs(e) // rounded to f32 (codegen folds constants in double, then rounds once)
		}
		return num(0)
	case *ir.Access:
		return b.access(e)
	case *ir.Unary:
		return b.bound(e.X) // negation
	case *ir.Binary:
		return b.binary(e)
	case *ir.Select:
		return &ir.Select{C: e.C, A: b.bound(e.A), B: b.bound(e.B), T: lang.F64}
	case *ir.Cast:
		own := b.bound(e.X)
		if !e.X.Type().IsFloat() {
			return charge(b.unit(e.T), e) // an integer rounded to a float
		}
		if u := formatUnit(e.T); u > 0 {
			return add(own, charge(2*u, e))
		}
		return own
	case *ir.Call:
		return b.call(e)
	case *ir.Reduce:
		return b.reduce(e)
	case *ir.Opaque:
		for _, a := range e.Args {
			if !b.inputs[a.T] {
				fail("opaque %s of computed values has no bound", e.Fn)
			}
		}
		return num(0) // computed by the same function from exact inputs
	}
	fail("no bound for %T", e)
	return nil
}

func (b *bounder) access(a *ir.Access) ir.Expr {
	if b.inputs[a.T] {
		if a.Default != nil {
			return b.bound(a.Default) // a default the kernel rounded to f32
		}
		return num(0)
	}
	t, ok := b.errs[a.T]
	if !ok {
		fail("a read of %s, which the instance does not define before", a.T.Name)
	}
	var def ir.Expr
	if a.Default != nil {
		def = b.bound(a.Default)
	}
	return &ir.Access{Pos: a.Pos, T: t, Index: a.Index, Default: def}
}

func (b *bounder) binary(e *ir.Binary) ir.Expr {
	p := lang.Promote(e.L.Type(), e.R.Type())
	if !p.IsFloat() || e.Op.IsComparison() || e.Op == ir.OpAnd || e.Op == ir.OpOr {
		return charge(b.unit(e.T), e) // an integer result converted to a float
	}
	el, er := b.bound(e.L), b.bound(e.R)
	own := charge(b.unit(p), e)
	switch e.Op {
	case ir.OpAdd, ir.OpSub:
		return add(add(el, er), own)
	case ir.OpMul:
		return add(add(scaled(e.R, el), scaled(e.L, er)), own)
	case ir.OpDiv:
		// E(a)/|b| + |a/b|·E(b)/|b|
		return add(div(add(el, scaled(e, er)), abs(e.R)), own)
	}
	fail("no bound for the float operator %s", e.Op) // % of floats: the checker refuses it
	return nil
}

// call propagates the argument's bound through the function's
// derivative and adds the rounding of its result: codegen/mathir computes
// in double, rounded once to the kernel's arithmetic, or, in f32, with
// the f32 library's form where it has one, within the ulps
// lang/precision.F32ULPs states of the correctly rounded result: two
// units each, and the unit of that rounding.
func (b *bounder) call(e *ir.Call) ir.Expr {
	if _, ok := ir.BitFuncs[e.Fn]; ok {
		// A float read from the bits of an integer is the interpreter's
		// exactly; the bits of a float computed with an error are not
		// bounded by it.
		if e.Args[0].Type().IsFloat() {
			fail("no bound for %s of a float into a float", e.Fn)
		}
		return num(0)
	}
	w := b.unit(e.T)
	if ulps, ok := precision.F32ULPs[e.Fn]; ok && w == 1 {
		w = 2*ulps + 1
	}
	own := charge(w, e)
	if len(e.Args) == 2 {
		return add(b.call2(e), own)
	}
	a := e.Args[0]
	d, ok := autodiff.Derivative(e, lang.F64)
	switch {
	case !ok:
		fail("no derivative for %s", e.Fn)
	case e.Fn == "abs":
		d = num(1) // Lipschitz 1, also at 0, where sign is 0
	case d == nil:
		return own // piecewise constant: floor, ceil, round, sign
	}
	ea := b.bound(a)
	if e.Fn == "sqrt" {
		// Near 0 the derivative grows without bound, but a change of δ
		// moves sqrt by at most √δ: √(U·E)/U.
		return add(call("min", propagate(d, ea), call("sqrt", div(ea, num(U)))), own)
	}
	return add(propagate(d, ea), own)
}

// call2 is the propagated bound of a function of two arguments.
func (b *bounder) call2(e *ir.Call) ir.Expr {
	x, y := e.Args[0], e.Args[1]
	ex, ey := b.bound(x), b.bound(y)
	switch e.Fn {
	case "max", "min":
		return call("max", ex, ey)
	case "pow":
		// ∂x = y·x^(y-1), ∂y = pow·log|x| (0 where pow is: 0·log 0)
		dx := mul(y, call("pow", x, sub(y, num(1))))
		dy := &ir.Select{C: &ir.Binary{Op: ir.OpEq, L: e, R: num(0), T: lang.Bool}, A: num(0), B: mul(e, call("log", abs(x))), T: lang.F64}
		return add(propagate(dx, ex), propagate(dy, ey))
	case "atan2": // atan2(x, y) = atan(x/y): ∂x = y/(x²+y²), ∂y = -x/(x²+y²)
		r := add(mul(x, x), mul(y, y))
		return add(propagate(div(y, r), ex), propagate(div(x, r), ey))
	}
	fail("no bound for %s", e.Fn)
	return nil
}

// charge is the rounding of a result v in units of w: w·|v|, 0 where v
// is infinite (an infinite result is compared exactly, and its bound
// would turn its neighbours' into NaN: ∞·0).
func charge(w float64, v ir.Expr) ir.Expr {
	inf := &ir.Binary{Op: ir.OpEq, L: abs(v), R: num(math.Inf(1)), T: lang.Bool}
	return &ir.Select{C: inf, A: num(0), B: mul(num(w), abs(v)), T: lang.F64}
}

// scaled is |m|·E, 0 where E is (an exact operand times an infinite
// one adds nothing).
func scaled(m, bound ir.Expr) ir.Expr {
	return &ir.Select{C: &ir.Binary{Op: ir.OpEq, L: bound, R: num(0), T: lang.Bool}, A: num(0), B: mul(abs(m), bound), T: lang.F64}
}

// propagate is |d|·E, 0 where either is (an infinite derivative at an
// exact value, or an infinite bound through a flat function: exp of a
// mask's -inf adds nothing).
func propagate(d, bound ir.Expr) ir.Expr {
	zero := &ir.Binary{Op: ir.OpOr, T: lang.Bool,
		L: &ir.Binary{Op: ir.OpEq, L: bound, R: num(0), T: lang.Bool},
		R: &ir.Binary{Op: ir.OpEq, L: d, R: num(0), T: lang.Bool}}
	return &ir.Select{C: zero, A: num(0), B: mul(abs(d), bound), T: lang.F64}
}

// reduce bounds a reduction of n terms in any order.
func (b *bounder) reduce(r *ir.Reduce) ir.Expr {
	n := int64(1)
	for _, v := range r.Vars {
		c, ok := v.Extent.IsConst()
		if !ok {
			fail("a reduction over %s of symbolic extent", v.Name)
		}
		n *= c
	}
	t := r.Body
	et := b.bound(t)
	w := b.unit(r.T)
	over := func(kind ir.Reducer, body ir.Expr) ir.Expr {
		return &ir.Reduce{Kind: kind, Vars: r.Vars, Body: body, T: lang.F64}
	}
	switch r.Kind {
	case ir.Sum:
		return over(ir.Sum, add(add(et, charge(additions(n-1)*w, t)), b.factorRounding(r)))
	case ir.Max, ir.Min:
		return over(ir.Max, et)
	}
	// A product: Π(|t| + U·E(t)) − Π|t| bounds the propagated errors
	// (in double, with room to spare for U·E), and the n-1
	// multiplications round.
	prod := over(ir.Prod, abs(t))
	spread := div(sub(over(ir.Prod, add(abs(t), mul(num(U), et))), prod), num(U))
	return add(spread, mul(num(additions(n-1)*w), prod))
}

// factorRounding is what rounding a contraction's factors costs where a
// tensor-core form may run it (lang/precision.Mode.FactorRounding and
// FactorUnderflow): each factor off by that unit, their product
// (ir.Product, through the casts around it, as the GEMM description
// reads it) by twice it, and each factor by the absolute underflow,
// which the other factor scales. Zero for other sums and in modes that
// use the factors as they are.
func (b *bounder) factorRounding(r *ir.Reduce) ir.Expr {
	fu, uf := b.mode.FactorRounding(), b.mode.FactorUnderflow()
	if fu == 0 || !ir.IsContraction(r) {
		return num(0)
	}
	m := ir.Product(r)
	e := charge(2*fu/U, m)
	if uf > 0 {
		e = add(e, add(charge(uf/U, m.L), charge(uf/U, m.R)))
	}
	return e
}

func num(x float64) ir.Expr { return &ir.Const{T: lang.F64, Float: x} }

func abs(e ir.Expr) ir.Expr { return call("abs", e) }

func call(fn string, args ...ir.Expr) ir.Expr { return &ir.Call{Fn: fn, Args: args, T: lang.F64} }

func add(a, b ir.Expr) ir.Expr { return &ir.Binary{Op: ir.OpAdd, L: a, R: b, T: lang.F64} }

func sub(a, b ir.Expr) ir.Expr { return &ir.Binary{Op: ir.OpSub, L: a, R: b, T: lang.F64} }

func mul(a, b ir.Expr) ir.Expr { return &ir.Binary{Op: ir.OpMul, L: a, R: b, T: lang.F64} }

func div(a, b ir.Expr) ir.Expr { return &ir.Binary{Op: ir.OpDiv, L: a, R: b, T: lang.F64} }
