package lang

import (
	"math"
)

// DType is an element type.
type DType uint8

// The element types of TDL. F32 is the default.
const (
	Invalid DType = iota
	F32
	F16
	BF16
	F64
	I8
	I16
	I32
	I64
	U8
	U16
	U32
	U64
	Bool
)

var dtypeNames = [...]string{"invalid", "f32", "f16", "bf16", "f64", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "bool"}

func (d DType) String() string {
	if int(d) < len(dtypeNames) {
		return dtypeNames[d]
	}
	return "invalid"
}

// ParseDType returns the dtype named s, or Invalid.
func ParseDType(s string) DType {
	for i, n := range dtypeNames {
		if i > 0 && n == s {
			return DType(i)
		}
	}
	return Invalid
}

// DTypeNames lists every valid dtype name, for messages.
func DTypeNames() []string { return append([]string(nil), dtypeNames[1:]...) }

// IsFloat reports whether d is a floating-point type.
func (d DType) IsFloat() bool { return d == F32 || d == F16 || d == BF16 || d == F64 }

// IsInt reports whether d is an integer type (bool excluded).
func (d DType) IsInt() bool { return d >= I8 && d <= U64 }

// IsSigned reports whether d is a signed integer type.
func (d DType) IsSigned() bool { return d >= I8 && d <= I64 }

// Bits is the storage width of d.
func (d DType) Bits() int {
	switch d {
	case F16, BF16, I16, U16:
		return 16
	case F32, I32, U32:
		return 32
	case F64, I64, U64:
		return 64
	case I8, U8, Bool:
		return 8
	}
	return 0
}

// Size is the storage size of one element in bytes.
func (d DType) Size() int { return d.Bits() / 8 }

// RoundFloat rounds v to the precision of the floating dtype d.
func (d DType) RoundFloat(v float64) float64 {
	switch d {
	case F32:
		return float64(float32(v))
	case F16:
		return F16ToFloat(FloatToF16(v))
	case BF16:
		return BF16ToFloat(FloatToBF16(v))
	}
	return v
}

// WrapInt wraps v to the width of the integer dtype d, as C does.
func (d DType) WrapInt(v int64) int64 {
	switch d {
	case I8:
		return int64(int8(v))
	case I16:
		return int64(int16(v))
	case I32:
		return int64(int32(v))
	case U8:
		return int64(uint8(v))
	case U16:
		return int64(uint16(v))
	case U32:
		return int64(uint32(v))
	case Bool:
		if v != 0 {
			return 1
		}
		return 0
	}
	return v // I64; U64 is kept as its two's complement bits
}

// Promote is the dtype of a binary operation on a and b: the wider float
// wins over any integer, the wider integer over a narrower one.
func Promote(a, b DType) DType {
	if a == b {
		return a
	}
	if a.IsFloat() != b.IsFloat() {
		if a.IsFloat() {
			return a
		}
		return b
	}
	if a == Bool {
		return b
	}
	if b == Bool {
		return a
	}
	if a.Bits() != b.Bits() {
		if a.Bits() > b.Bits() {
			return a
		}
		return b
	}
	if a == F64 || b == F64 {
		return F64
	}
	if a.IsFloat() {
		return F32 // f16 with bf16
	}
	if a.IsSigned() {
		return a
	}
	return b
}

// FloatToF16 converts with round-to-nearest-even to IEEE binary16 bits.
func FloatToF16(v float64) uint16 {
	f := float32(v)
	bits := math.Float32bits(f)
	sign := uint16(bits>>16) & 0x8000
	exp := int((bits >> 23) & 0xff)
	mant := bits & 0x7fffff
	switch {
	case exp == 0xff: // inf or nan
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	case exp-127 > 15:
		return sign | 0x7c00
	case exp-127 >= -14:
		e := uint32(exp-127+15) << 10
		m := mant >> 13
		rest := mant & 0x1fff
		h := uint32(sign) | e | m
		if rest > 0x1000 || (rest == 0x1000 && m&1 == 1) {
			h++ // may carry into the exponent, which is right
		}
		return uint16(h)
	case exp-127 >= -25:
		m := mant | 0x800000
		shift := uint(-14-(exp-127)) + 13
		h := m >> shift
		rest := m & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rest > half || (rest == half && h&1 == 1) {
			h++
		}
		return sign | uint16(h)
	}
	return sign
}

// F16ToFloat converts IEEE binary16 bits to float64.
func F16ToFloat(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	exp := int(h>>10) & 0x1f
	mant := float64(h & 0x3ff)
	switch exp {
	case 0:
		return sign * mant * math.Pow(2, -24)
	case 0x1f:
		if mant != 0 {
			return math.NaN()
		}
		return math.Inf(int(sign))
	}
	return sign * (1 + mant/1024) * math.Pow(2, float64(exp-15))
}

// FloatToBF16 converts with round-to-nearest-even to bfloat16 bits.
func FloatToBF16(v float64) uint16 {
	bits := math.Float32bits(float32(v))
	if bits&0x7fffffff > 0x7f800000 {
		return uint16(bits>>16) | 0x40
	}
	round := uint32(0x7fff) + (bits>>16)&1
	return uint16((bits + round) >> 16)
}

// BF16ToFloat converts bfloat16 bits to float64.
func BF16ToFloat(h uint16) float64 {
	return float64(math.Float32frombits(uint32(h) << 16))
}
