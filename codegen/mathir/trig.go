package mathir

import (
	"math"
	"math/big"

	"github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"
)

// Sine and cosine polynomials on [-π/4, π/4] (Cephes sin.c), highest
// degree first.
var (
	sinPoly = []float64{1.58962301576546568060e-10, -2.50507477628578072866e-8, 2.75573136213857245213e-6,
		-1.98412698295895385996e-4, 8.33333333332211858878e-3, -1.66666666666666307295e-1}
	cosPoly = []float64{-1.13585365213876817300e-11, 2.08757008419747316778e-9, -2.75573141792967388112e-7,
		2.48015872888517045348e-5, -1.38888888888730564116e-3, 4.16666666666665929218e-2}
)

// reduceThreshold is where Go switches from Cody-Waite to Payne-Hanek
// reduction (trig_reduce.go).
const reduceThreshold = 1 << 29

// octant reduces a finite or infinite x >= 0 to x = j*π/4 + z (mod 2π)
// with j in 0..7 even and |z| <= π/4, as Go's sin, cos and tan do:
// below 2**29 with π/4 in three parts (Cody-Waite), beyond by the
// trigreduce helper, on a branch. For Inf and NaN j and z are garbage
// that the callers replace.
func (g *fnb) octant(x value.Value) (j, z value.Value) {
	const (
		pi4A = 7.85398125648498535156e-1  // 0x3fe921fb40000000
		pi4B = 3.77489470793079817668e-8  // 0x3e64442d00000000
		pi4C = 2.69515142907905952645e-15 // 0x3ce8469898cc5170
	)
	small := g.lt(x, g.k(reduceThreshold))
	xs := g.sel(small, x, g.k(0)) // keeps the conversion defined
	j = g.int(g.mul(xs, g.k(4/math.Pi)))
	y := g.float(j)
	odd := g.ieq(g.iand(j, g.i(1)), g.i(1))
	j = g.iand(g.sel(odd, g.iadd(j, g.i(1)), j), g.i(7))
	y = g.sel(odd, g.add(y, g.k(1)), y)
	z = g.sub(g.sub(g.sub(xs, g.mul(y, g.k(pi4A))), g.mul(y, g.k(pi4B))), g.mul(y, g.k(pi4C)))
	huge := g.and(g.not(small), g.lt(x, g.inf(1)))
	jz := g.ifElseN(huge, func() []value.Value {
		r := g.call("trigreduce", x)
		return []value.Value{g.b.NewExtractValue(r, 0), g.b.NewExtractValue(r, 1)}
	}, func() []value.Value { return []value.Value{j, z} })
	return jz[0], jz[1]
}

// sinPolyAt is z + z³·S(z²), sin on [-π/4, π/4].
func (g *fnb) sinPolyAt(z, zz value.Value) value.Value {
	return g.add(z, g.mul(g.mul(z, zz), g.horner(zz, sinPoly...)))
}

// cosPolyAt is 1 - z²/2 + z⁴·C(z²), cos on [-π/4, π/4].
func (g *fnb) cosPolyAt(zz value.Value) value.Value {
	return g.add(g.sub(g.k(1), g.mul(g.k(0.5), zz)), g.mul(g.mul(zz, zz), g.horner(zz, cosPoly...)))
}

// sin is math.Sin: the octant of |x| picks the sine or cosine
// polynomial and the sign.
func sin(g *fnb, x value.Value) value.Value {
	j, z := g.octant(g.fabs(x))
	upper := g.isgt(j, g.i(3))
	j = g.sel(upper, g.isub(j, g.i(4)), j)
	zz := g.mul(z, z)
	y := g.sel(g.or(g.ieq(j, g.i(1)), g.ieq(j, g.i(2))), g.cosPolyAt(zz), g.sinPolyAt(z, zz))
	neg := g.b.NewXor(upper, g.lt(x, g.k(0)))
	return g.choose(
		g.or(g.eq(x, g.k(0)), g.isNaN(x)), x,
		g.isInf(x, 0), g.nan(),
		g.sel(neg, g.neg(y), y))
}

// cos is math.Cos, like sin with the octants shifted.
func cos(g *fnb, x value.Value) value.Value {
	j, z := g.octant(g.fabs(x))
	upper := g.isgt(j, g.i(3))
	j = g.sel(upper, g.isub(j, g.i(4)), j)
	neg := g.b.NewXor(upper, g.isgt(j, g.i(1)))
	zz := g.mul(z, z)
	y := g.sel(g.or(g.ieq(j, g.i(1)), g.ieq(j, g.i(2))), g.sinPolyAt(z, zz), g.cosPolyAt(zz))
	return g.sel(g.or(g.isNaN(x), g.isInf(x, 0)), g.nan(), g.sel(neg, g.neg(y), y))
}

// tan is math.Tan: z + z³·P(z²)/Q(z²) on the octant of |x| (z itself
// where z² <= 1e-14), -1/y in odd quadrants.
func tan(g *fnb, x value.Value) value.Value {
	j, z := g.octant(g.fabs(x))
	zz := g.mul(z, z)
	p := g.horner(zz, -1.30936939181383777646e4, 1.15351664838587416140e6, -1.79565251976484877988e7)
	q := g.horner(zz, 1, 1.36812963470692954678e4, -1.32089234440210967447e6, 2.50083801823357915839e7, -5.38695755929454629881e7)
	y := g.sel(g.gt(zz, g.k(1e-14)), g.add(z, g.mul(z, g.div(g.mul(zz, p), q))), z)
	y = g.sel(g.ieq(g.iand(j, g.i(2)), g.i(2)), g.div(g.k(-1), y), y)
	return g.choose(
		g.or(g.eq(x, g.k(0)), g.isNaN(x)), x,
		g.isInf(x, 0), g.nan(),
		g.copysignOf(y, x))
}

// trigReduceDef is Go's trigReduce (Payne-Hanek) for finite x >= 2**29:
// the bits of 4/π around x's exponent times x's 53-bit mantissa, in
// 64-bit integer arithmetic, give the octant j (0..7, made even) and the
// fraction, as z in [-π/4, π/4]. It returns {j, z}.
func trigReduceDef() def {
	return def{
		params: []types.Type{types.Double},
		ret:    types.NewStruct(types.I64, types.Double),
		helper: true,
		body:   func(g *fnb, a []value.Value) value.Value { return trigReduce(g, a[0]) },
	}
}

func trigReduce(g *fnb, x value.Value) value.Value {
	ix := g.bits(x)
	exp := g.isub(g.exponent(ix), g.i(bias+52))
	ix = g.ior(g.iand(ix, g.i(fracMask)), g.i(1<<52))
	digit := g.lshr(g.iadd(exp, g.i(61)), g.i(6))
	shift := g.iand(g.iadd(exp, g.i(61)), g.i(63))
	w := make([]value.Value, 4)
	for i := range w {
		w[i] = g.pi4Word(g.iadd(digit, g.i(int64(i))))
	}
	// z[i] = w[i]<<shift | w[i+1]>>(64-shift), the second part 0 when
	// shift is 0 (Go's shift by 64).
	zw := make([]value.Value, 3)
	for i := range zw {
		low := g.sel(g.ieq(shift, g.i(0)), g.i(0), g.lshr(w[i+1], g.iand(g.isub(g.i(64), shift), g.i(63))))
		zw[i] = g.ior(g.shl(w[i], shift), low)
	}
	z2hi, _ := g.mul64(zw[2], ix)
	z1hi, z1lo := g.mul64(zw[1], ix)
	z0lo := g.b.NewMul(zw[0], ix)
	lo := g.iadd(z1lo, z2hi)
	carry := g.b.NewZExt(g.iult(lo, z1lo), types.I64)
	hi := g.iadd(g.iadd(z0lo, z1hi), carry)
	j := g.lshr(hi, g.i(61))
	hi = g.ior(g.shl(hi, g.i(3)), g.lshr(lo, g.i(61)))
	// Normalize the 64-bit fraction into a double in [0, 1). hi is
	// never below 2**3: no double lies that close to a multiple of π/4
	// (the closest is about 2**-61 away), so the shifts stay below 64.
	lz1 := g.iadd(g.clz(hi), g.i(1))
	e := g.isub(g.i(bias), lz1)
	hi = g.ior(g.shl(hi, lz1), g.lshr(lo, g.iand(g.isub(g.i(64), lz1), g.i(63))))
	hi = g.ior(g.lshr(hi, g.i(64-52)), g.shl(e, g.i(52)))
	z := g.fromBits(hi)
	odd := g.ieq(g.iand(j, g.i(1)), g.i(1))
	j = g.sel(odd, g.iand(g.iadd(j, g.i(1)), g.i(7)), j)
	z = g.sel(odd, g.sub(z, g.k(1)), z)
	z = g.mul(z, g.k(math.Pi/4))
	var r value.Value = constant.NewUndef(types.NewStruct(types.I64, types.Double))
	r = g.b.NewInsertValue(r, j, 0)
	return g.b.NewInsertValue(r, z, 1)
}

// mul64 is bits.Mul64: the high and low words of x*y.
func (g *fnb) mul64(x, y value.Value) (hi, lo value.Value) {
	x2 := g.b.NewZExt(x, types.I128)
	y2 := g.b.NewZExt(y, types.I128)
	p := g.b.NewMul(x2, y2)
	hi = g.b.NewTrunc(g.b.NewLShr(p, constant.NewInt(types.I128, 64)), types.I64)
	return hi, g.b.NewMul(x, y)
}

// clz counts the leading zeros of a nonzero x by halving (llvm.ctlz is
// not among the intrinsics the library may use).
func (g *fnb) clz(x value.Value) value.Value {
	n := g.i(0)
	for _, s := range []int64{32, 16, 8, 4, 2, 1} {
		top := g.ieq(g.lshr(x, g.i(64-s)), g.i(0))
		n = g.sel(top, g.iadd(n, g.i(s)), n)
		x = g.sel(top, g.shl(x, g.i(s)), x)
	}
	return n
}

// pi4Words are the bits of 4/π: word 0 its integer part (1), word i the
// i-th 64 bits after the binary point (Go's mPi4), enough for the
// largest double's exponent.
var pi4Words = computePi4Words(20)

// computePi4Words returns n words of 4/π, computed with π from Machin's
// formula in fixed point with 128 guard bits.
func computePi4Words(n int) []uint64 {
	frac := uint(64 * (n - 1))
	prec := frac + 128
	one := new(big.Int).Lsh(big.NewInt(1), prec)
	// π = 16·atan(1/5) - 4·atan(1/239)
	pi := new(big.Int).Mul(big.NewInt(16), arctanInv(5, one))
	pi.Sub(pi, new(big.Int).Mul(big.NewInt(4), arctanInv(239, one)))
	q := new(big.Int).Lsh(big.NewInt(4), prec+frac)
	q.Quo(q, pi) // floor(4/π · 2**frac)
	words := make([]uint64, n)
	mask := new(big.Int).SetUint64(math.MaxUint64)
	for i := n - 1; i >= 0; i-- {
		words[i] = new(big.Int).And(q, mask).Uint64()
		q.Rsh(q, 64)
	}
	return words
}

// arctanInv returns atan(1/x) scaled by one, by its Taylor series.
func arctanInv(x int64, one *big.Int) *big.Int {
	sum := new(big.Int)
	xx := big.NewInt(x * x)
	term := new(big.Int).Quo(one, big.NewInt(x)) // one / x**(2k+1)
	for k := int64(0); term.Sign() != 0; k++ {
		t := new(big.Int).Quo(term, big.NewInt(2*k+1))
		if k%2 == 0 {
			sum.Add(sum, t)
		} else {
			sum.Sub(sum, t)
		}
		term.Quo(term, xx)
	}
	return sum
}

// pi4Word loads word i of 4/π from the module's constant table.
func (g *fnb) pi4Word(i value.Value) value.Value {
	tab := g.l.pi4Table()
	p := g.b.NewGetElementPtr(tab.ContentType, tab, g.i(0), i)
	return g.b.NewLoad(types.I64, p)
}

// pi4Table returns the global constant holding pi4Words, defining it
// once per module.
func (l *Lib) pi4Table() *ir.Global {
	const name = Prefix + "pi4bits"
	for _, gl := range l.m.Globals {
		if gl.Name() == name {
			return gl
		}
	}
	t := types.NewArray(uint64(len(pi4Words)), types.I64)
	elems := make([]constant.Constant, len(pi4Words))
	for i, w := range pi4Words {
		elems[i] = constant.NewInt(types.I64, int64(w))
	}
	gl := l.m.NewGlobalDef(name, constant.NewArray(t, elems...))
	gl.Linkage = enum.LinkageInternal
	gl.Immutable = true
	return gl
}
