package emit

import (
	"github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"
)

// The 16-bit float conversions, in integer arithmetic so that both
// flavours compute them alike and no target library is needed. They
// follow lang.FloatToF16, lang.F16ToFloat, lang.FloatToBF16 and
// lang.BF16ToFloat bit for bit.

type helperKind uint8

const (
	floatToF16 helperKind = iota
	f16ToDouble
	floatToBF16
	bf16ToDouble
)

var helperNames = [...]string{"tofuc.f16.from_float", "tofuc.f16.to_double", "tofuc.bf16.from_float", "tofuc.bf16.to_double"}

// helper returns the module's definition of a conversion helper.
func (m *Module) helper(h helperKind) *ir.Func {
	name := helperNames[h]
	if d, ok := m.decls[name]; ok {
		return d
	}
	var fn *ir.Func
	switch h {
	case floatToF16, floatToBF16:
		fn = m.M.NewFunc(name, types.I16, ir.NewParam("x", types.Float))
	default:
		fn = m.M.NewFunc(name, types.Double, ir.NewParam("h", types.I16))
	}
	fn.Linkage = enum.LinkageInternal
	fn.FuncAttrs = append(fn.FuncAttrs, enum.FuncAttrNoUnwind, enum.FuncAttrReadNone, enum.FuncAttrAlwaysInline)
	m.decls[name] = fn
	b := fn.NewBlock("entry")
	x := fn.Params[0]
	switch h {
	case floatToF16:
		b.NewRet(f16FromFloat(b, x))
	case f16ToDouble:
		b.NewRet(f16ToDoubleValue(b, x))
	case floatToBF16:
		b.NewRet(bf16FromFloat(b, x))
	case bf16ToDouble:
		bits := b.NewShl(b.NewZExt(x, types.I32), i32(16))
		b.NewRet(b.NewFPExt(b.NewBitCast(bits, types.Float), types.Double))
	}
	return fn
}

// F16Bits rounds the float x to f16 (to nearest even, as
// lang.FloatToF16), as the i16 of its bits, in integer arithmetic that
// every target and the emulator compute alike.
func (m *Module) F16Bits(b *ir.Block, x value.Value) value.Value {
	return b.NewCall(m.helper(floatToF16), x)
}

func c32(n int64) *constant.Int { return constant.NewInt(types.I32, n) }

func f16FromFloat(b *ir.Block, x value.Value) value.Value {
	bits := b.NewBitCast(x, types.I32)
	sign := b.NewAnd(b.NewLShr(bits, c32(16)), c32(0x8000))
	exp := b.NewAnd(b.NewLShr(bits, c32(23)), c32(0xff))
	mant := b.NewAnd(bits, c32(0x7fffff))
	e := b.NewSub(exp, c32(127))
	// Infinity or NaN.
	nanOrInf := b.NewSelect(b.NewICmp(enum.IPredNE, mant, c32(0)), c32(0x7e00), c32(0x7c00))
	// Normal half: round the 13 dropped mantissa bits to nearest even.
	m := b.NewLShr(mant, c32(13))
	rest := b.NewAnd(mant, c32(0x1fff))
	normal := b.NewOr(b.NewShl(b.NewAdd(e, c32(15)), c32(10)), m)
	up := b.NewOr(b.NewICmp(enum.IPredUGT, rest, c32(0x1000)),
		b.NewAnd(b.NewICmp(enum.IPredEQ, rest, c32(0x1000)), b.NewICmp(enum.IPredNE, b.NewAnd(m, c32(1)), c32(0))))
	normal2 := b.NewAdd(normal, b.NewZExt(up, types.I32))
	// Subnormal half: shift the full mantissa by 14 to 24 places.
	full := b.NewOr(mant, c32(0x800000))
	var shift value.Value = b.NewSub(c32(-1), e) // -14 - e + 13
	shift = b.NewSelect(b.NewICmp(enum.IPredSGT, shift, c32(31)), c32(31), shift)
	shift = b.NewSelect(b.NewICmp(enum.IPredSLT, shift, c32(1)), c32(1), shift)
	h := b.NewLShr(full, shift)
	sub := b.NewAnd(full, b.NewSub(b.NewShl(c32(1), shift), c32(1)))
	half := b.NewShl(c32(1), b.NewSub(shift, c32(1)))
	up2 := b.NewOr(b.NewICmp(enum.IPredUGT, sub, half),
		b.NewAnd(b.NewICmp(enum.IPredEQ, sub, half), b.NewICmp(enum.IPredNE, b.NewAnd(h, c32(1)), c32(0))))
	subnormal := b.NewAdd(h, b.NewZExt(up2, types.I32))
	var v value.Value = c32(0) // underflow to a signed zero
	v = b.NewSelect(b.NewICmp(enum.IPredSGE, e, c32(-25)), subnormal, v)
	v = b.NewSelect(b.NewICmp(enum.IPredSGE, e, c32(-14)), normal2, v)
	v = b.NewSelect(b.NewICmp(enum.IPredSGT, e, c32(15)), c32(0x7c00), v)
	v = b.NewSelect(b.NewICmp(enum.IPredEQ, exp, c32(0xff)), nanOrInf, v)
	return b.NewTrunc(b.NewOr(sign, v), types.I16)
}

func f16ToDoubleValue(b *ir.Block, h value.Value) value.Value {
	x := b.NewZExt(h, types.I64)
	sign := b.NewShl(b.NewAnd(x, i64(0x8000)), i64(48))
	exp := b.NewAnd(b.NewLShr(x, i64(10)), i64(0x1f))
	mant := b.NewAnd(x, i64(0x3ff))
	normal := b.NewOr(b.NewShl(b.NewAdd(exp, i64(1023-15)), i64(52)), b.NewShl(mant, i64(42)))
	special := b.NewOr(i64(0x7ff0000000000000), b.NewShl(mant, i64(42))) // ±Inf or NaN
	sub := b.NewBitCast(b.NewFMul(b.NewUIToFP(mant, types.Double), f64(0x1p-24)), types.I64)
	var mag value.Value = normal
	mag = b.NewSelect(b.NewICmp(enum.IPredEQ, exp, i64(0)), sub, mag)
	mag = b.NewSelect(b.NewICmp(enum.IPredEQ, exp, i64(0x1f)), special, mag)
	return b.NewBitCast(b.NewOr(sign, mag), types.Double)
}

func bf16FromFloat(b *ir.Block, x value.Value) value.Value {
	bits := b.NewBitCast(x, types.I32)
	nan := b.NewICmp(enum.IPredUGT, b.NewAnd(bits, c32(0x7fffffff)), c32(0x7f800000))
	quiet := b.NewOr(b.NewLShr(bits, c32(16)), c32(0x40))
	round := b.NewAdd(c32(0x7fff), b.NewAnd(b.NewLShr(bits, c32(16)), c32(1)))
	rounded := b.NewLShr(b.NewAdd(bits, round), c32(16))
	return b.NewTrunc(b.NewSelect(nan, quiet, rounded), types.I16)
}
