package codegen_test

import "testing"

// TestRowForm: softmax, log-softmax and layer norm, along the last axis,
// the first and a middle one, with an epilogue fused, are each one launch
// in the row form (their reductions computed once per row in the
// element-wise kernel), equal to the interpreter on the cpu runtime and
// the emulator; a local read inside a reduction over an output variable
// (cross-entropy's log-sum), a local the output reads beyond its extent
// and rows longer than the limit keep their launches, and a local on the
// weights alone still runs once with them.
func TestRowForm(t *testing.T) {
	tl := tools(t)
	for _, tc := range []struct {
		name, src string
		launches  int
		rows      int // launches in the row form
	}{
		{"last axis", `model m(x: f32[37, 300], g: f32[300], b: f32[300]) {
    return softmax(x) * 2.0 + 1.0, layer_norm(x, g, b), log_softmax(x)
}`, 3, 3},
		{"other axes", `model m(x: f32[5, 33, 7], g: f32[33, 7]) {
    return softmax<axis = 1>(x), log_softmax<axis = 0>(x), layer_norm<axis = 1>(x, exp(g), g)
}`, 3 + 1, 3}, // exp(g) is a launch of its own
		{"short rows", `model m(x: f32[300, 3]) {
    return softmax(x)
}`, 1, 1},
		{"cross entropy", `model m(x: f32[6, 10], y: i64[6]) {
    return softmax_cross_entropy(x, y)
}`, 3, 0},
		{"long rows", `model m(x: f32[2, 70000]) {
    return softmax(x)
}`, 3, 0},
		// The output reaches rows beyond the local's extent (read with a
		// default): the local keeps its launch.
		{"beyond the local", `op o(x: [A, N]) -> [A + 5, N] =
    let m: [A] = lambda a: max(lambda k: x[a, k]) in
    lambda a, n: (m[a] else -5.0) + 1.0
model m(x: f32[3, 8]) { return o(x) }`, 2, 0},
		// A local on the weights alone runs once with them, not per row.
		{"weights", `op wf(x: [A, N], w: [A, K], v: [K, N]) -> [A, N] =
    let m: [A, N] = lambda a, n: sum(lambda k: w[a, k] * v[k, n]) in
    lambda a, n: x[a, n] * m[a, n]
model m(x: f32[16, 24]) {
    w = param f32[16, 8] init glorot()
    v = param f32[8, 24] init glorot()
    return wf(x, w, v)
}`, 1, 0}, // the output (the product of the weights runs at init)
	} {
		c := compileMatching(t, tl, tc.name, tc.src, 70000)
		rows := 0
		for _, k := range c.Plan.Kernels {
			if k.Form == "rows" {
				rows++
			}
		}
		if c.Stats.Kernels != tc.launches || rows != tc.rows {
			t.Errorf("%s: %d launches, %d kernels in the row form; want %d and %d", tc.name, c.Stats.Kernels, rows, tc.launches, tc.rows)
		}
	}
}
