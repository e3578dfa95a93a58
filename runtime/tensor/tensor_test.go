package tensor

import (
	"math"
	"testing"

	"tofuc/lang"
)

func TestBasics(t *testing.T) {
	x := FromFloats(lang.F32, []int{2, 3}, []float64{1, 2, 3, 4, 5, 6.1})
	if got := x.At(1, 2); got != float64(float32(6.1)) {
		t.Errorf("At = %v", got)
	}
	if s := x.Strides(); s[0] != 3 || s[1] != 1 {
		t.Errorf("Strides = %v", s)
	}
	x.Set(7, 0, 1)
	if x.F[1] != 7 {
		t.Errorf("Set: %v", x.F)
	}
	c := x.Clone()
	c.F[0] = 100
	if x.F[0] != 1 {
		t.Error("Clone shares data")
	}
	if got, want := FromInts(lang.I32, []int{2, 2}, []int64{1, 2, 3, 4}).String(), "i32[2, 2] [[1, 2], [3, 4]]"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	if got, want := Scalar(lang.Bool, 2).String(), "bool[] true"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	if got := New(lang.F32, []int{100}).String(); got != "f32[100] ..." {
		t.Errorf("String = %q", got)
	}
	if got := FromInts(lang.I8, []int{1}, []int64{200}).I[0]; got != -56 {
		t.Errorf("wrap: %d", got)
	}
}

func TestFloatToInt(t *testing.T) {
	for _, c := range []struct {
		dt   lang.DType
		v    float64
		want int64
	}{
		{lang.I32, 2.9, 2},
		{lang.I32, -2.9, -2},
		{lang.I8, 200, -56},
		{lang.U8, -1, 255},
		{lang.I64, math.NaN(), 0},
		{lang.I64, math.Inf(1), 0},
		{lang.U64, 1 << 63, -1 << 63},
		{lang.U64, 1<<64 + 4096, 4096},
		{lang.I64, -(1<<64 + 4096), -4096},
		{lang.Bool, 0.5, 1},
		{lang.Bool, math.NaN(), 1},
		{lang.Bool, 0, 0},
	} {
		if got := FloatToInt(c.dt, c.v); got != c.want {
			t.Errorf("FloatToInt(%v, %v) = %d, want %d", c.dt, c.v, got, c.want)
		}
	}
	if got := IntToFloat(lang.U64, -1); got != 1<<64 {
		t.Errorf("IntToFloat(u64, -1) = %v", got)
	}
}
