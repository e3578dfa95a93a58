package onnx

import (
	"math/rand/v2"
	"testing"

	"tofuc/frontend/onnx/onnxpb"
	"tofuc/internal/onnxbuild"
	"tofuc/lang"
	"tofuc/runtime/tensor"
)

// TestImportGroupNormOpset18 gives GroupNormalization-18 a scale and bias
// per group; it must equal opset 21's with each repeated over the
// group's channels.
func TestImportGroupNormOpset18(t *testing.T) {
	const n, ch, g, hw = 2, 6, 3, 4
	r := rand.New(rand.NewPCG(1, 2))
	vals := func(k int) []float64 {
		out := make([]float64, k)
		for i := range out {
			out[i] = r.NormFloat64()
		}
		return out
	}
	x := tensor.FromFloats(lang.F32, []int{n, ch, hw}, vals(n*ch*hw))
	sg, bg := vals(g), vals(g)
	sc, bc := make([]float64, ch), make([]float64, ch)
	for c := range ch {
		sc[c], bc[c] = sg[c/(ch/g)], bg[c/(ch/g)]
	}
	f32 := onnxpb.TensorProto_FLOAT
	graph := func(per int) *onnxpb.GraphProto {
		return onnxbuild.Graph("g", []*onnxpb.NodeProto{onnxbuild.Node("GroupNormalization", []string{"x", "s", "b"}, []string{"y"}, onnxbuild.Int("num_groups", g))},
			[]*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("x", f32, n, ch, hw), onnxbuild.TensorInfo("s", f32, per), onnxbuild.TensorInfo("b", f32, per)},
			[]*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("y", f32)})
	}
	_, got := run(t, model(graph(g), 18), Options{}, map[string]*tensor.Tensor{"x": x,
		"s": tensor.FromFloats(lang.F32, []int{g}, sg), "b": tensor.FromFloats(lang.F32, []int{g}, bg)}, nil)
	_, want := run(t, model(graph(ch), 21), Options{}, map[string]*tensor.Tensor{"x": x,
		"s": tensor.FromFloats(lang.F32, []int{ch}, sc), "b": tensor.FromFloats(lang.F32, []int{ch}, bc)}, nil)
	if err := tensor.Compare(got[0], want[0], tensor.Exact); err != nil {
		t.Error(err)
	}
}
