package ir

import (
	"math"
	"slices"

	"tofuc/lang"
)

var unaryMath = map[string]func(float64) float64{
	"exp":        math.Exp,
	"log":        math.Log,
	"sqrt":       math.Sqrt,
	"rsqrt":      func(x float64) float64 { return 1 / math.Sqrt(x) },
	"tanh":       math.Tanh,
	"sigmoid":    func(x float64) float64 { return 1 / (1 + math.Exp(-x)) },
	"erf":        math.Erf,
	"abs":        math.Abs,
	"sin":        math.Sin,
	"cos":        math.Cos,
	"tan":        math.Tan,
	"asin":       math.Asin,
	"acos":       math.Acos,
	"atan":       math.Atan,
	"sinh":       math.Sinh,
	"cosh":       math.Cosh,
	"asinh":      math.Asinh,
	"acosh":      math.Acosh,
	"atanh":      math.Atanh,
	"floor":      math.Floor,
	"ceil":       math.Ceil,
	"round":      math.RoundToEven,
	"sign":       fsign,
	"reciprocal": func(x float64) float64 { return 1 / x },
	"isnan":      func(x float64) float64 { return boolFloat(math.IsNaN(x)) },
	"isinf":      func(x float64) float64 { return boolFloat(math.IsInf(x, 0)) },
}

var binaryMath = map[string]func(float64, float64) float64{
	"pow":   math.Pow,
	"max":   math.Max,
	"min":   math.Min,
	"atan2": math.Atan2,
}

// costlyFuncs are the math functions that are library routines of tens
// of operations a value (codegen/mathir), where the others are an
// instruction or a few.
var costlyFuncs = []string{"exp", "log", "tanh", "sigmoid", "erf", "pow", "sin", "cos", "tan", "asin", "acos", "atan",
	"sinh", "cosh", "asinh", "acosh", "atanh", "atan2"}

// CostlyFunc reports whether math function fn is a routine of tens of
// operations a value where most are one: what a row buffer keeps
// rather than computing again (analysis/schedule), what makes a kernel's
// element costly (codegen/kernel), and what the host simulator prices
// by measurement (analysis/cost).
func CostlyFunc(fn string) bool { return slices.Contains(costlyFuncs, fn) }

// CostlyFuncs lists the costly math functions (CostlyFunc).
func CostlyFuncs() []string { return slices.Clone(costlyFuncs) }

// FloatFunc returns the float64 function TDL defines for the
// element-wise math function name (MathFuncs) on floats: unary or
// binary, the other nil, both nil for an unknown name. The interpreter
// computes it; compiled code is tested against it and folds constant
// calls with it.
func FloatFunc(name string) (unary func(float64) float64, binary func(float64, float64) float64) {
	return unaryMath[name], binaryMath[name]
}

func fsign(x float64) float64 {
	switch {
	case x > 0:
		return 1
	case x < 0:
		return -1
	}
	return x // 0, -0 or NaN
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// BitFuncs lists TDL's functions on the bits of integers, with their
// arity: bitand, bitor, bitxor, bitnot, and the shifts shl and shr
// (arithmetic on a signed dtype, logical on an unsigned one); and bitcast,
// whose Call reinterprets the bits of its argument as its dtype T, of the
// same width. They are not MathFuncs: no float function computes them.
var BitFuncs = map[string]int{
	"bitand": 2, "bitor": 2, "bitxor": 2, "bitnot": 1, "shl": 2, "shr": 2, "bitcast": 1,
}

// IntBitFunc computes the bit function name (BitFuncs, not bitcast) on
// values of integer dtype t as the interpreter carries them (int64
// wrapped to t, u64 as its bit pattern): the result is wrapped to t. A
// shift by a count outside [0, width of t) shifts every bit out: 0,
// or for shr of a negative signed value -1.
func IntBitFunc(name string, t lang.DType, a, b int64) int64 {
	switch name {
	case "bitand":
		return a & b
	case "bitor":
		return a | b
	case "bitxor":
		return a ^ b
	case "bitnot":
		return t.WrapInt(^a)
	}
	n := uint64(b)
	if !t.IsSigned() && t.Bits() < 64 {
		n = uint64(t.WrapInt(b)) // a count of a narrower unsigned dtype
	}
	big := n >= uint64(t.Bits())
	switch name {
	case "shl":
		if big {
			return 0
		}
		return t.WrapInt(a << n)
	case "shr":
		if t.IsSigned() {
			if big {
				n = 63
			}
			return a >> n
		}
		if big {
			return 0
		}
		return int64(uint64(a) >> n)
	}
	panic("unknown bit function " + name)
}

// BitsOf is the bit pattern of v, a value of dtype t as the interpreter
// carries it (floats in float64, rounded to t first), zero-extended from
// t's width.
func BitsOf(t lang.DType, f float64, i int64) uint64 {
	switch t {
	case lang.F64:
		return math.Float64bits(f)
	case lang.F32:
		return uint64(math.Float32bits(float32(f)))
	case lang.F16:
		return uint64(lang.FloatToF16(f))
	case lang.BF16:
		return uint64(lang.FloatToBF16(f))
	case lang.Bool:
		if i != 0 {
			return 1
		}
		return 0
	}
	if t.Bits() == 64 {
		return uint64(i)
	}
	return uint64(i) & (1<<t.Bits() - 1)
}

// FromBits is the value of dtype t with bit pattern b (t's width): a
// float64 for a float dtype, else an int64 as the interpreter carries
// it (bool: b != 0).
func FromBits(t lang.DType, b uint64) (float64, int64) {
	switch t {
	case lang.F64:
		return math.Float64frombits(b), 0
	case lang.F32:
		return float64(math.Float32frombits(uint32(b))), 0
	case lang.F16:
		return lang.F16ToFloat(uint16(b)), 0
	case lang.BF16:
		return lang.BF16ToFloat(uint16(b)), 0
	case lang.Bool:
		if b != 0 {
			return 0, 1
		}
		return 0, 0
	}
	return 0, t.WrapInt(int64(b))
}
