package mathir

import "github.com/llir/llvm/ir/value"

// Go's math.Exp on amd64 rounds its polynomial with fused multiply-adds
// when the CPU has them (exp_amd64.s, useFMA). llvm.fma is no single
// instruction on every host the library targets (and becomes a libm
// call where it is not), so fma emulates it with double operations only:
// the product exactly as two doubles (Dekker's product with Veltkamp's
// splitting), the sum as three, and one final rounding that is correct
// because the middle sum is rounded to odd (Boldo and Melquiond,
// "Emulation of FMA and correctly rounded sums: proved algorithms using
// rounding to odd", IEEE Trans. Computers 57(4), 2008). It is exact when
// nothing underflows or overflows, which holds where exp uses it.

// split is a double and its two halves of 26 and 27 bits, whose
// pairwise products are exact.
type split struct{ v, hi, lo value.Value }

// split cuts x in halves (Veltkamp; |x| below 2**996).
func (g *fnb) split(x value.Value) split {
	t := g.mul(g.k(1<<27+1), x)
	hi := g.sub(t, g.sub(t, x))
	return split{v: x, hi: hi, lo: g.sub(x, hi)}
}

// twoSum returns s = x+y rounded and the error x+y-s, exactly (Knuth).
func (g *fnb) twoSum(x, y value.Value) (s, e value.Value) {
	s = g.add(x, y)
	yy := g.sub(s, x)
	e = g.add(g.sub(x, g.sub(s, yy)), g.sub(y, yy))
	return s, e
}

// roundOdd returns s+e (s = s+e rounded to nearest, e its error) rounded
// to odd: s itself when exact or odd, else its neighbour towards e.
func (g *fnb) roundOdd(s, e value.Value) value.Value {
	sb := g.bits(s)
	inexactEven := g.and(g.ne(e, g.k(0)), g.ieq(g.iand(sb, g.i(1)), g.i(0)))
	sameSign := g.isge(g.ixor(g.bits(e), sb), g.i(0))
	step := g.sel(sameSign, g.i(1), g.i(-1)) // away from zero when e has s's sign
	return g.fromBits(g.iadd(sb, g.sel(inexactEven, step, g.i(0))))
}

// fma returns a*b + c rounded once.
func (g *fnb) fma(a, b split, c value.Value) value.Value {
	if g.l.NativeFMA {
		return g.b.NewCall(g.l.intrinsic("fma", 3), a.v, b.v, c)
	}
	p := g.mul(a.v, b.v)
	perr := g.add(g.add(g.add(g.sub(g.mul(a.hi, b.hi), p), g.mul(a.hi, b.lo)), g.mul(a.lo, b.hi)), g.mul(a.lo, b.lo))
	th, tl := g.twoSum(c, p)
	return g.add(th, g.roundOdd(g.twoSum(tl, perr)))
}
