package ir

import "math"

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
