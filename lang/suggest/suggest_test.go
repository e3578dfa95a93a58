package suggest

import "testing"

// TestDidYouMean: the closest candidate within edit distance 2 and less
// than the name's length, the first in sort order among equals; nothing
// for a name too far from every candidate or a candidate equal to it.
func TestDidYouMean(t *testing.T) {
	for _, tc := range []struct {
		name       string
		candidates []string
		want       string
	}{
		{"sofmax", []string{"softmax", "log_softmax", "relu"}, " (did you mean softmax?)"},
		{"random-input", []string{"random-inputs", "seed"}, " (did you mean random-inputs?)"},
		{"ab", []string{"ba", "aa"}, " (did you mean aa?)"},
		{"x", []string{"y"}, ""}, // distance 1 is the whole name
		{"matmul", []string{"matmul", "conv"}, ""},
		{"zzzzzz", []string{"softmax"}, ""},
	} {
		if got := DidYouMean(tc.name, tc.candidates); got != tc.want {
			t.Errorf("DidYouMean(%q, %v) = %q, want %q", tc.name, tc.candidates, got, tc.want)
		}
	}
}
