package mathir

import "github.com/llir/llvm/ir/value"

// Coefficients of log's and log1p's polynomial in s**2 (FreeBSD's
// e_log.c), shared by both.
const (
	ln2Hi = 6.93147180369123816490e-01 // 0x3fe62e42fee00000
	ln2Lo = 1.90821492927058770002e-10 // 0x3dea39ef35793c76
	lg1   = 6.666666666666735130e-01   // 0x3FE5555555555593
	lg2   = 3.999999999940941908e-01   // 0x3FD999999997FA04
	lg3   = 2.857142874366239149e-01   // 0x3FD2492494229359
	lg4   = 2.222219843214978396e-01   // 0x3FCC71C51D8E78AF
	lg5   = 1.818357216161805012e-01   // 0x3FC7466496CB03DE
	lg6   = 1.531383769920937332e-01   // 0x3FC39A09D078C69F
	lg7   = 1.479819860511658591e-01   // 0x3FC2F112DF3E5244
)

// log is math.Log as it runs on amd64 (log_amd64.s): x = 2**k * f1 with
// f1 in [√2/2, √2), f = f1-1, s = f/(2+f), and log(1+f) = f - hfsq +
// s*(hfsq+R(s)). Like Go there, a subnormal x is taken apart without
// normalizing (its exponent read as -1022), so log of a subnormal is
// about -709 rather than down to -744.
func log(g *fnb, x value.Value) value.Value {
	const hSqrt2 = 7.07106781186547524401e-01 // √2/2
	bx := g.bits(x)
	f1 := g.fromBits(g.ior(g.iand(bx, g.i(fracMask)), g.i(halfBits)))
	k := g.float(g.isub(g.exponent(bx), g.i(bias-1)))
	small := g.le(f1, g.k(hSqrt2)) // CMPSD's "not less than", operands as in the asm
	k = g.sub(k, g.sel(small, g.k(1), g.k(0)))
	f1 = g.mul(f1, g.sel(small, g.k(2), g.k(1)))
	f := g.sub(f1, g.k(1))
	s := g.div(f, g.add(g.k(2), f))
	s2 := g.mul(s, s)
	s4 := g.mul(s2, s2)
	t1 := g.mul(s2, g.horner(s4, lg7, lg5, lg3, lg1))
	t2 := g.mul(s4, g.horner(s4, lg6, lg4, lg2))
	R := g.add(t1, t2)
	hfsq := g.mul(g.mul(g.k(0.5), f), f)
	r := g.sub(g.mul(k, g.k(ln2Hi)), g.sub(g.sub(hfsq, g.add(g.mul(s, g.add(hfsq, R)), g.mul(k, g.k(ln2Lo)))), f))
	return g.choose(
		g.ieq(g.iand(bx, g.i(^signBit)), g.i(0)), g.inf(-1),
		g.islt(bx, g.i(0)), g.nan(),
		g.isge(bx, g.i(infBits)), x,
		r)
}

// log1p is math.Log1p (FreeBSD's s_log1p.c): log's algorithm on 1+x
// with the rounding error of 1+x carried as a correction c, and short
// forms near zero. A helper: asinh, acosh and atanh use it.
func log1p(g *fnb, x value.Value) value.Value {
	const (
		sqrt2M1     = 4.142135623730950488017e-01  // √2-1
		sqrt2HalfM1 = -2.928932188134524755992e-01 // √2/2-1
		small       = 1.0 / (1 << 29)
		tiny        = 1.0 / (1 << 54)
		sqrt2Frac   = 0x0006a09e667f3bcd // the fraction bits of √2
	)
	absx := g.fabs(x)
	// k = 0: f is x itself, for √2/2-1 < x < √2-1.
	k0 := g.and(g.lt(absx, g.k(sqrt2M1)), g.gt(x, g.k(sqrt2HalfM1)))

	// Otherwise u = 1+x (x itself from 2**53 on, where 1+x is x) and
	// c = the rounding error of 1+x divided by u.
	big := g.ge(absx, g.k(twoTo53))
	u := g.sel(big, x, g.add(g.k(1), x))
	iu := g.bits(u)
	k := g.isub(g.lshr(iu, g.i(52)), g.i(bias))
	c := g.sel(g.isgt(k, g.i(0)), g.sub(g.k(1), g.sub(u, x)), g.sub(x, g.sub(u, g.k(1))))
	c = g.sel(big, g.k(0), g.div(c, u))
	iu = g.iand(iu, g.i(fracMask))
	low := g.islt(iu, g.i(sqrt2Frac))
	u = g.fromBits(g.ior(iu, g.sel(low, g.i(oneBits), g.i(halfBits))))
	k = g.sel(low, k, g.iadd(k, g.i(1)))
	iu = g.sel(low, iu, g.lshr(g.isub(g.i(1<<52), iu), g.i(2)))

	f := g.sel(k0, x, g.sub(u, g.k(1)))
	k = g.sel(k0, g.i(0), k)
	c = g.sel(k0, g.k(0), c)
	iu = g.sel(k0, g.i(1), iu)
	fk := g.float(k)
	kIs0 := g.ieq(k, g.i(0))
	hfsq := g.mul(g.mul(g.k(0.5), f), f)

	// iu == 0: |f| < 2**-20, no division.
	rShort := g.mul(hfsq, g.sub(g.k(1), g.mul(g.k(0.66666666666666666), f)))
	short := g.choose(
		g.and(g.eq(f, g.k(0)), kIs0), g.k(0),
		g.eq(f, g.k(0)), g.add(g.mul(fk, g.k(ln2Hi)), g.add(c, g.mul(fk, g.k(ln2Lo)))),
		kIs0, g.sub(f, rShort),
		g.sub(g.mul(fk, g.k(ln2Hi)), g.sub(g.sub(rShort, g.add(g.mul(fk, g.k(ln2Lo)), c)), f)))

	s := g.div(f, g.add(g.k(2), f))
	z := g.mul(s, s)
	R := g.mul(z, g.horner(z, lg7, lg6, lg5, lg4, lg3, lg2, lg1))
	sR := g.mul(s, g.add(hfsq, R))
	long := g.sel(kIs0,
		g.sub(f, g.sub(hfsq, sR)),
		g.sub(g.mul(fk, g.k(ln2Hi)), g.sub(g.sub(hfsq, g.add(sR, g.add(g.mul(fk, g.k(ln2Lo)), c))), f)))

	return g.choose(
		g.or(g.lt(x, g.k(-1)), g.isNaN(x)), g.nan(),
		g.eq(x, g.k(-1)), g.inf(-1),
		g.isInf(x, 1), g.inf(1),
		g.lt(absx, g.k(tiny)), x,
		g.lt(absx, g.k(small)), g.sub(x, g.mul(g.mul(x, x), g.k(0.5))),
		g.ieq(iu, g.i(0)), short,
		long)
}
