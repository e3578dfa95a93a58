package pipeline

import (
	"testing"

	"tofuc/runtime/plan"
)

// TestChooseOneLibrary: the plan takes the one library that saves the
// most in total, in the groups where it beats the generated kernel, even
// where another library is faster for a group on its own.
func TestChooseOneLibrary(t *testing.T) {
	group := func(gen, openblas, onednn float64) plan.PlaceGroup {
		return plan.PlaceGroup{Candidates: []string{"onednn", "openblas", plan.Generated},
			Millis: map[string]float64{plan.Generated: gen, "openblas": openblas, "onednn": onednn}}
	}
	for _, tc := range []struct {
		name   string
		groups []plan.PlaceGroup
		want   []string
	}{
		{"openblas saves more in total", []plan.PlaceGroup{group(10, 5, 4), group(10, 3, 9), group(1, 2, 0.5)}, []string{"openblas", "openblas", plan.Generated}},
		{"onednn saves more in total", []plan.PlaceGroup{group(10, 9, 2), group(10, 8, 9)}, []string{"onednn", "onednn"}},
		{"no library saves", []plan.PlaceGroup{group(1, 2, 3), group(1, 1.5, 1.2)}, []string{plan.Generated, plan.Generated}},
	} {
		p := &plan.Plan{Placement: tc.groups}
		choose(p)
		for g, want := range tc.want {
			if got := p.Placement[g].Chosen; got != want {
				t.Errorf("%s: group %d chose %s, want %s", tc.name, g, got, want)
			}
		}
	}
}
