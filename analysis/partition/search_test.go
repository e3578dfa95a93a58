package partition

import (
	"strings"
	"testing"
)

func TestCheckFactors(t *testing.T) {
	for _, tc := range []struct {
		factors []int
		devices int
		want    string // "" for no error
	}{
		{[]int{4, 2}, 8, ""},
		{[]int{2, 4}, 8, "at most the one before"},
		{[]int{1, 8}, 8, "at least 2"},
		{[]int{4}, 8, "multiply to 4, not 8"},
		{[]int{4, 4}, 8, "multiply to 16, not 8"},
		// 2^32 * 2^32 wraps to 0 in 64 bits; it must not pass for any N.
		{[]int{1 << 32, 1 << 32, 8}, 8, "multiply to far more than 8"},
	} {
		err := CheckFactors(tc.factors, tc.devices)
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("CheckFactors(%v, %d) = %v, want %q", tc.factors, tc.devices, err, tc.want)
		}
	}
}
