package codegen_test

import "testing"

// TestRowForm: softmax, log-softmax and layer norm, along the last axis,
// the first and a middle one, with an epilogue fused, are each one launch
// in the row form (their reductions computed once per row in the
// element-wise kernel), equal to the interpreter on the cpu runtime and
// the emulator; a local read inside a reduction over an output variable
// (cross-entropy's log-sum), a local the output reads beyond its extent
// and rows longer than the limit keep their launches, and a local on the
// weights alone still runs once with them. Attention's scores, read
// across the row, are buffered per row (one launch) unless they are
// longer than the buffer; a local buffered on part of the row's key
// keeps its launch.
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
		// Attention's scores are read by their maximum and sum over the
		// keys and by the output: a row buffer of the keys, filled by a
		// block's threads in turn where the keys outnumber them.
		{"attention", `model m(q: f32[2, 3, 33, 16], k: f32[2, 3, 70, 16], b: f32[70], q2: f32[1, 2, 5, 8], k2: f32[1, 2, 700, 8], b2: f32[700]) {
    return attention_weights<causal = true, past = 20>(q, k, b), attention_weights<softcap = 3.0>(q2, k2, b2)
}`, 2, 2},
		// No keys: an empty buffer is none (the scores keep their
		// launch, writing nothing).
		{"no keys", `model m(q: f32[1, 2, 3, 4], k: f32[1, 2, 0, 4], b: f32[1]) {
    return attention_weights(q, k, b)
}`, 2, 1},
		// Scores longer than the buffer keep their launch.
		{"long scores", `model m(q: f32[1, 1, 2, 2], k: f32[1, 1, 5000, 2], b: f32[5000]) {
    return attention_weights(q, k, b)
}`, 2, 1},
		// s would be buffered along n, but the row is keyed on a and b
		// (m's key): it would be computed again for every b, so it keeps
		// its launch.
		{"buffer on part of the key", `op o(x: [A, B, N]) -> [A, B, N] =
    let s: [A, N] = lambda a, n: sum(lambda b: x[a, b, n]) in
    let m: [A, B] = lambda a, b: max(lambda n: x[a, b, n] * s[a, n]) in
    lambda a, b, n: x[a, b, n] / m[a, b] + s[a, n]
model m(x: f32[3, 4, 9]) { return o(x) }`, 2, 1},
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
