package pipeline

import (
	"math"
	"slices"
	"testing"

	"tofuc/codegen/toolchain"
	"tofuc/runtime/plan"
)

// TestChoose: the plan takes the library whose plan, timed whole, was
// fastest, in the groups where it beats the generated kernel; each
// group's fastest variant when the mixed plan was fastest; the
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
		{"the mixed plan fastest", map[string]float64{plan.Generated: 30, "openblas": 20, "onednn": 19, mixed: 18}, []string{"onednn", "openblas", "onednn"}},
		{"the mixed plan slower than a library's", map[string]float64{plan.Generated: 30, "openblas": 20, "onednn": 19, mixed: 19.5}, []string{"onednn", plan.Generated, "onednn"}},
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

// TestProfileKeyNamesTheCall: a group's key in the profile database
// names each library step's call, a convolution's as a product's, and
// not the buffers the plan put its operands in.
func TestProfileKeyNamesTheCall(t *testing.T) {
	tools, err := toolchain.Find()
	if err != nil {
		t.Skip(err)
	}
	key := func(s plan.Step) string {
		s.Op, s.Place = plan.Library, &plan.Placed{Group: 0, Variants: []string{"onednn"}}
		p := &plan.Plan{Steps: [][]plan.Step{{s}}, Placement: []plan.PlaceGroup{{}}}
		return profileKey(p, 0, tools, 2)
	}
	conv := func(pad int64, buf int) plan.Step {
		return plan.Step{Conv: &plan.ConvCall{Backend: "onednn", PadsBegin: []int64{pad}, X: plan.Dense{Buffer: buf}}}
	}
	gemm := func(k int64, buf int) plan.Step {
		return plan.Step{GEMM: &plan.GEMMCall{Backend: "onednn", K: k, A: plan.Matrix{Buffer: buf}}}
	}
	for name, call := range map[string]func(int64, int) plan.Step{"conv": conv, "gemm": gemm} {
		if key(call(1, 3)) != key(call(1, 7)) {
			t.Errorf("%s: the key changed with a buffer id", name)
		}
		if key(call(1, 3)) == key(call(2, 3)) {
			t.Errorf("%s: two calls share a key", name)
		}
	}
}

// TestPlanChoices: the mixed plan is timed only where it mixes
// libraries.
func TestPlanChoices(t *testing.T) {
	group := func(gen, openblas, onednn float64) plan.PlaceGroup {
		return plan.PlaceGroup{Candidates: []string{"onednn", "openblas", plan.Generated},
			Millis: map[string]float64{plan.Generated: gen, "openblas": openblas, "onednn": onednn}}
	}
	two := &plan.Plan{Placement: []plan.PlaceGroup{group(10, 5, 4), group(10, 3, 10)}}
	if got := planChoices(two); len(got) != 4 || got[3] != mixed {
		t.Errorf("two libraries each fastest somewhere: %v", got)
	}
	one := &plan.Plan{Placement: []plan.PlaceGroup{group(10, 5, 4), group(10, 30, 9)}}
	if got := planChoices(one); slices.Contains(got, mixed) {
		t.Errorf("one library fastest everywhere: %v", got)
	}
}
