package batchdim_test

import (
	"strings"
	"testing"

	"tofuc/analysis/batchdim"
	"tofuc/analysis/check"
	"tofuc/lang/ir"
	"tofuc/parser"
)

var sizes = []int64{1, 2, 3, 8}

// checkSource elaborates the model of src with batch symbolic and
// checks it.
func checkSource(t *testing.T, src string, set map[string]ir.AttrValue) (*batchdim.Result, error) {
	t.Helper()
	prog, err := check.NewProgram(parser.Parse)
	if err != nil {
		t.Fatal(err)
	}
	m, err := prog.LoadSource("test.tdl", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	g, err := m.SymbolicModel("", set, "batch")
	if err != nil {
		t.Fatal(err)
	}
	return batchdim.Check(g, "batch", sizes)
}

func TestSampleWiseModelsPass(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		in, out   batchdim.Axis
	}{
		{"linear", `model m<batch = 4>(x: f32[batch, 8]) {
    w = param f32[8, 3]
    return relu(matmul(x, w))
}`, batchdim.Axis{Dim: 0, Factor: 1}, batchdim.Axis{Dim: 0, Factor: 1}},
		{"batch second, softmax", `model m<batch = 4>(x: f32[5, batch, 8]) {
    return softmax(x)
}`, batchdim.Axis{Dim: 1, Factor: 1}, batchdim.Axis{Dim: 1, Factor: 1}},
		{"flattened rows", `model m<batch = 4>(x: f32[batch, 5, 8]) {
    y = reshape<shape = [-1, 8]>(x)
    return softmax(y)
}`, batchdim.Axis{Dim: 0, Factor: 1}, batchdim.Axis{Dim: 0, Factor: 5}},
		{"input extent symbol", `model m(x: f32[batch, 6]) {
    return sigmoid(x)
}`, batchdim.Axis{Dim: 0, Factor: 1}, batchdim.Axis{Dim: 0, Factor: 1}},
		{"positions of flattened rows", `op addpos(x: [M, D], p: [S, D]) -> [M, D] = lambda m, d: x[m, d] + p[m % S, d]
model m<batch = 4>(x: f32[batch * 4, 8]) {
    p = param f32[4, 8]
    return addpos(x, p)
}`, batchdim.Axis{Dim: 0, Factor: 4}, batchdim.Axis{Dim: 0, Factor: 4}},
		{"a row's parity as a value", `op par(x: [M, D]) -> [M / 2, D] = lambda m, d: x[2 * m, d] * f32(1 + (2 * m) % 2)
model m<batch = 4>(x: f32[batch * 4, 8]) {
    return par(x)
}`, batchdim.Axis{Dim: 0, Factor: 4}, batchdim.Axis{Dim: 0, Factor: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := checkSource(t, tc.src, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.Inputs[0].Axis != tc.in || res.Outputs[0].Axis != tc.out {
				t.Fatalf("axes %v -> %v, want %v -> %v", res.Inputs[0].Axis, res.Outputs[0].Axis, tc.in, tc.out)
			}
		})
	}
}

// Every model here mixes samples, or computes a sample differently in
// a chunk than in the whole batch; padding or chunking would change its
// answers, so Check must refuse each, saying why.
func TestMixingModelsAreRefused(t *testing.T) {
	for _, tc := range []struct{ name, src, want string }{
		{"mean over the batch", `model m<batch = 4>(x: f32[batch, 8]) {
    return reduce_mean<axes = [0]>(x)
}`, "mixes samples"},
		{"softmax across the batch", `model m<batch = 4>(x: f32[batch, 8]) {
    return softmax<axis = 0>(x)
}`, "reduction over the batch"},
		{"batch norm with batch statistics", `model m<batch = 4>(x: f32[batch, 3, 2, 2]) {
    g = param f32[3] init ones()
    b = param f32[3] init zeros()
    m = param f32[3] init zeros()
    v = param f32[3] init ones()
    y, mean, var, nm, nv = batch_norm_train(x, g, b, m, v)
    return y
}`, "batch"},
		{"concat along the batch", `model m<batch = 4>(x: f32[batch, 8]) {
    return concat<axis = 0>(x, x)
}`, "batch"},
		{"transpose of the batch into rows", `model m<batch = 4>(x: f32[batch, 8]) {
    y = transpose<perm = [1, 0]>(x)
    return reshape<shape = [-1]>(y)
}`, "sample"},
		{"neighbouring sample", `op shift(x: [N, C]) -> [N, C] = lambda n, c: (x[n + 1, c] else 0)
model m<batch = 4>(x: f32[batch, 8]) {
    return shift(x)
}`, "outside its own"},
		{"batch index as a value", `op ramp(x: [N, C]) -> [N, C] = lambda n, c: x[n, c] * f32(n)
model m<batch = 4>(x: f32[batch, 8]) {
    return ramp(x)
}`, "used as a value"},
		{"table row per sample", `op lookup(x: [N, C], t: [M, C]) -> [N, C] = lambda n, c: x[n, c] + t[n, c]
model m<batch = 4>(x: f32[batch, 8]) {
    t = param f32[16, 8]
    return lookup(x, t)
}`, "does not follow the sample"},
		// Found by trying to break it: each was accepted and gave wrong
		// answers at a batch that was not compiled.
		{"the batch size in a batch-free value", `model m<batch = 4>(x: f32[batch, 8]) {
    return x / full<shape = [1], value = batch>()
}`, "changes with the batch size"},
		{"the batch index in another dimension's index", `op rot(x: [N, C]) -> [N, C] = lambda n, c: x[n, (c + n) % C]
model m<batch = 4>(x: f32[batch, 8]) {
    return rot(x)
}`, "does not follow the sample"},
		{"positions of the wrong period", `op addpos(x: [M, D], p: [S, D]) -> [M, D] = lambda m, d: x[m, d] + p[m % S, d]
model m<batch = 4>(x: f32[batch * 4, 8]) {
    p = param f32[3, 8]
    return addpos(x, p)
}`, "does not follow the sample"},
		{"the batch extent in an index, in the sample at size 1", `op hi(x: [M, C]) -> [M / 2, C] = lambda n, c: x[n + M / 2, c]
model m<batch = 4>(x: f32[batch * 2, 4]) {
    return hi(x)
}`, "does not follow the sample"},
		{"the batch extent's parity in an index", `op f(x: [N, C]) -> [N, C] = lambda n, c: (x[n + N % 2, c] else 0.0)
model m<batch = 4>(x: f32[batch, 8]) {
    return f(x)
}`, "does not follow the sample"},
		// Found by a second attempt.
		{"a local read with a default past the sample", `op f(x: [N, C]) -> [N, C] =
    let t: [N] = lambda i: 1.0 in
    lambda n, c: x[n, c] + (t[n + 1] else 0.0)
model m<batch = 4>(x: f32[batch, 8]) { return f(x) }`, "default along its batch dimension"},
		{"a local of half the batch", `op f(x: [N, C]) -> [N, C] =
    let t: [N / 2] = lambda i: 1.0 in
    lambda n, c: x[n, c] + (t[2] else 0.0)
model m<batch = 4>(x: f32[batch, 8]) { return f(x) }`, "not a multiple of batch"},
		{"an index overflowing 64 bits", `op f(x: [N, C]) -> [N, C] = lambda n, c: x[n, (c + n * 4611686018427387904 * 2 / 4611686018427387904 + 2 * n) % 8]
model m<batch = 4>(x: f32[batch, 8]) { return f(x) }`, "does not follow the sample"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := checkSource(t, tc.src, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

// The next sample, read where it exists, is out of range at batch 1: a
// plan of size 1 alone must not be proved by it.
func TestNextSampleRefusedWithSizeOne(t *testing.T) {
	prog, err := check.NewProgram(parser.Parse)
	if err != nil {
		t.Fatal(err)
	}
	m, err := prog.LoadSource("next.tdl", []byte(`op shift(x: [N, C]) -> [N, C] = lambda n, c: (x[n + 1, c] else 0)
model m<batch = 4>(x: f32[batch, 8]) {
    return shift(x)
}
`))
	if err != nil {
		t.Fatal(err)
	}
	g, err := m.SymbolicModel("", nil, "batch")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := batchdim.Check(g, "batch", []int64{1}); err == nil || !strings.Contains(err.Error(), "outside its own") {
		t.Fatalf("got %v, want the read of the next sample refused", err)
	}
}
