package interp

import (
	"fmt"

	"tofuc/lang"
	"tofuc/lang/ir"
)

func (c *compiler) call(e *ir.Call) (code, error) {
	if _, ok := ir.BitFuncs[e.Fn]; ok {
		return c.bitCall(e)
	}
	arity, ok := ir.MathFuncs[e.Fn]
	if !ok {
		return code{}, fmt.Errorf("unknown function %s", e.Fn)
	}
	if len(e.Args) != arity {
		return code{}, fmt.Errorf("%s takes %d arguments, got %d", e.Fn, arity, len(e.Args))
	}
	args := make([]code, len(e.Args))
	p := e.Args[0].Type()
	for i, a := range e.Args {
		x, err := c.compile(a)
		if err != nil {
			return code{}, err
		}
		args[i] = x
		p = lang.Promote(p, a.Type())
	}
	if !p.IsFloat() {
		switch e.Fn {
		case "abs", "max", "min", "sign":
			return convert(code{i: intCall(e.Fn, p, args, e.Args)}, p, e.T, false), nil
		case "isnan", "isinf":
			return convert(code{i: func(*frame) int64 { return 0 }}, lang.Bool, e.T, false), nil
		}
	}
	if arity == 1 {
		fn, _ := ir.FloatFunc(e.Fn)
		x := asFloat(args[0], e.Args[0].Type())
		out := func(f *frame) float64 { return fn(x(f)) }
		if e.Fn == "isnan" || e.Fn == "isinf" {
			return convert(code{i: func(f *frame) int64 { return int64(out(f)) }}, lang.Bool, e.T, false), nil
		}
		return convert(code{f: out}, lang.F64, e.T, false), nil
	}
	_, fn := ir.FloatFunc(e.Fn)
	x, y := asFloat(args[0], e.Args[0].Type()), asFloat(args[1], e.Args[1].Type())
	return convert(code{f: func(f *frame) float64 { return fn(x(f), y(f)) }}, lang.F64, e.T, false), nil
}

// intCall computes abs, max, min or sign on integers of dtype p.
func intCall(fn string, p lang.DType, args []code, exprs []ir.Expr) iexpr {
	a := convert(args[0], exprs[0].Type(), p, false).i
	unsigned := p == lang.U64 || !p.IsSigned()
	switch fn {
	case "abs":
		return func(f *frame) int64 {
			v := a(f)
			if v < 0 && !unsigned {
				v = -v
			}
			return p.WrapInt(v)
		}
	case "sign":
		return func(f *frame) int64 {
			v := a(f)
			switch {
			case v == 0:
				return 0
			case v < 0 && !unsigned:
				return p.WrapInt(-1)
			}
			return 1
		}
	}
	b := convert(args[1], exprs[1].Type(), p, false).i
	less := func(x, y int64) bool { return x < y }
	if p == lang.U64 {
		less = func(x, y int64) bool { return uint64(x) < uint64(y) }
	}
	if fn == "max" {
		return func(f *frame) int64 {
			x, y := a(f), b(f)
			if less(x, y) {
				return y
			}
			return x
		}
	}
	return func(f *frame) int64 {
		x, y := a(f), b(f)
		if less(y, x) {
			return y
		}
		return x
	}
}

// bitCall computes a bit function (ir.BitFuncs): bitcast reads its
// argument's bits as its dtype, the others work on integers of the
// call's dtype (ir.IntBitFunc).
func (c *compiler) bitCall(e *ir.Call) (code, error) {
	if len(e.Args) != ir.BitFuncs[e.Fn] {
		return code{}, fmt.Errorf("%s takes %d arguments, got %d", e.Fn, ir.BitFuncs[e.Fn], len(e.Args))
	}
	args := make([]code, len(e.Args))
	for i, a := range e.Args {
		x, err := c.compile(a)
		if err != nil {
			return code{}, err
		}
		args[i] = x
	}
	if e.Fn == "bitcast" {
		from, to := e.Args[0].Type(), e.T
		if from.Bits() != to.Bits() {
			return code{}, fmt.Errorf("bitcast from %s to %s: the widths differ", from, to)
		}
		x := args[0]
		bits := func(f *frame) uint64 { return ir.BitsOf(from, 0, x.i(f)) }
		if from.IsFloat() {
			bits = func(f *frame) uint64 { return ir.BitsOf(from, x.f(f), 0) }
		}
		if to.IsFloat() {
			return code{f: func(f *frame) float64 { v, _ := ir.FromBits(to, bits(f)); return v }}, nil
		}
		return code{i: func(f *frame) int64 { _, v := ir.FromBits(to, bits(f)); return v }}, nil
	}
	t := e.T
	if !t.IsInt() {
		return code{}, fmt.Errorf("%s of %s: bit functions work on integers", e.Fn, t)
	}
	a := convert(args[0], e.Args[0].Type(), t, false).i
	if len(args) == 1 {
		return code{i: func(f *frame) int64 { return ir.IntBitFunc(e.Fn, t, a(f), 0) }}, nil
	}
	b := convert(args[1], e.Args[1].Type(), t, false).i
	fn := e.Fn
	return code{i: func(f *frame) int64 { return ir.IntBitFunc(fn, t, a(f), b(f)) }}, nil
}
