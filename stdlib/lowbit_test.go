package stdlib_test

import (
	"math"

	"tofuc/lang"
	"tofuc/lang/ir"
)

// Interpreter cases for stdlib/lowbit.tdl, by hand: ties, subnormals,
// saturation and overflow of float8 formats, e8m0's rounding modes, and
// blocks of a blocked quantization's scale.
// frontend/onnx's narrow_test.go checks every format against its table of
// values.

func init() {
	f32, s := lang.F32, func(d ...int) []int { return d }
	e5m2 := map[string]ir.AttrValue{"mantissa": aInt(2), "min_exponent": aInt(-14), "max_finite": aFloat(57344),
		"saturate": aBool(false), "overflow": aFloat(math.Inf(1))}
	tiny := math.Ldexp(1, -9) // E4M3FN's least subnormal
	register(
		ewFixed("round_minifloat", "e4m3fn ties, subnormals, saturation", nil,
			ewT(f32, s(8), 1, 1.25, tiny, 0, 448, -448, -448, ewNaN),
			ewT(f32, s(8), 1.0625, 1.1875, tiny, tiny/2, 500, -1e9, ewNInf, ewNaN)),
		ewFixed("round_minifloat", "e5m2 overflows to inf", e5m2,
			ewT(f32, s(5), ewInf, 57344, ewNInf, 1.5, -0.25),
			ewT(f32, s(5), 61440, 60000, ewNInf, 1.4, -0.26)),
		ewFixed("round_e8m0", "up", nil, ewT(f32, s(5), 4, 4, 0.5, math.Ldexp(1, -127), math.Ldexp(1, 127)),
			ewT(f32, s(5), 3, 4, -0.3, 0, ewInf)),
		ewFixed("round_e8m0", "down", map[string]ir.AttrValue{"mode": aInt(1)}, ewT(f32, s(3), 2, 4, 0.25),
			ewT(f32, s(3), 3, 4, 0.3)),
		ewFixed("round_e8m0", "nearest, ties up, no saturation", map[string]ir.AttrValue{"mode": aInt(2), "saturate": aBool(false)},
			ewT(f32, s(4), 4, 2, 0.25, ewNaN), ewT(f32, s(4), 3, 2.9, 0.3, ewInf)),
		ewFixed("repeat_blocks", "blocks of 2 along axis 1, cut to 3", map[string]ir.AttrValue{"axis": aInt(1), "block_size": aInt(2), "n": aInt(3)},
			ewT(f32, s(2, 3), 1, 1, 2, 3, 3, 4), ewT(f32, s(2, 2), 1, 2, 3, 4)),
	)
}
