package mathir

import "github.com/llir/llvm/ir/value"

// exp is math.Exp as it runs on amd64 with FMA (exp_amd64.s, after
// Shibata's SLEEF): x = k*ln2 + r with k = round(x*log2(e)) and ln2 in
// two parts, a Taylor polynomial of degree 8 in r/16, squared back four
// times as expm1 (e**2s - 1 = (e**s - 1)*(e**s - 1 + 2)), then scaled by
// 2**k in one or two multiplications. Its quirks are Go's: +Inf from
// x > 709.78 and wherever k reaches 1024 (x above about 709.44), 0 from
// k below -1075.
func exp(g *fnb, x value.Value) value.Value {
	const (
		log2e    = 1.4426950408889634073599246810018920
		ln2U     = 0.69314718055966295651160180568695068359375 // 41 bits: k*ln2U is exact
		ln2L     = 0.28235290563031577122588448175013436025525412068e-12
		overflow = 7.09782712893384e+02
	)
	// Taylor coefficients 1/n!, highest first; the last two are 1/2 and 1.
	taylor := []float64{
		2.4801587301587301587e-5, 1.9841269841269841270e-4, 1.3888888888888888889e-3,
		8.3333333333333333333e-3, 4.1666666666666666667e-2, 1.6666666666666666667e-1,
		0.5, 1.0,
	}
	notFinite := g.isge(g.iand(g.bits(x), g.i(^signBit)), g.i(infBits))

	// k rounds x*log2(e) to nearest even (CVTSD2SL); clamped where the
	// result is 0 or Inf anyway, so that the conversion is defined.
	t := g.mul(x, g.k(log2e))
	t = g.sel(g.gt(t, g.k(-3000)), t, g.k(-3000))
	t = g.sel(g.lt(t, g.k(3000)), t, g.k(3000))
	k := g.rint(t)
	negk := g.split(g.neg(k))

	r := g.sub(x, g.mul(k, g.k(ln2U)))
	r = g.fma(negk, g.split(g.k(ln2L)), r)
	r = g.mul(r, g.k(0.0625))
	rs := g.split(r)
	p := g.k(taylor[0])
	for _, c := range taylor[1:] {
		p = g.fma(g.split(p), rs, g.k(c))
	}
	e := g.mul(r, p) // e**(r/16) - 1
	for i := 0; i < 3; i++ {
		e = g.mul(e, g.add(e, g.k(2)))
	}
	e = g.fma(g.split(e), g.split(g.add(e, g.k(2))), g.k(1)) // e**r

	// Scale by 2**k: bk is k's biased exponent; below 1 (subnormal
	// results) by 2**(k+1022) first, then by 2**-1022.
	bk := g.iadd(g.int(k), g.i(bias))
	sub := g.isle(bk, g.i(0))
	s1 := g.sel(sub, g.fromBits(g.shl(g.iadd(bk, g.i(bias-1)), g.i(52))), g.k(1))
	s2 := g.sel(sub, g.fromBits(g.i(1<<52)), g.fromBits(g.shl(bk, g.i(52))))
	scaled := g.mul(g.mul(e, s1), s2)
	return g.choose(
		notFinite, g.sel(g.isInf(x, -1), g.k(0), x),
		g.or(g.gt(x, g.k(overflow)), g.isge(bk, g.i(2*bias+1))), g.inf(1),
		g.islt(bk, g.i(-52)), g.k(0),
		scaled)
}

// sigmoid is the interpreter's 1/(1+math.Exp(-x)).
func sigmoid(g *fnb, x value.Value) value.Value {
	return g.div(g.k(1), g.add(g.k(1), g.call("exp", g.neg(x))))
}
