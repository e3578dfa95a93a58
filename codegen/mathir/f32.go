package mathir

import (
	"fmt"
	"math"

	"github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"tofuc/lang/precision"
)

// The f32 library: functions of float for the precision modes that
// compute in f32 (docs/precision.md), each within the ulps of the
// correctly rounded result that lang/precision.F32ULPs states for it
// (accuracy_test.go checks). A function without an f32 form computes in
// double, its argument widened and its result rounded once.

// unary32 and binary32 are the defs of f32 functions of one and two
// arguments.
func unary32(body func(g *fnb, x value.Value) value.Value) def {
	return def{params: []types.Type{types.Float}, ret: types.Float, body: func(g *fnb, a []value.Value) value.Value { return body(g, a[0]) }}
}

func binary32(body func(g *fnb, x, y value.Value) value.Value) def {
	return def{params: []types.Type{types.Float, types.Float}, ret: types.Float, body: func(g *fnb, a []value.Value) value.Value { return body(g, a[0], a[1]) }}
}

// f32defs are the functions the f32 library has, by name (filled in
// init: bodies call other functions through it).
var f32defs map[string]def

func init() {
	f32defs = map[string]def{
		"exp":     unary32(expf),
		"sigmoid": unary32(sigmoidf),
		"tanh":    unary32(tanhf),
		"log":     unary32(logf),
		"erf":     unary32(erff),
		// Correctly rounded, as the double form rounded to float is
		// (for sqrt and the division, double rounding is innocuous:
		// 53 ≥ 2·24 + 2), bit for bit: the f32 forms only spare the
		// conversions.
		"abs":        unary32(func(g *fnb, x value.Value) value.Value { return g.intrinsicf("fabs", x) }),
		"sqrt":       unary32(func(g *fnb, x value.Value) value.Value { return g.intrinsicf("sqrt", x) }),
		"floor":      unary32(func(g *fnb, x value.Value) value.Value { return g.intrinsicf("floor", x) }),
		"ceil":       unary32(func(g *fnb, x value.Value) value.Value { return g.intrinsicf("ceil", x) }),
		"round":      unary32(func(g *fnb, x value.Value) value.Value { return g.intrinsicf("rint", x) }),
		"reciprocal": unary32(func(g *fnb, x value.Value) value.Value { return g.b.NewFDiv(kf(1), x) }),
		"sign":       unary32(signf),
		"max":        binary32(maxf),
		"min":        binary32(minf),
		"rsqrt":      unary32(rsqrtf),
	}
}

// Func32 returns the module's internal function `float
// @tofuc.math.NAME.f32(float[, float])`, defined on first use, and
// false where the f32 library has no form of name.
func (l *Lib) Func32(name string) (*ir.Func, bool) {
	def, ok := f32defs[name]
	if !ok {
		return nil, false
	}
	if _, stated := precision.F32ULPs[name]; !stated {
		panic(fmt.Sprintf("mathir: the f32 %s states no accuracy", name))
	}
	full := Prefix + name + ".f32"
	if f := l.lookup(full); f != nil {
		return f, true
	}
	params := make([]*ir.Param, len(def.params))
	args := make([]value.Value, len(def.params))
	for i, t := range def.params {
		params[i] = ir.NewParam(fmt.Sprintf("a%d", i), t)
		args[i] = params[i]
	}
	f := l.m.NewFunc(full, def.ret, params...)
	f.Linkage = enum.LinkageInternal
	f.FuncAttrs = append([]ir.FuncAttribute(nil), attrs...)
	l.funcs[full] = f
	g := &fnb{l: l, f: f}
	g.b = f.NewBlock("")
	g.b.NewRet(def.body(g, args))
	return f, true
}

// kf is the float constant v, which must be an f32.
func kf(v float64) value.Value {
	if float64(float32(v)) != v {
		panic(fmt.Sprintf("mathir: %v is not an f32", v))
	}
	return constant.NewFloat(types.Float, v)
}

// intrinsicf calls llvm.NAME.f32.
func (g *fnb) intrinsicf(name string, args ...value.Value) value.Value {
	full := "llvm." + name + ".f32"
	f := g.l.lookup(full)
	if f == nil {
		var params []*ir.Param
		for range args {
			params = append(params, ir.NewParam("", types.Float))
		}
		f = g.l.m.NewFunc(full, types.Float, params...)
		f.FuncAttrs = []ir.FuncAttribute{enum.FuncAttrNoUnwind, enum.FuncAttrReadNone}
		g.l.funcs[full] = f
	}
	return g.b.NewCall(f, args...)
}

// pow2f is 2**n as a float for an i32 n in [-126, 127].
func (g *fnb) pow2f(n value.Value) value.Value {
	return g.b.NewBitCast(g.b.NewShl(g.b.NewAdd(n, constant.NewInt(types.I32, 127)), constant.NewInt(types.I32, 23)), types.Float)
}

// expf is e**x in f32 (Moshier's Cephes expf): x = k·ln2 + r with k =
// floor(x·log2(e) + 1/2) and ln2 in two parts (the first 10 bits, so
// that k times it is exact), e**r = 1 + r + r²·P(r) with P of degree 5
// on |r| ≤ ln2/2, scaled by 2**k in two multiplications (so that a
// subnormal result is reached without 2**k leaving the exponents).
// +Inf above 88.72, 0 below -103.28, NaN for NaN.
func expf(g *fnb, x value.Value) value.Value {
	const (
		log2e  = 1.44269504088896341
		ln2Hi  = 0.693359375
		ln2Lo  = -2.12194440e-4
		maxLog = 88.72283905206835
		minLog = -103.278929903431851103
	)
	b := g.b
	// Clamped above (and NaN made maxLog) so that k's conversion to an
	// integer is defined; the results out of range are chosen below.
	// Below minLog (a mask's -Inf) e**0 is computed instead of a clamp
	// to minLog, whose scaling would make a subnormal, which a CPU
	// multiplies in a microcode assist (a causal softmax's
	// exponentials took 4× as long in f32 as in double).
	var xc value.Value = b.NewCall(g.l.intrinsicOf("minnum", types.Float), x, kf(float64(float32(maxLog))))
	xc = b.NewSelect(b.NewFCmp(enum.FPredOLT, x, kf(float64(float32(minLog)))), kf(0), xc)
	k := g.intrinsicf("floor", b.NewFAdd(b.NewFMul(xc, kf(float64(float32(log2e)))), kf(0.5)))
	r := b.NewFSub(xc, b.NewFMul(k, kf(ln2Hi)))
	r = b.NewFSub(r, b.NewFMul(k, kf(float64(float32(ln2Lo)))))
	z := b.NewFMul(r, r)
	p := kf(float64(float32(1.9875691500e-4)))
	for _, c := range []float64{1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1} {
		p = b.NewFAdd(b.NewFMul(p, r), kf(float64(float32(c))))
	}
	e := b.NewFAdd(b.NewFAdd(b.NewFMul(p, z), r), kf(1))
	n := b.NewFPToSI(k, types.I32)
	half := b.NewAShr(n, constant.NewInt(types.I32, 1))
	scaled := b.NewFMul(b.NewFMul(e, g.pow2f(half)), g.pow2f(b.NewSub(n, half)))
	inf := constant.NewFloat(types.Float, math.Inf(1))
	out := b.NewSelect(b.NewFCmp(enum.FPredOGT, x, kf(float64(float32(maxLog)))), inf, scaled)
	out = b.NewSelect(b.NewFCmp(enum.FPredOLT, x, kf(float64(float32(minLog)))), kf(0), out)
	return b.NewSelect(b.NewFCmp(enum.FPredUNO, x, x), x, out)
}

// sigmoidf is 1/(1 + e**-x) in f32, as e**x/(1 + e**x) for negative x:
// e**-|x| never overflows, so that a large negative x gives its
// subnormal result, not 0 (down to -103.28, where expf gives 0: an ulp
// from the smallest subnormal).
func sigmoidf(g *fnb, x value.Value) value.Value {
	b := g.b
	e := b.NewCall(g.l.mustFunc32("exp"), b.NewFNeg(g.intrinsicf("fabs", x)))
	num := b.NewSelect(b.NewFCmp(enum.FPredOLT, x, kf(0)), e, kf(1))
	return b.NewFDiv(num, b.NewFAdd(kf(1), e))
}

// mustFunc32 is Func32 for a function the library has.
func (l *Lib) mustFunc32(name string) *ir.Func {
	f, _ := l.Func32(name)
	return f
}

// intrinsicOf returns the declaration of llvm.NAME.T (f32 or f64) of two
// arguments of type t.
func (l *Lib) intrinsicOf(name string, t types.Type) *ir.Func {
	suffix := ".f64"
	if t.Equal(types.Float) {
		suffix = ".f32"
	}
	full := "llvm." + name + suffix
	if f := l.lookup(full); f != nil {
		return f
	}
	f := l.m.NewFunc(full, t, ir.NewParam("", t), ir.NewParam("", t))
	f.FuncAttrs = []ir.FuncAttribute{enum.FuncAttrNoUnwind, enum.FuncAttrReadNone}
	l.funcs[full] = f
	return f
}

// hornerf evaluates ((c[0]·z + c[1])·z + c[2])... in f32.
func (g *fnb) hornerf(z value.Value, c ...float64) value.Value {
	p := kf(float64(float32(c[0])))
	for _, ci := range c[1:] {
		p = g.b.NewFAdd(g.b.NewFMul(p, z), kf(float64(float32(ci))))
	}
	return p
}

// tanhf is tanh in f32 (Cephes' tanhf): x + x³·P(x²) below |x| = 0.625,
// else 1 - 2/(e**2|x| + 1) with x's sign (1 once e**2|x| overflows).
func tanhf(g *fnb, x value.Value) value.Value {
	b := g.b
	ax := g.intrinsicf("fabs", x)
	s := b.NewCall(g.l.mustFunc32("exp"), b.NewFMul(ax, kf(2)))
	large := g.intrinsicf("copysign", b.NewFSub(kf(1), b.NewFDiv(kf(2), b.NewFAdd(s, kf(1)))), x)
	z := b.NewFMul(x, x)
	p := g.hornerf(z, -5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1, -3.33332819422e-1)
	// tanh is odd: copysign keeps tanh(-0) = -0, which x + x³·P(x²)
	// rounds to +0.
	small := g.intrinsicf("copysign", b.NewFAdd(b.NewFMul(b.NewFMul(p, z), x), x), x)
	return b.NewSelect(b.NewFCmp(enum.FPredOLT, ax, kf(0.625)), small, large)
}

// logf is the natural logarithm in f32 (Cephes' logf): x = m·2**e with m
// in [√½, √2), log(1 + (m-1)) by a polynomial of degree 9, and e·ln2 in
// two parts. -Inf at ±0, NaN below 0 and for NaN, +Inf at +Inf; a
// subnormal x is scaled by 2**23 first.
func logf(g *fnb, x value.Value) value.Value {
	b := g.b
	i32 := func(v int64) value.Value { return constant.NewInt(types.I32, v) }
	sub := b.NewFCmp(enum.FPredOLT, g.intrinsicf("fabs", x), kf(0x1p-126))
	xs := b.NewSelect(sub, b.NewFMul(x, kf(0x1p23)), x)
	bits := b.NewBitCast(xs, types.I32)
	var e value.Value = b.NewSub(b.NewAnd(b.NewLShr(bits, i32(23)), i32(0xff)), i32(126))
	e = b.NewSelect(sub, b.NewSub(e, i32(23)), e)
	m := b.NewBitCast(b.NewOr(b.NewAnd(bits, i32(0x807fffff)), i32(0x3f000000)), types.Float) // in [0.5, 1)
	low := b.NewFCmp(enum.FPredOLT, m, kf(float64(float32(0.707106781186547524))))
	e = b.NewSelect(low, b.NewSub(e, i32(1)), e)
	f := b.NewSelect(low, b.NewFSub(b.NewFAdd(m, m), kf(1)), b.NewFSub(m, kf(1)))
	fe := b.NewSIToFP(e, types.Float)
	z := b.NewFMul(f, f)
	p := g.hornerf(f, 7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1, 1.4249322787e-1,
		-1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1)
	var y value.Value = b.NewFMul(b.NewFMul(p, f), z)
	y = b.NewFAdd(y, b.NewFMul(fe, kf(float64(float32(-2.12194440e-4)))))
	y = b.NewFSub(y, b.NewFMul(z, kf(0.5)))
	var out value.Value = b.NewFAdd(b.NewFAdd(f, y), b.NewFMul(fe, kf(0.693359375)))
	out = b.NewSelect(b.NewFCmp(enum.FPredOEQ, x, constant.NewFloat(types.Float, math.Inf(1))), x, out)
	out = b.NewSelect(b.NewFCmp(enum.FPredOEQ, x, kf(0)), constant.NewFloat(types.Float, math.Inf(-1)), out)
	nan := b.NewFCmp(enum.FPredULT, x, kf(0)) // below 0, or NaN
	return b.NewSelect(nan, constant.NewFloat(types.Float, math.NaN()), out)
}

// erff is erf in f32 (Cephes' erff): x·T(x²) below |x| = 1, else
// 1 - erfc(|x|) with x's sign, erfc(x) = e**-x²/x · P(1/x²) below 2 and
// R(1/x²) above (1 once e**-x² underflows).
func erff(g *fnb, x value.Value) value.Value {
	b := g.b
	ax := g.intrinsicf("fabs", x)
	z := b.NewFMul(x, x)
	small := b.NewFMul(x, g.hornerf(z, 7.853861353153693e-5, -8.010193625184903e-4, 5.188327685732524e-3,
		-2.685381193529856e-2, 1.128358514861418e-1, -3.761262582423300e-1, 1.128379165726710e+0))
	e := b.NewCall(g.l.mustFunc32("exp"), b.NewFNeg(z))
	q := b.NewFDiv(kf(1), ax)
	y := b.NewFMul(q, q)
	p := g.hornerf(y, 2.326819970068386e-2, -1.387039388740657e-1, 3.687424674597105e-1, -5.824733027278666e-1,
		6.210004621745983e-1, -4.944515323274145e-1, 3.404879937665872e-1, -2.741127028184656e-1, 5.638259427386472e-1)
	r := g.hornerf(y, -1.047766399936249e+1, 1.297719955372516e+1, -7.495518717768503e+0, 2.921019019210786e+0,
		-1.015265279202700e+0, 4.218463358204948e-1, -2.820767439740514e-1, 5.641895067754075e-1)
	poly := b.NewSelect(b.NewFCmp(enum.FPredOLT, ax, kf(2)), p, r)
	erfc := b.NewFMul(b.NewFMul(e, q), poly)
	large := g.intrinsicf("copysign", b.NewFSub(kf(1), erfc), x)
	return b.NewSelect(b.NewFCmp(enum.FPredOLT, ax, kf(1)), small, large)
}

// signf is the interpreter's fsign in f32: ±1 by the sign of x, x
// itself for ±0 and NaN.
func signf(g *fnb, x value.Value) value.Value {
	b := g.b
	neg := b.NewSelect(b.NewFCmp(enum.FPredOLT, x, kf(0)), kf(-1), x)
	return b.NewSelect(b.NewFCmp(enum.FPredOGT, x, kf(0)), kf(1), neg)
}

// maxf is math.Max in f32: +Inf wins over NaN, NaN over numbers, +0
// over -0 (of two equal values, the AND of their bits).
func maxf(g *fnb, x, y value.Value) value.Value {
	return g.extremum(x, y, enum.FPredOGT, math.Inf(1), func(a, b value.Value) value.Value { return g.b.NewAnd(a, b) })
}

// minf is math.Min in f32: -Inf wins over NaN, NaN over numbers, -0
// over +0 (the OR of their bits).
func minf(g *fnb, x, y value.Value) value.Value {
	return g.extremum(x, y, enum.FPredOLT, math.Inf(-1), func(a, b value.Value) value.Value { return g.b.NewOr(a, b) })
}

// extremum is x where x is before y in the order of pred, else y; the
// infinity inf wherever either is it, NaN where either is NaN, and the
// bits of two equal values (±0) combined by same. Selects only, so that
// its loops vectorise.
func (g *fnb) extremum(x, y value.Value, pred enum.FPred, inf float64, same func(a, b value.Value) value.Value) value.Value {
	b := g.b
	r := b.NewSelect(b.NewFCmp(pred, x, y), x, y)
	bits := same(b.NewBitCast(x, types.I32), b.NewBitCast(y, types.I32))
	r = b.NewSelect(b.NewFCmp(enum.FPredOEQ, x, y), b.NewBitCast(bits, types.Float), r)
	r = b.NewSelect(b.NewFCmp(enum.FPredUNO, x, y), constant.NewFloat(types.Float, math.NaN()), r)
	infinity := constant.NewFloat(types.Float, inf)
	either := b.NewOr(b.NewFCmp(enum.FPredOEQ, x, infinity), b.NewFCmp(enum.FPredOEQ, y, infinity))
	return b.NewSelect(either, infinity, r)
}

// rsqrtf is 1/sqrt(x) in f32: two correctly rounded operations.
func rsqrtf(g *fnb, x value.Value) value.Value {
	return g.b.NewFDiv(kf(1), g.intrinsicf("sqrt", x))
}
