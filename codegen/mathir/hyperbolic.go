package mathir

import (
	"math"

	"github.com/llir/llvm/ir/value"
)

// tanh is math.Tanh (Cephes): ±1 beyond 44; 1 - 2/(e**2|x| + 1) from
// 0.625; a rational function of x**2 below.
func tanh(g *fnb, x value.Value) value.Value {
	const maxLog = 8.8029691931113054295988e+01 // log(2**127)
	z := g.fabs(x)
	s := g.mul(x, x)
	rational := g.add(x, g.div(g.mul(g.mul(x, s), g.horner(s, -9.64399179425052238628e-1, -9.92877231001918586564e1, -1.61468768441708447952e3)),
		g.horner(s, 1, 1.12811678491632931402e2, 2.23548839060100448583e3, 4.84406305325125486048e3)))
	mid := g.ge(z, g.k(0.625))
	viaExp := g.when(g.and(mid, g.le(z, g.k(0.5*maxLog))), func() value.Value {
		e := g.call("exp", g.mul(g.k(2), z))
		t := g.sub(g.k(1), g.div(g.k(2), g.add(e, g.k(1))))
		return g.copysignOf(t, x)
	}, rational)
	return g.choose(
		g.gt(z, g.k(0.5*maxLog)), g.copysignOf(g.k(1), x),
		mid, viaExp,
		g.eq(x, g.k(0)), x,
		rational)
}

// copysignOf is Go's `if x < 0 { v = -v }`: v negated for negative x
// (not for -0 or NaN, unlike copysign).
func (g *fnb) copysignOf(v, x value.Value) value.Value {
	return g.sel(g.lt(x, g.k(0)), g.neg(v), v)
}

// absGo is Go's `if x < 0 { x = -x }`, which keeps -0 (unlike fabs).
func (g *fnb) absGo(x value.Value) value.Value { return g.copysignOf(x, x) }

// sinh is math.Sinh: e**|x|/2 beyond 21, (e**|x| - e**-|x|)/2 beyond
// 0.5, a rational function of x**2 below.
func sinh(g *fnb, x value.Value) value.Value {
	z := g.absGo(x)
	sq := g.mul(z, z)
	series := g.div(g.mul(g.horner(sq, -0.2630563213397497062819489e+2, -0.2894211355989563807284660366e+4,
		-0.8991272022039509355398013511e+5, -0.6307673640497716991184787251e+6), z),
		g.horner(sq, 1, -0.173678953558233699533450911e+3, 0.1521517378790019070696485176e+5, -0.6307673640497716991212077277e+6))
	r := g.when(g.gt(z, g.k(0.5)), func() value.Value {
		e := g.call("exp", z)
		return g.sel(g.gt(z, g.k(21)), g.mul(e, g.k(0.5)), g.mul(g.sub(e, g.div(g.k(1), e)), g.k(0.5)))
	}, series)
	return g.copysignOf(r, x)
}

// cosh is math.Cosh: e**|x|/2 beyond 21, else (e**|x| + e**-|x|)/2.
func cosh(g *fnb, x value.Value) value.Value {
	z := g.fabs(x)
	e := g.call("exp", z)
	return g.sel(g.gt(z, g.k(21)), g.mul(e, g.k(0.5)), g.mul(g.add(e, g.div(g.k(1), e)), g.k(0.5)))
}

// asinh is math.Asinh: log(|x|) + ln2 beyond 2**28, log(2|x| +
// 1/(√(x²+1) + |x|)) beyond 2, x below 2**-28, else log1p(|x| +
// x²/(1 + √(1+x²))); the sign of x.
func asinh(g *fnb, x value.Value) value.Value {
	const ln2 = 6.93147180559945286227e-01
	z := g.absGo(x)
	zz := g.mul(z, z)
	large := g.gt(z, g.k(1<<28))
	logArg := g.sel(large, z, g.add(g.mul(g.k(2), z), g.div(g.k(1), g.add(g.sqrt(g.add(zz, g.k(1))), z))))
	lg := g.call("log", logArg)
	lp := g.call("log1p", g.add(z, g.div(zz, g.add(g.k(1), g.sqrt(g.add(g.k(1), zz))))))
	r := g.choose(
		large, g.add(lg, g.k(ln2)),
		g.gt(z, g.k(2)), lg,
		g.lt(z, g.k(1.0/(1<<28))), z,
		lp)
	return g.sel(g.or(g.isNaN(x), g.isInf(x, 0)), x, g.copysignOf(r, x))
}

// acosh is math.Acosh: log(x) + ln2 from 2**28, log(2x - 1/(x +
// √(x²-1))) beyond 2, else log1p(t + √(2t + t²)) with t = x-1.
func acosh(g *fnb, x value.Value) value.Value {
	large := g.ge(x, g.k(1<<28))
	logArg := g.sel(large, x, g.sub(g.mul(g.k(2), x), g.div(g.k(1), g.add(x, g.sqrt(g.sub(g.mul(x, x), g.k(1)))))))
	lg := g.call("log", logArg)
	t := g.sub(x, g.k(1))
	lp := g.call("log1p", g.add(t, g.sqrt(g.add(g.mul(g.k(2), t), g.mul(t, t)))))
	return g.choose(
		g.or(g.lt(x, g.k(1)), g.isNaN(x)), g.nan(),
		g.eq(x, g.k(1)), g.k(0),
		large, g.add(lg, g.k(math.Ln2)),
		g.gt(x, g.k(2)), lg,
		lp)
}

// atanh is math.Atanh: log1p(2x + 2x²/(1-x))/2 below 0.5, log1p(2x/(1-x))/2
// from 0.5, x below 2**-28; the sign of x.
func atanh(g *fnb, x value.Value) value.Value {
	z := g.absGo(x)
	twoZ := g.add(z, z)
	oneMinus := g.sub(g.k(1), z)
	arg := g.sel(g.lt(z, g.k(0.5)), g.add(twoZ, g.div(g.mul(twoZ, z), oneMinus)), g.div(twoZ, oneMinus))
	r := g.sel(g.lt(z, g.k(1.0/(1<<28))), z, g.mul(g.k(0.5), g.call("log1p", arg)))
	return g.choose(
		g.or(g.gt(z, g.k(1)), g.isNaN(x)), g.nan(),
		g.eq(x, g.k(1)), g.inf(1),
		g.eq(x, g.k(-1)), g.inf(-1),
		g.copysignOf(r, x))
}
