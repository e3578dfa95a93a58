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
op index_reads_u<V = 8>(ids: i64[I], x: f32[I, D]) -> f32[V, D] =
    lambda u, d: sum(lambda i < I: select(ids[(i + u) % I] == u, x[i, d], 0.0))

model scatters(ids: i64[40], ids2: i64[6, 7], big: i64[300], idd: i64[40, 24], dout: f32[40, 24], x3: f32[24, 6, 7],
        w: f32[8, 24], bigx: f32[300, 200]) {
    y0 = rows_of(ids, dout)
    y1 = cols_of(ids2, x3)
    y2 = guarded(ids, dout)
    y3 = reads_u(ids, dout, w)
    y4 = histogram(ids)
    y5 = per_column(idd, dout)
    y6 = few_values(ids, dout)
    y7 = index_reads_u(ids, dout)
    y8 = add(rows_of(ids, neg(dout)), w)
    y9 = rows_of<V = 3000>(big, bigx)
    return y0, y1, y2, y3, y4, y5, y6, y7, y8, y9
}
`

// TestScatterForm: sums selected by an index read from data (a gather's
// gradient, a histogram) take the scatter
// form on the host, in every mode: the index before or after the
// variable, offset, a guard before it, the term reading the scattered
// variable (the plan's FLOPs on the host counting only the terms
// added), an integer sum, an index read per column, a stage after the
// sum, and 3,000 rows (accumulators a chunk of columns at a time); an
// output of 3 rows and an index that reads the output's own variable do
// not. Each equals the interpreter, on the host and the SIMT emulator
// (which runs the threads form's code).
func TestScatterForm(t *testing.T) {
	tl := tools(t)
	g := modelFromSource(t, scatterModel)
	// The operators whose kernels are not of the form (neg: y8's
	// argument, a kernel of its own).
	notScatter := map[string]bool{"(few_values)": true, "(index_reads_u)": true, "(neg)": true}
	for _, mode := range []precision.Mode{precision.Exact, precision.F32} {
		t.Run(mode.String(), func(t *testing.T) {
			dir := t.TempDir()
			c, err := codegen.Compile(g, dir, codegen.Options{Tools: tl, Precision: mode, Emit: []string{"host", "simt"}, Backends: []string{"none"}})
			if err != nil {
				t.Fatal(err)
			}
			// The FLOPs of the lambdas, and those the host computes: each
			// column's 40 terms, not every row's (y3: 0.5 · s + 1.0 at
			// each of the 8 × 24 elements, a product and an addition a
			// term).
			flops := map[string][2]int64{
				"y0 (rows_of)": {8 * 24 * 40, 24 * 40},
				"y3 (reads_u)": {8 * 24 * (2 + 2*40), 8*24*2 + 24*40*2},
				"y9 (rows_of)": {3000 * 200 * 300, 200 * 300},
			}
			seen := map[string]bool{}
			for _, k := range c.Plan.Kernels {
				if want, ok := flops[k.Label]; ok && (k.FLOPs != want[0] || k.HostFLOPs != want[1]) {
					t.Errorf("%s: %d FLOPs, %d on the host; want %d and %d", k.Label, k.FLOPs, k.HostFLOPs, want[0], want[1])
				}
				name, ops, _ := strings.Cut(k.Label, " ")
				seen[strings.SplitN(name, ".", 2)[0]] = true
				if got, want := k.Form == "scatter", !notScatter[ops]; got != want {
					t.Errorf("%s: form %s, want scatter %v", k.Label, k.Form, want)
				}
			}
			if len(seen) != 10 {
				t.Errorf("kernels for %d outputs, want 10: %v", len(seen), seen)
			}
			matchInterp(t, "scatters", g, c.Plan, dir, true, func(dt lang.DType) tensor.Tolerance { return tensor.Reordered(dt, 300) })
		})
	}
}
