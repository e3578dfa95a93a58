package tensor

import (
	"math"
	"strings"
	"testing"

	"tofuc/lang"
)

func TestCompare(t *testing.T) {
	f := func(vals ...float64) *Tensor { return FromFloats(lang.F64, []int{len(vals)}, vals) }
	inf, nan := math.Inf(1), math.NaN()
	for _, tc := range []struct {
		name      string
		got, want *Tensor
		tol       Tolerance
		err       string // "" when they must match
	}{
		{"equal", f(1, 2), f(1, 2), Exact, ""},
		{"nan matches nan", f(nan), f(nan), Exact, ""},
		{"infinities by sign", f(inf, -inf), f(inf, -inf), Exact, ""},
		{"opposite infinities", f(-inf), f(inf), External, "largest error"},
		{"nan against number", f(nan), f(1), External, "largest error"},
		{"within tolerance", f(1.0005), f(1), External, ""},
		{"beyond tolerance, worst reported", f(1.01, 5.5), f(1, 5), External, "at [1]"},
		{"exact rejects an ulp", f(1 + 0x1p-52), f(1), Exact, "largest error"},
		{"shape", f(1, 2), FromFloats(lang.F64, []int{2, 1}, []float64{1, 2}), Exact, "shape"},
		{"dtype", f(1), FromFloats(lang.F32, []int{1}, []float64{1}), Exact, "dtype"},
		{"integers exact", FromInts(lang.I32, []int{1}, []int64{3}), FromInts(lang.I32, []int{1}, []int64{4}), External, "largest error"},
	} {
		err := Compare(tc.got, tc.want, tc.tol)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.err)
		}
	}
}

func TestReorderedGrowsWithLength(t *testing.T) {
	short, long := Reordered(lang.F32, 4), Reordered(lang.F32, 10000)
	if !(long.Rel > short.Rel && short.Rel > 0) {
		t.Errorf("Reordered(f32): %v for 4, %v for 10000", short, long)
	}
	if Reordered(lang.I32, 100) != Exact {
		t.Errorf("integers must compare exactly")
	}
}
