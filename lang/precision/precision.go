// Package precision names the arithmetic a compiled plan computes in
// (--precision, docs/precision.md): exact, as the interpreter does, or
// in f32 as every framework does, with tensor-core forms for
// contractions in tf32, bf16 and f16. The mode is recorded in the plan
// and in the compile cache's key; codegen reads it where it chooses the
// type of a value, the tests where they choose a tolerance
// (runtime/tensor.ToleranceOf).
package precision

import (
	"fmt"
	"strings"
)

// Mode is a precision mode.
type Mode uint8

// The modes, in the order --precision lists them.
const (
	// Exact computes float expressions in double and rounds them only
	// where they are stored or cast, as the interpreter does: a kernel
	// differs from it only in the order of a reduction's operations.
	Exact Mode = iota
	// F32 computes f32, f16 and bf16 expressions in f32 (f64 ones in
	// double) and sums contractions in f32, fused multiply-adds allowed:
	// PyTorch's "highest".
	F32
	// TF32 is F32 with contractions' factors rounded to TF32 where a
	// tensor-core form runs them (PyTorch's "high"); elsewhere as F32.
	TF32
	// BF16 and F16 are F32 with contractions' factors in that 16-bit
	// format where a tensor-core form runs them (autocast); elsewhere
	// as F32.
	BF16
	F16
)

var names = [...]string{Exact: "exact", F32: "f32", TF32: "tf32", BF16: "bf16", F16: "f16"}

// Default is the mode of a compile that names none.
const Default = Exact

// String is the mode's name on the command line and in a plan.
func (m Mode) String() string {
	if int(m) < len(names) {
		return names[m]
	}
	return fmt.Sprintf("precision(%d)", uint8(m))
}

// Names lists the modes' names.
func Names() []string { return names[:] }

// Parse reads a mode's name; "" is Default.
func Parse(s string) (Mode, error) {
	if s == "" {
		return Default, nil
	}
	for m, n := range names {
		if n == s {
			return Mode(m), nil
		}
	}
	return 0, fmt.Errorf("unknown precision %q (expected %s)", s, strings.Join(names[:], ", "))
}

// InF32 reports whether f32, f16 and bf16 values are computed in f32
// (every mode but Exact).
func (m Mode) InF32() bool { return m != Exact }

// FactorRounding is the unit roundoff of a contraction's factors where
// a tensor-core form computes it in mode m: 2⁻¹¹ for TF32 and F16 (10
// bits of fraction, rounded to nearest), 2⁻⁸ for BF16 (7 bits), 0 where
// the factors are used as they are (exact, f32).
func (m Mode) FactorRounding() float64 {
	switch m {
	case TF32, F16:
		return 0x1p-11
	case BF16:
		return 0x1p-8
	}
	return 0
}

// FactorUnderflow is the absolute error of rounding a contraction's
// factor below the normal range of mode m's format: 2⁻²⁵ for F16 (half
// its subnormals' spacing; its normals end at 2⁻¹⁴), 0 for the formats
// with f32's exponent range. Above the range (65504 in F16) a factor
// becomes infinite, which no bound covers: a compiled f16 kernel stops
// with an error there.
func (m Mode) FactorUnderflow() float64 {
	if m == F16 {
		return 0x1p-25
	}
	return 0
}

// LossScale is the default static loss scale of a training graph
// compiled in mode m: 2¹⁰ in F16, whose factors below 2⁻¹⁴ lose bits
// and below 2⁻²⁵ vanish (small gradients, as contraction factors of the
// backward pass, are scaled up into its range), 1 in the others, whose
// formats have f32's exponent range.
func (m Mode) LossScale() float64 {
	if m == F16 {
		return 0x1p10
	}
	return 1
}

// MarshalText and UnmarshalText write and read the mode by name (plans,
// the compile cache's key).
func (m Mode) MarshalText() ([]byte, error) {
	if int(m) >= len(names) {
		return nil, fmt.Errorf("no precision mode %d", uint8(m))
	}
	return []byte(m.String()), nil
}

func (m *Mode) UnmarshalText(b []byte) error {
	v, err := Parse(string(b))
	if err != nil {
		return err
	}
	*m = v
	return nil
}

// F32ULPs states, for each math function of the f32 library
// (codegen/mathir's Func32, used in the modes that compute in f32), how
// many units in the last place of f32 its result may lie from the
// correctly rounded value; its tests check it over a sweep of every
// binade. A function not listed computes in double and rounds once (at
// most half an ulp, and a hair). The rounding bounds of the tolerance
// policy (analysis/rounding) read it.
var F32ULPs = map[string]float64{
	"exp":     2,
	"sigmoid": 3,
	"tanh":    3,
	"log":     2,
	"erf":     3,
	"rsqrt":   1,
	// Correctly rounded.
	"abs": 0, "sqrt": 0, "floor": 0, "ceil": 0, "round": 0,
	"reciprocal": 0, "sign": 0, "max": 0, "min": 0,
}
