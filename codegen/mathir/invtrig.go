package mathir

import (
	"math"

	"github.com/llir/llvm/ir/value"
)

// satan is Go's satan (Cephes atan.c) for x >= 0: xatan of x itself up
// to 0.66, of (x-1)/(x+1) around π/4 up to tan(3π/8), of 1/x beyond; one
// polynomial evaluation on the chosen argument.
func (g *fnb) satan(x value.Value) value.Value {
	const (
		moreBits = 6.123233995736765886130e-17 // π/2 = PIO2 + moreBits
		tan3pio8 = 2.41421356237309504880      // tan(3π/8)
	)
	low := g.le(x, g.k(0.66))
	high := g.gt(x, g.k(tan3pio8))
	arg := g.choose(low, x, high, g.div(g.k(1), x), g.div(g.sub(x, g.k(1)), g.add(x, g.k(1))))
	t := g.xatan(arg)
	return g.choose(
		low, t,
		high, g.add(g.sub(g.k(math.Pi/2), t), g.k(moreBits)),
		g.add(g.add(g.k(math.Pi/4), t), g.k(0.5*moreBits)))
}

// xatan is atan on [0, 0.66]: x + x·z·P(z)/Q(z) with z = x².
func (g *fnb) xatan(x value.Value) value.Value {
	z := g.mul(x, x)
	p := g.horner(z, -8.750608600031904122785e-01, -1.615753718733365076637e+01, -7.500855792314704667340e+01,
		-1.228866684490136173410e+02, -6.485021904942025371773e+01)
	q := g.horner(z, 1, 2.485846490142306297962e+01, 1.650270098316988542046e+02, 4.328810604912902668951e+02,
		4.853903996359136964868e+02, 1.945506571482613964425e+02)
	z = g.div(g.mul(z, p), q)
	return g.add(g.mul(x, z), x)
}

// atan is math.Atan: satan of |x| with x's sign, x itself for ±0.
func atan(g *fnb, x value.Value) value.Value {
	t := g.satan(g.fabs(x))
	return g.choose(
		g.eq(x, g.k(0)), x,
		g.gt(x, g.k(0)), t,
		g.neg(t))
}

// asin is math.Asin: satan(|x|/√(1-x²)), or π/2 - satan(√(1-x²)/|x|)
// beyond 0.7; x's sign; NaN beyond 1.
func asin(g *fnb, x value.Value) value.Value {
	z := g.fabs(x)
	root := g.sqrt(g.sub(g.k(1), g.mul(z, z)))
	high := g.gt(z, g.k(0.7))
	t := g.satan(g.sel(high, g.div(root, z), g.div(z, root)))
	t = g.sel(high, g.sub(g.k(math.Pi/2), t), t)
	return g.choose(
		g.eq(x, g.k(0)), x,
		g.gt(z, g.k(1)), g.nan(),
		g.copysignOf(t, x))
}

// acos is math.Acos: π/2 - asin(x).
func acos(g *fnb, x value.Value) value.Value {
	return g.sub(g.k(math.Pi/2), g.call("asin", x))
}

// atan2 is math.Atan2: atan(y/x) moved to x's half plane, with Go's
// special cases for NaN, zeros and infinities, signed zeros included.
func atan2(g *fnb, y, x value.Value) value.Value {
	q := g.call("atan", g.div(y, x))
	q = g.choose(
		g.not(g.lt(x, g.k(0))), q,
		g.le(q, g.k(0)), g.add(q, g.k(math.Pi)),
		g.sub(q, g.k(math.Pi)))
	xPos := g.and(g.ge(x, g.k(0)), g.not(g.signbit(x)))
	xInf := g.isInf(x, 0)
	yInf := g.isInf(y, 0)
	return g.choose(
		g.or(g.isNaN(y), g.isNaN(x)), g.nan(),
		g.eq(y, g.k(0)), g.copysign(g.sel(xPos, g.k(0), g.k(math.Pi)), y),
		g.eq(x, g.k(0)), g.copysign(g.k(math.Pi/2), y),
		g.and(xInf, g.gt(x, g.k(0))), g.copysign(g.sel(yInf, g.k(math.Pi/4), g.k(0)), y),
		xInf, g.copysign(g.sel(yInf, g.k(3*math.Pi/4), g.k(math.Pi)), y),
		yInf, g.copysign(g.k(math.Pi/2), y),
		q)
}
