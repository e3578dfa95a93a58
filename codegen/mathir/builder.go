package mathir

import (
	"math"

	"github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"
)

// fnb builds the body of one function: b is the block instructions go
// to. Its methods are named after the Go operators they stand for, so
// that a body reads like the Go code it follows; every float operation
// is one IEEE double operation, rounded as Go rounds it.
type fnb struct {
	l *Lib
	f *ir.Func
	b *ir.Block
}

// Bit patterns of doubles (Go's math/bits.go).
const (
	signBit  = -1 << 63                // the sign bit as an int64
	fracMask = 1<<52 - 1               // the fraction field
	expMask  = 0x7FF                   // the exponent field, shifted down by 52
	bias     = 1023                    // the exponent bias
	infBits  = 0x7FF0000000000000      // +Inf
	oneBits  = 0x3FF0000000000000      // 1.0
	halfBits = 0x3FE0000000000000      // 0.5
	nanBits  = 0x7FF8000000000001      // Go's NaN()
	twoTo53  = 1 << 53                 // 2**53 as an exact float constant
	twoTo63  = 1 << 63                 // 2**63 as an exact float constant
	smallest = 2.2250738585072014e-308 // the smallest normal double
)

// k is the double constant v.
func (g *fnb) k(v float64) value.Value { return constant.NewFloat(types.Double, v) }

// i is the i64 constant v.
func (g *fnb) i(v int64) value.Value { return constant.NewInt(types.I64, v) }

// nan is Go's NaN (math.NaN's bits, which llir cannot print as a double).
func (g *fnb) nan() value.Value { return g.fromBits(g.i(nanBits)) }

func (g *fnb) inf(sign int) value.Value { return g.k(math.Inf(sign)) }

func (g *fnb) add(x, y value.Value) value.Value { return g.b.NewFAdd(x, y) }
func (g *fnb) sub(x, y value.Value) value.Value { return g.b.NewFSub(x, y) }
func (g *fnb) mul(x, y value.Value) value.Value { return g.b.NewFMul(x, y) }
func (g *fnb) div(x, y value.Value) value.Value { return g.b.NewFDiv(x, y) }
func (g *fnb) neg(x value.Value) value.Value    { return g.b.NewFNeg(x) }

// Comparisons as in Go: ordered, except != which holds for NaN.
func (g *fnb) lt(x, y value.Value) value.Value { return g.b.NewFCmp(enum.FPredOLT, x, y) }
func (g *fnb) le(x, y value.Value) value.Value { return g.b.NewFCmp(enum.FPredOLE, x, y) }
func (g *fnb) gt(x, y value.Value) value.Value { return g.b.NewFCmp(enum.FPredOGT, x, y) }
func (g *fnb) ge(x, y value.Value) value.Value { return g.b.NewFCmp(enum.FPredOGE, x, y) }
func (g *fnb) eq(x, y value.Value) value.Value { return g.b.NewFCmp(enum.FPredOEQ, x, y) }
func (g *fnb) ne(x, y value.Value) value.Value { return g.b.NewFCmp(enum.FPredUNE, x, y) }

func (g *fnb) isNaN(x value.Value) value.Value { return g.b.NewFCmp(enum.FPredUNO, x, x) }

// isInf is math.IsInf(x, sign).
func (g *fnb) isInf(x value.Value, sign int) value.Value {
	if sign == 0 {
		return g.eq(g.fabs(x), g.inf(1))
	}
	return g.eq(x, g.inf(sign))
}

// signbit is math.Signbit(x).
func (g *fnb) signbit(x value.Value) value.Value { return g.islt(g.bits(x), g.i(0)) }

// Booleans (i1).
func (g *fnb) and(x, y value.Value) value.Value { return g.b.NewAnd(x, y) }
func (g *fnb) or(x, y value.Value) value.Value  { return g.b.NewOr(x, y) }
func (g *fnb) not(x value.Value) value.Value {
	return g.b.NewXor(x, constant.NewBool(true))
}

// sel is cond ? x : y.
func (g *fnb) sel(cond, x, y value.Value) value.Value { return g.b.NewSelect(cond, x, y) }

// Integers (i64).
func (g *fnb) bits(x value.Value) value.Value     { return g.b.NewBitCast(x, types.I64) }
func (g *fnb) fromBits(x value.Value) value.Value { return g.b.NewBitCast(x, types.Double) }
func (g *fnb) iadd(x, y value.Value) value.Value  { return g.b.NewAdd(x, y) }
func (g *fnb) isub(x, y value.Value) value.Value  { return g.b.NewSub(x, y) }
func (g *fnb) iand(x, y value.Value) value.Value  { return g.b.NewAnd(x, y) }
func (g *fnb) ior(x, y value.Value) value.Value   { return g.b.NewOr(x, y) }
func (g *fnb) ixor(x, y value.Value) value.Value  { return g.b.NewXor(x, y) }

// Shifts: the amount must be below 64 (LLVM gives poison beyond, where
// Go gives 0 or -1; callers mask or select).
func (g *fnb) shl(x, n value.Value) value.Value  { return g.b.NewShl(x, n) }
func (g *fnb) lshr(x, n value.Value) value.Value { return g.b.NewLShr(x, n) }
func (g *fnb) ashr(x, n value.Value) value.Value { return g.b.NewAShr(x, n) }

func (g *fnb) ieq(x, y value.Value) value.Value  { return g.b.NewICmp(enum.IPredEQ, x, y) }
func (g *fnb) ine(x, y value.Value) value.Value  { return g.b.NewICmp(enum.IPredNE, x, y) }
func (g *fnb) islt(x, y value.Value) value.Value { return g.b.NewICmp(enum.IPredSLT, x, y) }
func (g *fnb) isle(x, y value.Value) value.Value { return g.b.NewICmp(enum.IPredSLE, x, y) }
func (g *fnb) isgt(x, y value.Value) value.Value { return g.b.NewICmp(enum.IPredSGT, x, y) }
func (g *fnb) isge(x, y value.Value) value.Value { return g.b.NewICmp(enum.IPredSGE, x, y) }
func (g *fnb) iult(x, y value.Value) value.Value { return g.b.NewICmp(enum.IPredULT, x, y) }

// float is float64(n) for an i64 n.
func (g *fnb) float(n value.Value) value.Value { return g.b.NewSIToFP(n, types.Double) }

// int is int64(x) for an x already known to be an integer in range
// (fptosi is poison outside, so callers clamp first).
func (g *fnb) int(x value.Value) value.Value { return g.b.NewFPToSI(x, types.I64) }

// Intrinsics: single instructions on sm_80 and on x86-64 with SSE4.1.
func (g *fnb) sqrt(x value.Value) value.Value  { return g.intrinsic("sqrt", x) }
func (g *fnb) fabs(x value.Value) value.Value  { return g.intrinsic("fabs", x) }
func (g *fnb) floor(x value.Value) value.Value { return g.intrinsic("floor", x) }
func (g *fnb) ceil(x value.Value) value.Value  { return g.intrinsic("ceil", x) }
func (g *fnb) trunc(x value.Value) value.Value { return g.intrinsic("trunc", x) }

// rint rounds to the nearest integer, ties to even (the default
// rounding mode of both targets).
func (g *fnb) rint(x value.Value) value.Value { return g.intrinsic("rint", x) }

// copysign is math.Copysign(x, y).
func (g *fnb) copysign(x, y value.Value) value.Value { return g.intrinsic("copysign", x, y) }

func (g *fnb) intrinsic(name string, args ...value.Value) value.Value {
	return g.b.NewCall(g.l.intrinsic(name, len(args)), args...)
}

// call calls the library's function or helper name, defining it first.
func (g *fnb) call(name string, args ...value.Value) value.Value {
	return g.b.NewCall(g.l.define(name), args...)
}

// horner evaluates ((c[0]*z + c[1])*z + c[2])... in this order, which is
// also Go's c[n] + z*(c[n-1] + z*(...)) bit for bit (+ and * commute
// exactly). A leading coefficient 1 stands for a polynomial written
// (z + c[1])*z + ...: llc folds the exact multiplication by one.
func (g *fnb) horner(z value.Value, c ...float64) value.Value {
	p := g.k(c[0])
	for _, ci := range c[1:] {
		p = g.add(g.mul(p, z), g.k(ci))
	}
	return p
}

// block starts a new block in the function.
func (g *fnb) block() *ir.Block { return g.f.NewBlock("") }

// ifElse evaluates then where cond holds and els elsewhere, each in its
// own block, and returns the result of the one that ran. Used where a
// path is expensive (a call to exp, a loop); cheap alternatives are
// computed both and chosen with sel, which keeps GPU threads together.
func (g *fnb) ifElse(cond value.Value, then, els func() value.Value) value.Value {
	one := func(f func() value.Value) func() []value.Value {
		return func() []value.Value { return []value.Value{f()} }
	}
	return g.ifElseN(cond, one(then), one(els))[0]
}

// ifElseN is ifElse for branches with several results.
func (g *fnb) ifElseN(cond value.Value, then, els func() []value.Value) []value.Value {
	tb, eb, done := g.block(), g.block(), g.block()
	g.b.NewCondBr(cond, tb, eb)
	g.b = tb
	tv := then()
	tEnd := g.b
	g.b.NewBr(done)
	g.b = eb
	ev := els()
	eEnd := g.b
	g.b.NewBr(done)
	g.b = done
	out := make([]value.Value, len(tv))
	for i := range tv {
		out[i] = done.NewPhi(ir.NewIncoming(tv[i], tEnd), ir.NewIncoming(ev[i], eEnd))
	}
	return out
}

// when is cond ? then() : otherwise, running then only where cond holds.
func (g *fnb) when(cond value.Value, then func() value.Value, otherwise value.Value) value.Value {
	return g.ifElse(cond, then, func() value.Value { return otherwise })
}

// choose takes cond, value, cond, value, ..., default and returns the
// value of the first condition that holds, else the default: Go's
// switch with cheap cases, as a chain of sel.
func (g *fnb) choose(cv ...value.Value) value.Value {
	r := cv[len(cv)-1]
	for i := len(cv) - 3; i >= 0; i -= 2 {
		r = g.sel(cv[i], cv[i+1], r)
	}
	return r
}
