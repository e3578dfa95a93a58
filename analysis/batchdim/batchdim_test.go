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
}`, "depends on the sample"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := checkSource(t, tc.src, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error saying %q", err, tc.want)
			}
		})
	}
}
