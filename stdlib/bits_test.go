package stdlib_test

import (
	"math"

	"tofuc/lang"
	"tofuc/runtime/tensor"
)

// Interpreter cases for the bitwise operators and bit casts of
// stdlib/elementwise.tdl, against Go's own operators on typed values.

// bitsMap applies f to the broadcast integer inputs, element by element.
func bitsMap(dt lang.DType, f func(a, b int64) int64, x, y *tensor.Tensor) *tensor.Tensor {
	shape := ewBroadcastShape(x.Shape, y.Shape)
	out := tensor.New(dt, shape)
	at := func(t *tensor.Tensor, idx []int) int64 {
		flat := 0
		for d, n := range t.Shape {
			i := idx[len(idx)-len(t.Shape)+d]
			if n == 1 {
				i = 0
			}
			flat = flat*n + i
		}
		return t.I[flat]
	}
	for flat := range out.Len() {
		idx := ewUnflat(flat, shape)
		out.I[flat] = dt.WrapInt(f(at(x, idx), at(y, idx)))
	}
	return out
}

func init() {
	s := func(dims ...int) []int { return dims }
	u8a := ewI(lang.U8, s(2, 1, 3), 0, 1, 0xf0, 0xff, 0x5a, 0x81)
	u8b := ewI(lang.U8, s(4, 1), 0x0f, 0xff, 0x33, 0)
	i16a := ewI(lang.I16, s(2, 3), -1, 0, 12345, -32768, 32767, -2)
	i16b := ewI(lang.I16, s(3), 0x00ff, -256, 7)
	u64a := ewI(lang.U64, s(3, 2), -1, 0, math.MinInt64, 0x123456789abcdef, 42, -2)
	u64b := ewI(lang.U64, s(2), 0xff00ff00ff00ff, -1<<60)

	and := func(a, b int64) int64 { return a & b }
	or := func(a, b int64) int64 { return a | b }
	xor := func(a, b int64) int64 { return a ^ b }
	register(
		ewFixed("bitwise_and", "u8 broadcast [2,1,3],[4,1]", nil, bitsMap(lang.U8, and, u8a, u8b), u8a, u8b),
		ewFixed("bitwise_and", "i16 [2,3],[3]", nil, bitsMap(lang.I16, and, i16a, i16b), i16a, i16b),
		ewFixed("bitwise_and", "u64 [3,2],[2]", nil, bitsMap(lang.U64, and, u64a, u64b), u64a, u64b),
		ewFixed("bitwise_or", "u8 broadcast", nil, bitsMap(lang.U8, or, u8a, u8b), u8a, u8b),
		ewFixed("bitwise_or", "i16", nil, bitsMap(lang.I16, or, i16a, i16b), i16a, i16b),
		ewFixed("bitwise_or", "u64", nil, bitsMap(lang.U64, or, u64a, u64b), u64a, u64b),
		ewFixed("bitwise_xor", "u8 broadcast", nil, bitsMap(lang.U8, xor, u8a, u8b), u8a, u8b),
		ewFixed("bitwise_xor", "i16", nil, bitsMap(lang.I16, xor, i16a, i16b), i16a, i16b),
		ewFixed("bitwise_xor", "u64", nil, bitsMap(lang.U64, xor, u64a, u64b), u64a, u64b),
		ewFixed("bitwise_not", "u8", nil, ewI(lang.U8, s(4), 0xff, 0xfe, 0x0f, 0), ewI(lang.U8, s(4), 0, 1, 0xf0, 0xff)),
		ewFixed("bitwise_not", "i32", nil, ewI(lang.I32, s(3), -1, 0, math.MinInt32), ewI(lang.I32, s(3), 0, -1, math.MaxInt32)),
		ewFixed("bitwise_not", "u64", nil, ewI(lang.U64, s(2), -1, math.MaxInt64), ewI(lang.U64, s(2), 0, math.MinInt64)),
	)

	// Shifts: Go's << and >> on the typed values, with counts of the
	// width and more (every bit out).
	u8x := ewI(lang.U8, s(2, 3), 0x81, 0xff, 1, 0x80, 3, 0x7f)
	u8n := ewI(lang.U8, s(3), 1, 7, 200)
	shl8 := func(a, n int64) int64 { return int64(uint8(a) << uint8(n)) }
	shr8 := func(a, n int64) int64 { return int64(uint8(a) >> uint8(n)) }
	u32x := ewI(lang.U32, s(4), 0xdeadbeef, 1, 0x80000000, 12345)
	u32n := ewI(lang.U32, s(4), 4, 31, 32, 0)
	shl32 := func(a, n int64) int64 { return int64(uint32(a) << uint32(n)) }
	shr32 := func(a, n int64) int64 { return int64(uint32(a) >> uint32(n)) }
	u64x := ewI(lang.U64, s(4), -1, 1, math.MinInt64, 0x123456789)
	u64n := ewI(lang.U64, s(4), 63, 64, 1, 8)
	shl64 := func(a, n int64) int64 { return int64(uint64(a) << uint64(n)) }
	shr64 := func(a, n int64) int64 { return int64(uint64(a) >> uint64(n)) }
	i16x := ewI(lang.I16, s(5), -32768, -1, 12345, -300, 5)
	i16n := ewI(lang.I16, s(5), 3, 15, 16, -1, 1)
	shl16 := func(a, n int64) int64 { return int64(int16(a) << uint16(n)) }
	shr16 := func(a, n int64) int64 { return int64(int16(a) >> uint16(n)) }
	register(
		ewFixed("shift_left", "u8 broadcast", nil, bitsMap(lang.U8, shl8, u8x, u8n), u8x, u8n),
		ewFixed("shift_left", "u32", nil, bitsMap(lang.U32, shl32, u32x, u32n), u32x, u32n),
		ewFixed("shift_left", "u64", nil, bitsMap(lang.U64, shl64, u64x, u64n), u64x, u64n),
		ewFixed("shift_left", "i16 (a negative count shifts everything out)", nil, bitsMap(lang.I16, shl16, i16x, i16n), i16x, i16n),
		ewFixed("shift_right", "u8 broadcast", nil, bitsMap(lang.U8, shr8, u8x, u8n), u8x, u8n),
		ewFixed("shift_right", "u32", nil, bitsMap(lang.U32, shr32, u32x, u32n), u32x, u32n),
		ewFixed("shift_right", "u64 logical", nil, bitsMap(lang.U64, shr64, u64x, u64n), u64x, u64n),
		ewFixed("shift_right", "i16 arithmetic", nil, bitsMap(lang.I16, shr16, i16x, i16n), i16x, i16n),
	)

	// Bit casts against math.Float32bits and friends.
	f32v := []float64{1, -2.5, 0, math.Inf(-1), 3.4e38, 1e-45}
	f32bits := make([]int64, len(f32v))
	for i, v := range f32v {
		f32bits[i] = int64(int32(math.Float32bits(float32(v))))
	}
	f64v := []float64{1, -2.5, math.Inf(1), math.SmallestNonzeroFloat64}
	f64bits := make([]int64, len(f64v))
	for i, v := range f64v {
		f64bits[i] = int64(math.Float64bits(v))
	}
	i16bits := func(h ...uint16) *tensor.Tensor {
		v := make([]int64, len(h))
		for i, b := range h {
			v[i] = int64(int16(b))
		}
		return ewI(lang.I16, s(len(h)), v...)
	}
	register(
		ewFixed("bitcast_f32_to_i32", "f32 [2,3]", nil, ewI(lang.I32, s(2, 3), f32bits...), ewT(lang.F32, s(2, 3), f32v...)),
		ewFixed("bitcast_i32_to_f32", "i32", nil, ewT(lang.F32, s(6), f32v...), ewI(lang.I32, s(6), f32bits...)),
		ewFixed("bitcast_f64_to_i64", "f64", nil, ewI(lang.I64, s(4), f64bits...), ewT(lang.F64, s(4), f64v...)),
		ewFixed("bitcast_i64_to_f64", "i64", nil, ewT(lang.F64, s(4), f64v...), ewI(lang.I64, s(4), f64bits...)),
		ewFixed("bitcast_f16_to_i16", "f16", nil, i16bits(0x3c00, 0xc000, 0x7c00, 0x0001, 0x8000), ewT(lang.F16, s(5), 1, -2, math.Inf(1), 0x1p-24, math.Copysign(0, -1))),
		ewFixed("bitcast_i16_to_f16", "i16", nil, ewT(lang.F16, s(4), 1, -2, math.Inf(-1), 0x1p-24), i16bits(0x3c00, 0xc000, 0xfc00, 0x0001)),
		ewFixed("bitcast_bf16_to_i16", "bf16", nil, i16bits(0x3f80, 0xc000, 0x7f80), ewT(lang.BF16, s(3), 1, -2, math.Inf(1))),
		ewFixed("bitcast_i16_to_bf16", "i16", nil, ewT(lang.BF16, s(3), 1, -2, 0x1p-133), i16bits(0x3f80, 0xc000, 0x0001)),
	)
}
