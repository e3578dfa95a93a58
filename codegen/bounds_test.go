package codegen_test

import (
	"math"
	"testing"

	"tofuc/codegen"
	"tofuc/lang"
	"tofuc/lang/precision"
	"tofuc/runtime/exec"
	"tofuc/runtime/tensor"
)

// TestConstantBounds: max and min of a value and a constant (a clip, a
// ReLU, clip's infinite defaults, a negative zero) are computed as the
// interpreter computes them, to the bit, NaNs (a negative one with a
// payload), infinities and signed zeros included, in the exact and f32
// modes (emit's constBound for most constants, the math library's
// general form for the others). A constant tensor beyond f32's range
// (1e39) is f32's infinity, as the interpreter stores it, in the exact
// mode's double arithmetic too.
func TestConstantBounds(t *testing.T) {
	g := modelFromSource(t, `
model bounds(x: f32[13]) {
    return clip<min = 0.0, max = 6.0>(x), relu(x), clip(x), clip<min = -1.5>(x), clip<max = 0.0>(x), clip<min = -0.0, max = -0.0>(x), clip<min = -inf>(x), clip<max = inf>(x), clip<min = inf, max = inf>(x), clip<min = -inf, max = -inf>(x), clip<min = 1e-45>(x), max(x, 1e39), min(x, -1e39)
}
`)
	// A NaN with its sign bit set and a payload (x86's default NaN is
	// negative): Go's math.Max and Min give the canonical NaN.
	negNaN := float64(math.Float32frombits(0xffc00001))
	specials := []float64{math.NaN(), negNaN, math.Inf(1), math.Inf(-1), 0, math.Copysign(0, -1), 6, -1.5, 7.25, -3, 0.5, 1e-40, -1e-40}
	x := tensor.New(lang.F32, []int{len(specials)})
	for i, v := range specials {
		x.SetFlat(i, v)
	}
	in := map[string]*tensor.Tensor{"x": x}
	want, err := exec.Run(g, exec.Interp{}, in, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []precision.Mode{precision.Exact, precision.F32} {
		dir := t.TempDir()
		c, err := codegen.Compile(g, dir, codegen.Options{Tools: tools(t), Precision: mode, Emit: []string{"host"}})
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range loadPlan(t, c.Plan, dir, false) {
			got, err := l.p.Run(in, want.Params)
			if err != nil {
				t.Fatal(err)
			}
			if len(want.Outputs) != 13 {
				t.Fatalf("%d outputs, want 13", len(want.Outputs))
			}
			for name, w := range want.Outputs {
				for i := range w.Len() {
					a, b := got[name].Flat(i), w.Flat(i)
					if math.Float64bits(a) != math.Float64bits(b) {
						t.Errorf("%s %s: output %s at %g: %g, want %g", mode, l.name, name, specials[i], a, b)
					}
				}
			}
		}
	}
}
