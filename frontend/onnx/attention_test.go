package onnx

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"tofuc/frontend/onnx/onnxpb"
	"tofuc/internal/onnxbuild"
	"tofuc/lang"
	"tofuc/runtime/tensor"
)

func TestImportAttentionErrors(t *testing.T) {
	f32 := onnxpb.TensorProto_FLOAT
	for _, c := range []struct {
		q, k, v []any
		attrs   []*onnxpb.AttributeProto
		want    string
	}{
		{[]any{1, 3, 4, 8}, []any{1, 2, 5, 8}, []any{1, 2, 5, 8}, nil, "3 query heads do not group over 2 key and 2 value heads"},
		{[]any{1, 4, 8}, []any{1, 2, 5, 8}, []any{1, 2, 5, 8}, nil, "Q, K and V must all be 3-D or all 4-D, found ranks 3, 4 and 4"},
		{[]any{1, 4, 8}, []any{1, 5, 8}, []any{1, 5, 8}, []*onnxpb.AttributeProto{onnxbuild.Int("q_num_heads", 3), onnxbuild.Int("kv_num_heads", 2)}, "split_heads"},
		{[]any{1, 2, 4, 8}, []any{1, 2, 5, 8}, []any{1, 2, 5, 8}, []*onnxpb.AttributeProto{onnxbuild.Int("qk_matmul_output_mode", 7)}, "qk_matmul_output_mode = 7"},
	} {
		g := onnxbuild.Graph("g", []*onnxpb.NodeProto{onnxbuild.Node("Attention", []string{"Q", "K", "V"}, []string{"Y", "", "", "qk"}, c.attrs...)},
			[]*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("Q", f32, c.q...), onnxbuild.TensorInfo("K", f32, c.k...), onnxbuild.TensorInfo("V", f32, c.v...)},
			[]*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("Y", f32), onnxbuild.TensorInfo("qk", f32)})
		_, err := Import(model(g, 24), Options{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
}

// TestImportReverseSequence reverses the first lens[b] steps of each
// batch entry, time-major and batch-major.
func TestImportReverseSequence(t *testing.T) {
	x := tensor.FromFloats(lang.F32, []int{3, 2}, []float64{1, 10, 2, 20, 3, 30}) // [T, B]
	lens := tensor.FromInts(lang.I64, []int{2}, []int64{2, 3})
	want := tensor.FromFloats(lang.F32, []int{3, 2}, []float64{2, 30, 1, 20, 3, 10})
	for _, batchMajor := range []bool{false, true} {
		in, w := x, want
		attrs := []*onnxpb.AttributeProto{onnxbuild.Int("batch_axis", 1), onnxbuild.Int("time_axis", 0)}
		if batchMajor {
			in, w = transpose2(x), transpose2(want)
			attrs = []*onnxpb.AttributeProto{onnxbuild.Int("batch_axis", 0), onnxbuild.Int("time_axis", 1)}
		}
		g := onnxbuild.Graph("g", []*onnxpb.NodeProto{onnxbuild.Node("ReverseSequence", []string{"x", "lens"}, []string{"y"}, attrs...)},
			[]*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("x", onnxpb.TensorProto_FLOAT, intsAny(in.Shape)...), onnxbuild.TensorInfo("lens", onnxpb.TensorProto_INT64, 2)},
			[]*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("y", onnxpb.TensorProto_FLOAT)})
		_, got := run(t, model(g, 10), Options{}, map[string]*tensor.Tensor{"x": in, "lens": lens}, nil)
		if err := tensor.Compare(got[0], w, tensor.Exact); err != nil {
			t.Errorf("batch-major %v: %v", batchMajor, err)
		}
	}
}

func transpose2(x *tensor.Tensor) *tensor.Tensor {
	out := tensor.New(x.DType, []int{x.Shape[1], x.Shape[0]})
	for i := range x.Shape[0] {
		for j := range x.Shape[1] {
			out.Set(x.At(i, j), j, i)
		}
	}
	return out
}

// TestImportSequenceErrors: a sequence is a list of tensors only where
// its length is known; other operators do not take one.
func TestImportSequenceErrors(t *testing.T) {
	f32 := onnxpb.TensorProto_FLOAT
	seqInfo := &onnxpb.ValueInfoProto{Name: proto.String("s"), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_SequenceType{
		SequenceType: &onnxpb.TypeProto_Sequence{ElemType: onnxbuild.TensorInfo("", f32).GetType()}}}}
	g := onnxbuild.Graph("g", []*onnxpb.NodeProto{onnxbuild.Node("Identity", []string{"s"}, []string{"y"})},
		[]*onnxpb.ValueInfoProto{seqInfo}, []*onnxpb.ValueInfoProto{seqInfo})
	if _, err := Import(model(g, 16), Options{}); err == nil || !strings.Contains(err.Error(), "its length and element types must be known at import") {
		t.Errorf("sequence input without Options.Sequences: %v", err)
	}
	g = onnxbuild.Graph("g", []*onnxpb.NodeProto{
		onnxbuild.Node("SplitToSequence", []string{"x"}, []string{"s"}),
		onnxbuild.Node("Relu", []string{"s"}, []string{"y"})},
		[]*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("x", f32, 2, 3)}, []*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("y", f32)})
	if _, err := Import(model(g, 16), Options{}); err == nil || !strings.Contains(err.Error(), "a sequence is not supported as an input of relu") {
		t.Errorf("sequence into Relu: %v", err)
	}
}
