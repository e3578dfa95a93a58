package emit

import (
	"math"

	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"tofuc/lang"
)

// convert converts x, a domain value of dtype from, to dtype to as the
// interpreter's Cast does; floats are rounded to a float target only when
// round is set (an explicit cast or a store).
// In f32 (Module.domain) a value is rounded to f32 where it enters it.
func (f *fn) convert(x value.Value, from, to lang.DType, round bool) value.Value {
	switch {
	case to.IsFloat() && from.IsFloat():
		x = f.toDomain(x, to)
		if !round || to == lang.F64 {
			return x
		}
		return f.roundFloat(x, to)
	case to.IsFloat():
		var v value.Value
		if from == lang.U64 {
			v = f.b.NewUIToFP(x, f.m.domain(to))
		} else {
			v = f.b.NewSIToFP(x, f.m.domain(to))
		}
		if round && to != lang.F64 {
			v = f.roundFloat(v, to)
		}
		return v
	case from.IsFloat():
		return f.floatToInt(f.widen(x), to)
	}
	if to == from || to == lang.I64 || to == lang.U64 || from == lang.Bool || intFits(from, to) {
		return x
	}
	return f.wrap(x, to)
}

// intFits reports whether every value of integer dtype a is a value of b.
func intFits(a, b lang.DType) bool {
	if b == lang.Bool {
		return false
	}
	if a.IsSigned() == b.IsSigned() {
		return a.Bits() <= b.Bits()
	}
	return !a.IsSigned() && a.Bits() < b.Bits()
}

// truth is x of dtype t as a bool: 1 when x != 0 (a NaN is true).
func (f *fn) truth(x value.Value, t lang.DType) value.Value {
	return f.convert(x, t, lang.Bool, false)
}

// wrap wraps an i64 to the width of integer dtype t, as C does; a bool
// becomes x != 0.
func (f *fn) wrap(x value.Value, t lang.DType) value.Value {
	switch t {
	case lang.I8, lang.I16, lang.I32:
		return f.b.NewSExt(f.b.NewTrunc(x, types.NewInt(uint64(t.Bits()))), types.I64)
	case lang.U8, lang.U16, lang.U32:
		return f.b.NewZExt(f.b.NewTrunc(x, types.NewInt(uint64(t.Bits()))), types.I64)
	case lang.Bool:
		return f.b.NewZExt(f.b.NewICmp(enum.IPredNE, x, i64(0)), types.I64)
	}
	return x
}

// floatToInt converts a double as tensor.FloatToInt does: a bool is
// x != 0; NaN and ±Inf give 0; otherwise truncation toward zero, wrapped
// to the dtype modulo 2^64 for magnitudes of 2^63 and more.
func (f *fn) floatToInt(x value.Value, to lang.DType) value.Value {
	if to == lang.Bool {
		return f.b.NewZExt(f.b.NewFCmp(enum.FPredUNE, x, f64(0)), types.I64)
	}
	abs := f.mathCall("abs", x)
	small := f.b.NewFCmp(enum.FPredOLT, abs, f64(0x1p63))
	v := f.branch(small, func() value.Value { return f.b.NewFPToSI(x, types.I64) }, func() value.Value {
		// |x| >= 2^63 is an integer: reduce it modulo 2^64 into
		// [-2^63, 2^63); NaN and ±Inf give 0.
		m := f.mathCall("fmod", x, f64(0x1p64))
		m = f.b.NewSelect(f.b.NewFCmp(enum.FPredOLT, m, f64(0)), f.b.NewFAdd(m, f64(0x1p64)), m)
		m = f.b.NewSelect(f.b.NewFCmp(enum.FPredOGE, m, f64(0x1p63)), f.b.NewFSub(m, f64(0x1p64)), m)
		finite := f.b.NewFCmp(enum.FPredOLT, abs, f64(math.Inf(1)))
		return f.b.NewFPToSI(f.b.NewSelect(finite, m, f64(0)), types.I64)
	})
	return f.wrap(v, to)
}

// toDomain converts a float value to the domain of float dtype t
// (Module.domain), rounding a double to f32.
func (f *fn) toDomain(x value.Value, t lang.DType) value.Value {
	want := f.m.domain(t)
	switch {
	case x.Type().Equal(want):
		return x
	case want.Equal(types.Float):
		return f.b.NewFPTrunc(x, types.Float)
	}
	return f.widen(x)
}

// widen is a float value as a double (a constant stays a constant).
func (f *fn) widen(x value.Value) value.Value {
	if !x.Type().Equal(types.Float) {
		return x
	}
	if c, ok := x.(*constant.Float); ok {
		if c.NaN {
			return f64(math.NaN())
		}
		v, _ := c.X.Float64()
		return f64(v)
	}
	return f.b.NewFPExt(x, types.Double)
}

// roundFloat rounds a value in the domain of t to the precision of float
// dtype t, as DType.RoundFloat does (f16 and bf16 through f32).
func (f *fn) roundFloat(x value.Value, t lang.DType) value.Value {
	inF32 := x.Type().Equal(types.Float)
	single := x
	if !inF32 {
		single = f.b.NewFPTrunc(x, types.Float)
	}
	var wide value.Value
	switch t {
	case lang.F32:
		if inF32 {
			return x
		}
		return f.b.NewFPExt(single, types.Double)
	case lang.F16:
		wide = f.b.NewCall(f.m.helper(f16ToDouble), f.b.NewCall(f.m.helper(floatToF16), single))
	case lang.BF16:
		wide = f.b.NewCall(f.m.helper(bf16ToDouble), f.b.NewCall(f.m.helper(floatToBF16), single))
	default:
		fail("cannot round to %s", t)
	}
	if inF32 {
		return f.b.NewFPTrunc(wide, types.Float) // exact: a 16-bit float is an f32
	}
	return wide
}

// load reads element off of buffer p (stored as dtype dt) into the domain.
func (f *fn) load(p value.Value, off value.Value, dt lang.DType) value.Value {
	st := storageType(dt)
	x := f.b.NewLoad(st, f.b.NewGetElementPtr(st, p, off))
	switch dt {
	case lang.F32:
		return f.toDomain(x, dt)
	case lang.F64, lang.I64, lang.U64:
		return x
	case lang.F16:
		return f.toDomain(f.b.NewCall(f.m.helper(f16ToDouble), x), dt)
	case lang.BF16:
		return f.toDomain(f.b.NewCall(f.m.helper(bf16ToDouble), x), dt)
	case lang.I8, lang.I16, lang.I32:
		return f.b.NewSExt(x, types.I64)
	}
	return f.b.NewZExt(x, types.I64) // unsigned and bool
}

// store writes domain value x, already rounded or wrapped to dtype dt, to
// element off of buffer p.
func (f *fn) store(p value.Value, off value.Value, x value.Value, dt lang.DType) {
	st := storageType(dt)
	var v value.Value
	switch dt {
	case lang.F32:
		v = f.single(x)
	case lang.F64, lang.I64, lang.U64:
		v = x
	case lang.F16:
		v = f.b.NewCall(f.m.helper(floatToF16), f.single(x))
	case lang.BF16:
		v = f.b.NewCall(f.m.helper(floatToBF16), f.single(x))
	default:
		v = f.b.NewTrunc(x, st)
	}
	f.b.NewStore(v, f.b.NewGetElementPtr(st, p, off))
}

// single is a float value as an f32, rounding a double.
func (f *fn) single(x value.Value) value.Value {
	if x.Type().Equal(types.Float) {
		return x
	}
	return f.b.NewFPTrunc(x, types.Float)
}
