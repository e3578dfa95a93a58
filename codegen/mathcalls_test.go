package codegen_test

import (
	"strings"
	"testing"

	"tofuc/codegen"
	"tofuc/lang/precision"
)

// TestMathCalls: the plan records each launch's calls of the costly
// math functions, for the simulator (cost.KernelSeconds): over the
// plan, an erf and two exponentials an element, a tanh an element inside
// a sum, and no sqrt (an instruction, not priced); a sum of the scatter
// form counts the exponentials of the terms it adds (64 a column), not
// of every row's, and a guard before its index once a term (a tanh) or,
// reading the column, once a term and column (a sin); a local computed
// where it is read counts there, its exponential and its FLOPs (they
// were left out, so that an attention gradient's kernel of 65,536
// exponentials counted none), but not in a contraction's factor.
func TestMathCalls(t *testing.T) {
	g := modelFromSource(t, `op scatter_exp<V = 8>(ids: i64[I], x: f32[I, D]) -> f32[V, D] =
    lambda u, d: sum(lambda i < I: select(ids[i] == u, exp(x[i, d]), 0.0))
op guarded_by_term<V = 8>(ids: i64[I], x: f32[I, D], y: f32[I]) -> f32[V, D] =
    lambda u, d: sum(lambda i < I: select(tanh(y[i]) > 0.0 && ids[i] == u, x[i, d], 0.0))
op guarded_by_column<V = 8>(ids: i64[I], x: f32[I, D]) -> f32[V, D] =
    lambda u, d: sum(lambda i < I: select(sin(x[i, d]) > 0.0 && ids[i] == u, x[i, d], 0.0))
op recomputed_exp(x: [N, D]) -> [N, D] =
    let e: [N, D] = lambda n, d: exp(x[n, d]) * 2.0 in
    lambda n, d: e[n, d] + 1.0
op factor_local(x: [N, K], w: [K, M], s: [K]) -> [N, M] =
    let e: [N, K] = lambda n, k: x[n, k] * s[k] + 1.0 in
    lambda n, j: sum(lambda k < K: e[n, k] * w[k, j])
model m(x: f32[64, 32], ids: i64[64], z: f32[64], wf: f32[32, 16], sf: f32[32]) {
    y = erf(x) + exp(x) * exp(2.0 * x)
    h = scatter_exp(ids, x)
    gt = guarded_by_term(ids, x, z)
    gc = guarded_by_column(ids, x)
    s = reduce_sum<axes = [1]>(tanh(x))
    r = sqrt(abs(x))
    re = recomputed_exp(x)
    fl = factor_local(x, wf, sf)
    return y, s, r, h, gt, gc, re, fl
}`)
	c, err := codegen.Compile(g, t.TempDir(), codegen.Options{Tools: tools(t), Precision: precision.F32, Emit: []string{"host"}, Backends: []string{"none"}})
	if err != nil {
		t.Fatal(err)
	}
	total := map[string]int64{}
	for _, k := range c.Plan.Kernels {
		// The local e computed where re reads it: its exp, product and
		// the sum, at each of 2,048 elements.
		if strings.HasPrefix(k.Label, "re ") && k.FLOPs != 3*2048 {
			t.Errorf("%s: %d FLOPs, want %d (the local's computed where it is read)", k.Label, k.FLOPs, 3*2048)
		}
		// A contraction's factor computes its local once a packed
		// element, not at each of the sum's reads: the sum's FLOPs.
		if strings.HasPrefix(k.Label, "fl ") && (k.Kind != "contraction" || k.FLOPs != 2*64*16*32) {
			t.Errorf("%s: a %s of %d FLOPs, want a contraction of %d", k.Label, k.Kind, k.FLOPs, 2*64*16*32)
		}
		for fn, n := range k.MathCalls {
			total[fn] += n
		}
	}
	want := map[string]int64{"erf": 2048, "exp": 4096 + 32*64 + 2048, "tanh": 2048 + 64, "sin": 32 * 64}
	if len(total) != len(want) {
		t.Errorf("calls %v, want %v", total, want)
	}
	for fn, n := range want {
		if total[fn] != n {
			t.Errorf("%d calls of %s, want %d (all: %v)", total[fn], fn, n, total)
		}
	}
}
