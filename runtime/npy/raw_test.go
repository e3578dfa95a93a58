package npy

import (
	"strings"
	"testing"

	"tofuc/lang"
	"tofuc/runtime/tensor"
)

// TestRawRoundTrip: every dtype's raw array decodes to the tensor that
// encoded it (bf16 as f32, its Stored dtype), and wrong lengths are
// refused.
func TestRawRoundTrip(t *testing.T) {
	floats := []float64{0, -1.5, 3.25, 65504}
	ints := []int64{0, -1, 127, 1}
	for _, dt := range []lang.DType{lang.F16, lang.BF16, lang.F32, lang.F64, lang.I8, lang.I16, lang.I32, lang.I64, lang.U8, lang.U16, lang.U32, lang.U64, lang.Bool} {
		var x *tensor.Tensor
		if dt.IsFloat() {
			x = tensor.FromFloats(dt, []int{2, 2}, floats)
		} else {
			x = tensor.FromInts(dt, []int{2, 2}, ints)
		}
		raw := make([]byte, RawBytes(x))
		if err := EncodeRaw(raw, x); err != nil {
			t.Fatalf("%s: %v", dt, err)
		}
		got, err := DecodeRaw(Stored(dt), x.Shape, raw)
		if err != nil {
			t.Fatalf("%s: %v", dt, err)
		}
		if err := tensor.Compare(AsDType(got, dt), x, tensor.Tolerance{}); err != nil {
			t.Errorf("%s: %v", dt, err)
		}
		if err := EncodeRaw(raw[1:], x); err == nil || !strings.Contains(err.Error(), "bytes for a raw") {
			t.Errorf("%s: a short buffer: %v", dt, err)
		}
		if _, err := DecodeRaw(Stored(dt), x.Shape, append(raw, 0)); err == nil {
			t.Errorf("%s: a long buffer decoded", dt)
		}
	}
	if _, err := DecodeRaw(lang.BF16, []int{1}, []byte{0, 0}); err == nil {
		t.Error("a raw bf16 array decoded (NumPy has none: it crosses as f32)")
	}
}
