package cliargs

import (
	"slices"
	"testing"
)

func TestWithout(t *testing.T) {
	got := Without([]string{"dir", "--nproc-per-node", "4", "--out", "o", "--nproc-per-node=2", "--nproc"}, "nproc-per-node")
	if want := []string{"dir", "--out", "o", "--nproc"}; !slices.Equal(got, want) {
		t.Errorf("%q, want %q", got, want)
	}
}
