package codegen_test

import (
	"strings"
	"testing"

	"tofuc/codegen"
	"tofuc/lang"
	"tofuc/lang/precision"
	"tofuc/runtime/tensor"
)

// scatterModel's operators are sums that select their terms by an index
// read from data, and some that look like them but are not of the
// scatter form. The integer inputs are drawn from [0, 10) (matchInterp),
// so ids of 8 and 9 are out of an 8-row output's range and ids − 3 is
// sometimes negative.
const scatterModel = `
op rows_of<V = 8>(ids: i64[I], dout: f32[I, D]) -> f32[V, D] =
    lambda u, d: sum(lambda i < I: select(ids[i] == u, dout[i, d], 0.0))
op cols_of<V = 8>(ids: i64[A, B], x: f32[D, A, B]) -> f32[D, V] =
    lambda d, u: sum(lambda a < A, b < B: select(u == ids[a, b] - 3, x[d, a, b] * 2.0, 0.0))
op guarded<V = 8>(ids: i64[I], x: f32[I, D]) -> f32[V, D] =
    lambda u, d: sum(lambda i < I: select(i % 2 == 1 && (ids[i - 1] else 0) == u && x[i, d] > 0.0, x[i, d], 0.0))
op reads_u(ids: i64[I], x: f32[I, D], w: f32[V, D]) -> f32[V, D] =
    lambda u, d: 0.5 * sum(lambda i < I: select(ids[i] == u, x[i, d] * w[u, d], 0.0)) + 1.0
op histogram<V = 8>(ids: i64[I]) -> i64[V] =
    lambda u: sum(lambda i < I: select(ids[i] == u, 1, 0))
op per_column<V = 8>(ids: i64[I, D], x: f32[I, D]) -> f32[V, D] =
    lambda u, d: sum(lambda i < I: select(ids[i, d] == u, x[i, d], 0.0))
op few_values(ids: i64[I], x: f32[I, D]) -> f32[3, D] =
    lambda u, d: sum(lambda i < I: select(ids[i] == u, x[i, d], 0.0))
op narrow_histogram<V = 8>(ids: int[I]) -> i64[V] =
    lambda u: sum(lambda i < I: select(ids[i] == u, 1, 0))
op index_reads_u<V = 8>(ids: i64[I], x: f32[I, D]) -> f32[V, D] =
    lambda u, d: sum(lambda i < I: select(ids[(i + u) % I] == u, x[i, d], 0.0))

model scatters(ids: i64[40], ids2: i64[6, 7], big: i64[50], idd: i64[40, 24], dout: f32[40, 24], x3: f32[24, 6, 7],
        w: f32[8, 24], bigx: f32[50, 40], ids32: i32[40], ids8: i8[40], empty: f32[40, 0]) {
    y0 = rows_of(ids, dout)
    y1 = cols_of(ids2, x3)
    y2 = guarded(ids, dout)
    y3 = reads_u(ids, dout, w)
    y4 = histogram(ids)
    y5 = per_column(idd, dout)
    y6 = few_values(ids, dout)
    y7 = index_reads_u(ids, dout)
    y8 = add(rows_of(ids, neg(dout)), w)
    y9 = rows_of<V = 8000>(big, bigx)
    y10 = narrow_histogram(ids32)
    y11 = narrow_histogram<V = 300>(ids8)
    y12 = per_column<V = 8000>(idd, dout)
    y13 = rows_of<V = 80>(ids, empty)
    return y0, y1, y2, y3, y4, y5, y6, y7, y8, y9, y10, y11, y12, y13
}
`

// TestScatterForm: sums selected by an index read from data (a gather's
// gradient, a histogram) take the scatter form on the host, in every
// mode: the index before or after the variable, offset, a guard before
// it, the term reading the scattered variable (the plan's FLOPs on the
// host counting only the terms added), an integer sum, an index read
// per column, a stage after the sum, 8,000 rows (in three blocks of
// rows; read per column, in two chunks of columns), no columns at all,
// and an i32 index (the checker
// compares it with i32(u)); an output of 3 rows, an index that reads
// the output's own variable and an i8 index of 300 rows (i8(u) wraps)
// do not. On a GPU the kernels keep the launch they had without the
// form. Each equals the interpreter, on the host and the SIMT emulator
// (which runs the GPU's code).
func TestScatterForm(t *testing.T) {
	g := modelFromSource(t, scatterModel)
	// The operators whose kernels are not of the form (neg: y8's
	// argument, a kernel of its own).
	notScatter := map[string]bool{"(few_values)": true, "(index_reads_u)": true, "(neg)": true}
	inEachMode(t, g, codegen.Options{Tools: tools(t), Emit: []string{"host", "simt"}, Backends: []string{"none"}}, func(t *testing.T, mode precision.Mode, c *codegen.Compiled, dir string) {
		// The FLOPs of the lambdas, and those the host computes: each
		// column's 40 terms, not every row's (y3: 0.5 · s + 1.0 at each
		// of the 8 × 24 elements, a product and an addition a term).
		flops := map[string][2]int64{
			"y0 (rows_of)": {8 * 24 * 40, 24 * 40},
			"y3 (reads_u)": {8 * 24 * (2 + 2*40), 8*24*2 + 24*40*2},
			"y9 (rows_of)": {8000 * 40 * 50, 40 * 50},
		}
		seen := map[string]bool{}
		for _, k := range c.Plan.Kernels {
			if want, ok := flops[k.Label]; ok && (k.FLOPs != want[0] || k.HostFLOPs != want[1]) {
				t.Errorf("%s: %d FLOPs, %d on the host; want %d and %d", k.Label, k.FLOPs, k.HostFLOPs, want[0], want[1])
			}
			name, ops, _ := strings.Cut(k.Label, " ")
			seen[strings.SplitN(name, ".", 2)[0]] = true
			want := !notScatter[ops] && k.Label != "y11 (narrow_histogram)" // i8(u) wraps at 128
			if got := k.Form == "scatter"; got != want {
				t.Errorf("%s: form %s, want scatter %v", k.Label, k.Form, want)
			}
			if k.Label == "y0 (rows_of)" && (k.Grid != 8*24 || k.Block != 64 || !k.Sync) {
				// A GPU runs it as without the form: a block per element
				// for its 40 terms (the blocks form).
				t.Errorf("%s: GPU launch %d × %d, sync %v; want 192 × 64, sync", k.Label, k.Grid, k.Block, k.Sync)
			}
		}
		if len(seen) != 14 {
			t.Errorf("kernels for %d outputs, want 14: %v", len(seen), seen)
		}
		matchInterp(t, "scatters", g, c.Plan, dir, true, func(dt lang.DType) tensor.Tolerance { return tensor.Reordered(dt, 300) })
	})
}
