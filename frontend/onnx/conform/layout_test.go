package conform

import (
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"
	"tofuc/parser"

	"google.golang.org/protobuf/proto"

	"tofuc/analysis/check"
	"tofuc/frontend/onnx/onnxpb"
)

func writeProto(t *testing.T, path string, m proto.Message) {
	t.Helper()
	data, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func floats(dims []int64, vals ...float32) *onnxpb.TensorProto {
	return &onnxpb.TensorProto{Dims: dims, DataType: proto.Int32(int32(onnxpb.TensorProto_FLOAT)), FloatData: vals}
}

// A test directory whose model has a symbolic batch runs with the batch of
// its data; a wrong expected value fails with the largest error.
func TestRunBindsSymbolicExtentsFromTheData(t *testing.T) {
	dir := t.TempDir()
	info := func(name string) *onnxpb.ValueInfoProto {
		return &onnxpb.ValueInfoProto{Name: proto.String(name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{
			ElemType: proto.Int32(int32(onnxpb.TensorProto_FLOAT)),
			Shape: &onnxpb.TensorShapeProto{Dim: []*onnxpb.TensorShapeProto_Dimension{
				{Value: &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: "batch"}},
				{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: 2}},
			}}}}}}
	}
	writeProto(t, filepath.Join(dir, "model.onnx"), &onnxpb.ModelProto{
		IrVersion:   proto.Int64(8),
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Version: proto.Int64(13)}},
		Graph: &onnxpb.GraphProto{
			Node:   []*onnxpb.NodeProto{{OpType: proto.String("Relu"), Input: []string{"x"}, Output: []string{"y"}}},
			Input:  []*onnxpb.ValueInfoProto{info("x")},
			Output: []*onnxpb.ValueInfoProto{info("y")},
		},
	})
	data := filepath.Join(dir, "test_data_set_0")
	writeProto(t, filepath.Join(data, "input_0.pb"), floats([]int64{3, 2}, -1, 2, -3, 4, 5, float32(math.NaN())))
	writeProto(t, filepath.Join(data, "output_0.pb"), floats([]int64{3, 2}, 0, 2, 0, 4, 5, float32(math.NaN())))
	prog, err := check.NewProgram(parser.Parse)
	if err != nil {
		t.Fatal(err)
	}
	if o := Run(dir, Config{Timeout: time.Minute, Program: prog}); o.Status != Pass {
		t.Fatal(o.Line())
	}
	writeProto(t, filepath.Join(data, "output_0.pb"), floats([]int64{3, 2}, 0, 2, 0, 4, 5.5, float32(math.NaN())))
	if o := Run(dir, Config{Timeout: time.Minute, Program: prog}); o.Status != Fail || o.Detail != "output 0 (y): largest error 0.5 at [2 0]: got 5, want 5.5" {
		t.Errorf("got %q", o.Line())
	}
}
