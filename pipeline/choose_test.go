package pipeline

import (
	"math"
	"testing"

	"tofuc/runtime/plan"
)

// TestChoose: the plan takes the library whose plan, timed whole, was
// fastest, in the groups where it beats the generated kernel; the
// generated kernels everywhere when the generated plan was fastest.
func TestChoose(t *testing.T) {
	group := func(gen, openblas, onednn float64) plan.PlaceGroup {
		return plan.PlaceGroup{Candidates: []string{"onednn", "openblas", plan.Generated},
			Millis: map[string]float64{plan.Generated: gen, "openblas": openblas, "onednn": onednn}}
	}
	for _, tc := range []struct {
		name  string
		walls map[string]float64
		want  []string
	}{
		{"openblas's plan fastest", map[string]float64{plan.Generated: 30, "openblas": 20, "onednn": 25}, []string{"openblas", "openblas", plan.Generated}},
		{"onednn's plan fastest", map[string]float64{plan.Generated: 30, "openblas": 20, "onednn": 19}, []string{"onednn", plan.Generated, "onednn"}},
		{"the generated plan fastest", map[string]float64{plan.Generated: 18, "openblas": 20, "onednn": 19}, []string{plan.Generated, plan.Generated, plan.Generated}},
		{"a library's plan faster by less than the margin", map[string]float64{plan.Generated: 20, "openblas": 19.2, "onednn": 21}, []string{plan.Generated, plan.Generated, plan.Generated}},
		{"a library's plan faster by more than the margin", map[string]float64{plan.Generated: 20, "openblas": 18.8, "onednn": 21}, []string{"openblas", "openblas", plan.Generated}},
	} {
		p := &plan.Plan{Placement: []plan.PlaceGroup{group(10, 5, 4), group(10, 3, 10), group(1, 2, 0.5)}}
		choose(p, tc.walls)
		for g, want := range tc.want {
			if got := p.Placement[g].Chosen; got != want {
				t.Errorf("%s: group %d chose %s, want %s", tc.name, g, got, want)
			}
		}
	}
}

func TestParseSchedule(t *testing.T) {
	good, err := ParseSchedule("cosine, warmup=10,total=100,final=0.1")
	if err != nil || good.Decay != "cosine" || good.Warmup != 10 || good.Total != 100 || good.Final != 0.1 {
		t.Errorf("cosine: %+v, %v", good, err)
	}
	for _, bad := range []string{
		"cosine,total=10,", "cosine,,total=10", "cosine,linear,total=10", "step,every=2,every=3",
		"final=0.5", "exponential,every=3", "step,gamma=nan", "cosine,total=5,final=nan", "step,gamma=1e-320",
		"cosine", "cosin,total=5", "linear,total=5,warmup=5", "step,every=0", "warmup=-1", "step,gamma=x",
	} {
		if s, err := ParseSchedule(bad); err == nil {
			t.Errorf("%q was accepted: %+v", bad, s)
		}
	}
	for _, norm := range []float64{-1, math.NaN(), math.Inf(1), 1e39} {
		c := TrainChoices{Loss: "mse", Optimizer: "sgd", ClipNorm: norm}
		if c.Validate() == nil {
			t.Errorf("--clip-norm %g was accepted", norm)
		}
	}
}
