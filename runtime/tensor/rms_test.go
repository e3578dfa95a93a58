package tensor

import (
	"testing"

	"tofuc/lang"
)

// TestRMSPerRow: the part of a tolerance relative to the root mean
// square is each row's, not the whole tensor's (a row of large values
// loosens no other row), and squares of large values do not overflow
// into an infinite tolerance.
func TestRMSPerRow(t *testing.T) {
	tol := Tolerance{RMS: 0x1p-8}
	want := FromFloats(lang.F64, []int{2, 3}, []float64{3e4, 3e4, 3e4, 1e-3, 2e-3, 3e-3})
	near := FromFloats(lang.F64, []int{2, 3}, []float64{3e4 + 50, 3e4, 3e4, 1e-3, 2e-3, 3e-3})
	if err := Compare(near, want, tol); err != nil {
		t.Errorf("an error of 50 in a row of 3e4: %v", err)
	}
	far := FromFloats(lang.F64, []int{2, 3}, []float64{3e4, 3e4, 3e4, 0.9, 2e-3, 3e-3})
	if Compare(far, want, tol) == nil {
		t.Error("an error of 0.9 in a row of 1e-3 passed")
	}
	// A row whose spread is 5e199: 2⁻⁸ of it is 1.95e197.
	huge := FromFloats(lang.F64, []int{4}, []float64{1e200, 1, 2, 3})
	if err := Compare(FromFloats(lang.F64, []int{4}, []float64{1e200, 1e190, 2, 3}), huge, tol); err != nil {
		t.Errorf("an error of 1e190 in a row whose spread is 5e199: %v", err)
	}
	if Compare(FromFloats(lang.F64, []int{4}, []float64{1e200, 1e199, 2, 3}), huge, tol) == nil {
		t.Error("an error of 1e199 in a row whose spread is 5e199 passed at 2⁻⁸")
	}
}
