package exec_test

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"tofuc/parser"

	"tofuc/analysis/check"
	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/runtime/exec"
	"tofuc/runtime/tensor"
)

// graph is y = relu(x · W + b) · 0.5 with a symbolic batch N and W and b
// parameters (params in the order given).
func graph(t *testing.T, wFirst bool) *ir.Graph {
	t.Helper()
	w := "    W = param f32[4, 3] init glorot()\n"
	b := "    b = param f32[3] init normal(1.0, 0.5)\n"
	params := w + b
	if !wFirst {
		params = b + w
	}
	src := "model mlp(x: f32[N, 4]) {\n" + params + "    return relu(matmul(x, W) + b) * 0.5\n}\n"
	_, g, err := check.LoadModel(parser.Parse, "mlp.tdl", []byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestRun(t *testing.T) {
	g := graph(t, true)
	r := rand.New(rand.NewPCG(9, 9))
	x := tensor.New(lang.F32, []int{5, 4})
	for i := range x.Len() {
		x.SetFlat(i, r.NormFloat64())
	}
	in := map[string]*tensor.Tensor{"x": x}
	var progress []string
	b := exec.Interp{Progress: func(i, n int, name string) { progress = append(progress, name) }}
	r1, err := exec.Run(g, b, in, nil, 42)
	if err != nil {
		t.Fatal(err)
	}
	if len(progress) != len(g.Nodes) {
		t.Errorf("progress %v for %d nodes", progress, len(g.Nodes))
	}
	y := r1.Outputs[g.Outputs[0].Name]
	if y == nil || len(y.Shape) != 2 || y.Shape[0] != 5 || y.Shape[1] != 3 {
		t.Fatalf("y = %v", y)
	}
	W, bias := r1.Params["W"], r1.Params["b"]
	limit := math.Sqrt(6.0 / 7)
	for _, v := range W.F {
		if math.Abs(v) > limit {
			t.Errorf("glorot value %v beyond %v", v, limit)
		}
	}
	for i := range 5 {
		for j := range 3 {
			var s float64
			for k := range 4 {
				s += x.At(i, k) * W.At(k, j)
			}
			want := float64(float32(math.Max(float64(float32(float64(float32(s))+bias.At(j))), 0) * 0.5))
			if math.Abs(y.At(i, j)-want) > 1e-6 {
				t.Errorf("y[%d, %d] = %v, want %v", i, j, y.At(i, j), want)
			}
		}
	}
	// Deterministic, and independent of the order of the parameters.
	r2, err := exec.Run(graph(t, false), exec.Interp{Workers: 1}, in, nil, 42)
	if err != nil {
		t.Fatal(err)
	}
	if r2.Params["W"].String() != W.String() || r2.Params["b"].String() != bias.String() {
		t.Error("parameters depend on their order")
	}
	// Another seed gives other parameters.
	r3, err := exec.Run(g, exec.Interp{}, in, nil, 43)
	if err != nil {
		t.Fatal(err)
	}
	if r3.Params["W"].String() == W.String() {
		t.Error("seed does not change the parameters")
	}
	// Given parameters are used as they are.
	r4, err := exec.Run(g, exec.Interp{}, in, map[string]*tensor.Tensor{"W": W, "b": bias}, 7)
	if err != nil {
		t.Fatal(err)
	}
	if r4.Outputs[g.Outputs[0].Name].String() != y.String() {
		t.Error("given parameters not used")
	}
	// Errors.
	if _, err := exec.Run(g, exec.Interp{}, map[string]*tensor.Tensor{}, nil, 1); err == nil || !strings.Contains(err.Error(), "missing input x") {
		t.Errorf("got %v", err)
	}
	if _, err := exec.Run(g, exec.Interp{}, in, map[string]*tensor.Tensor{"W": bias}, 1); err == nil || !strings.Contains(err.Error(), "parameter W is f32[3], want f32[4 3]") {
		t.Errorf("got %v", err)
	}
	// A session prepares once per shape.
	s := exec.NewSession(g, exec.Interp{}, 1)
	defer s.Close()
	if _, err := s.Run(in, nil); err != nil {
		t.Fatal(err)
	}
	first := s.Program()
	if _, err := s.Run(in, nil); err != nil {
		t.Fatal(err)
	}
	if s.Program() != first {
		t.Error("a session prepared the same shapes twice")
	}
}

func TestInitParam(t *testing.T) {
	p := func(kind string, args ...float64) *ir.Param {
		return &ir.Param{Value: &ir.Value{Name: "p", DType: lang.F64}, Init: ir.Init{Kind: kind, Args: args}}
	}
	shape := []int{64, 32, 3, 3}
	stats := func(t *tensor.Tensor) (mean, std float64) {
		for _, v := range t.F {
			mean += v
		}
		mean /= float64(len(t.F))
		for _, v := range t.F {
			std += (v - mean) * (v - mean)
		}
		return mean, math.Sqrt(std / float64(len(t.F)))
	}
	for _, c := range []struct {
		p         *ir.Param
		mean, std float64
	}{
		{p("normal"), 0, 0.02},
		{p("normal", 3, 2), 3, 2},
		{p("uniform"), 0, 0.1 / math.Sqrt(12)},
		{p("uniform", 1, 3), 2, 2 / math.Sqrt(12)},
		{p("zeros"), 0, 0},
		{p("ones"), 1, 0},
		{p("const", 2.5), 2.5, 0},
		{p("glorot"), 0, math.Sqrt(6.0/(32*9+64*9)) * 2 / math.Sqrt(12)},
		{p("he"), 0, math.Sqrt(2.0 / (32 * 9))},
	} {
		x, err := exec.InitParam(c.p, shape, 1)
		if err != nil {
			t.Fatal(err)
		}
		m, s := stats(x)
		if math.Abs(m-c.mean) > 0.05*math.Max(c.std, 0.01) || math.Abs(s-c.std) > 0.05*c.std {
			t.Errorf("%s%v: mean %v std %v, want %v %v", c.p.Init.Kind, c.p.Init.Args, m, s, c.mean, c.std)
		}
	}
	if _, err := exec.InitParam(p("bogus"), shape, 1); err == nil {
		t.Error("no error for an unknown initialiser")
	}
	if _, err := exec.InitParam(p("const"), shape, 1); err == nil {
		t.Error("no error for const without a value")
	}
}

// convInst is a 3x3 convolution with zero padding 1 through Access.Default:
// out[b, co, h, w] = sum_{ci, kh, kw} x[b, ci, h+kh-1, w+kw-1] * k[co, ci, kh, kw].
