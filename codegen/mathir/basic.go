package mathir

import (
	"github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/value"
)

// sign is the interpreter's fsign: ±1 by the sign of x, x itself for
// ±0 and NaN.
func sign(g *fnb, x value.Value) value.Value {
	return g.choose(g.gt(x, g.k(0)), g.k(1), g.lt(x, g.k(0)), g.k(-1), x)
}

// max64 is math.Max: +Inf wins over NaN, NaN over numbers, +0 over -0.
func max64(g *fnb, x, y value.Value) value.Value {
	return g.choose(
		g.or(g.isInf(x, 1), g.isInf(y, 1)), g.inf(1),
		g.or(g.isNaN(x), g.isNaN(y)), g.nan(),
		g.and(g.eq(x, g.k(0)), g.eq(x, y)), g.sel(g.signbit(x), y, x),
		g.gt(x, y), x,
		y)
}

// min64 is math.Min: -Inf wins over NaN, NaN over numbers, -0 over +0.
func min64(g *fnb, x, y value.Value) value.Value {
	return g.choose(
		g.or(g.isInf(x, -1), g.isInf(y, -1)), g.inf(-1),
		g.or(g.isNaN(x), g.isNaN(y)), g.nan(),
		g.and(g.eq(x, g.k(0)), g.eq(x, y)), g.sel(g.signbit(x), x, y),
		g.lt(x, y), x,
		y)
}

// normalize is Go's: a subnormal x scaled by 2**52, and the exponent
// that undoes it.
func (g *fnb) normalize(x value.Value) (value.Value, value.Value) {
	sub := g.lt(g.fabs(x), g.k(smallest))
	return g.sel(sub, g.mul(x, g.k(1<<52)), x), g.sel(sub, g.i(-52), g.i(0))
}

// exponent is the biased exponent field of a double's bits.
func (g *fnb) exponent(bits value.Value) value.Value {
	return g.iand(g.lshr(bits, g.i(52)), g.i(expMask))
}

// withExponent replaces the exponent field of bits by e (already biased).
func (g *fnb) withExponent(bits, e value.Value) value.Value {
	return g.ior(g.iand(bits, g.i(^(expMask<<52))), g.shl(e, g.i(52)))
}

// frexp is math.Frexp: x = frac * 2**exp with |frac| in [0.5, 1); ±0,
// ±Inf and NaN give themselves and 0.
func (g *fnb) frexp(x value.Value) (frac, exp value.Value) {
	xn, e := g.normalize(x)
	bx := g.bits(xn)
	exp = g.iadd(e, g.isub(g.exponent(bx), g.i(bias-1)))
	frac = g.fromBits(g.withExponent(bx, g.i(bias-1)))
	special := g.or(g.eq(x, g.k(0)), g.or(g.isInf(x, 0), g.isNaN(x)))
	return g.sel(special, x, frac), g.sel(special, g.i(0), exp)
}

// ldexp is math.Ldexp: frac * 2**exp, rounded once where it is
// subnormal, ±0 below and ±Inf above the range.
func (g *fnb) ldexp(frac, exp value.Value) value.Value {
	fn, e := g.normalize(frac)
	bx := g.bits(fn)
	exp = g.iadd(g.iadd(exp, e), g.isub(g.exponent(bx), g.i(bias)))
	den := g.islt(exp, g.i(-1022))
	m := g.sel(den, g.k(1.0/(1<<53)), g.k(1))
	biased := g.iadd(exp, g.sel(den, g.i(53+bias), g.i(bias)))
	r := g.mul(m, g.fromBits(g.withExponent(bx, biased)))
	return g.choose(
		g.or(g.eq(frac, g.k(0)), g.or(g.isInf(frac, 0), g.isNaN(frac))), frac,
		g.islt(exp, g.i(-1075)), g.copysign(g.k(0), frac),
		g.isgt(exp, g.i(1023)), g.sel(g.lt(frac, g.k(0)), g.inf(-1), g.inf(1)),
		r)
}

// fmod is math.Mod: x - n*y for the integer n that leaves the sign of x
// and a magnitude below |y|, exactly, by Go's loop that subtracts y
// scaled to the remainder's exponent (at most ~2100 rounds).
func fmod(g *fnb, x, y value.Value) value.Value {
	invalid := g.or(g.or(g.eq(y, g.k(0)), g.isInf(x, 0)), g.or(g.isNaN(x), g.isNaN(y)))
	return g.ifElse(invalid, g.nan, func() value.Value {
		y := g.fabs(y)
		yfr, yexp := g.frexp(y)
		neg := g.lt(x, g.k(0))
		r0 := g.sel(neg, g.neg(x), x)
		entry, head, body, exit := g.b, g.block(), g.block(), g.block()
		g.b.NewBr(head)

		g.b = head
		r := head.NewPhi(ir.NewIncoming(r0, entry))
		g.b.NewCondBr(g.ge(r, y), body, exit)

		g.b = body
		rfr, rexp := g.frexp(r)
		rexp = g.sel(g.lt(rfr, yfr), g.isub(rexp, g.i(1)), rexp)
		next := g.sub(r, g.ldexp(y, g.isub(rexp, yexp)))
		r.Incs = append(r.Incs, ir.NewIncoming(next, g.b))
		g.b.NewBr(head)

		g.b = exit
		return g.sel(neg, g.neg(r), r)
	})
}
