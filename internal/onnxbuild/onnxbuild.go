// Package onnxbuild is test support: ONNX's helper API (onnx.helper's
// make_node, make_tensor, make_tensor_value_info, make_graph and
// make_model) in Go, to build small ONNX models in tests, and two such
// models, an LSTM and a transformer block (models.go).
package onnxbuild

import (
	"google.golang.org/protobuf/proto"

	"tofuc/frontend/onnx/onnxpb"
	"tofuc/lang"
	"tofuc/runtime/tensor"
)

// Node is make_node: op reading ins and writing outs.
func Node(op string, ins, outs []string, attrs ...*onnxpb.AttributeProto) *onnxpb.NodeProto {
	return &onnxpb.NodeProto{OpType: proto.String(op), Input: ins, Output: outs, Name: proto.String(op + "_" + outs[0]), Attribute: attrs}
}

// Int is an integer attribute.
func Int(name string, v int64) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_INT.Enum(), I: proto.Int64(v)}
}

// Ints is a list of integers attribute.
func Ints(name string, v ...int64) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_INTS.Enum(), Ints: v}
}

// Float is a float attribute.
func Float(name string, v float32) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_FLOAT.Enum(), F: proto.Float32(v)}
}

// String is a string attribute.
func String(name, v string) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_STRING.Enum(), S: []byte(v)}
}

// Floats is a list of floats attribute.
func Floats(name string, v ...float32) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_FLOATS.Enum(), Floats: v}
}

// Strings is a list of strings attribute.
func Strings(name string, v ...string) *onnxpb.AttributeProto {
	a := &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_STRINGS.Enum()}
	for _, s := range v {
		a.Strings = append(a.Strings, []byte(s))
	}
	return a
}

// TensorAttr is a tensor attribute (Constant's value, ConstantOfShape's).
func TensorAttr(name string, t *onnxpb.TensorProto) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_TENSOR.Enum(), T: t}
}

// TensorInfo is make_tensor_value_info: dims are ints (extents) or
// strings (symbolic dimensions).
func TensorInfo(name string, elem onnxpb.TensorProto_DataType, dims ...any) *onnxpb.ValueInfoProto {
	shape := &onnxpb.TensorShapeProto{}
	for _, d := range dims {
		dim := &onnxpb.TensorShapeProto_Dimension{}
		switch d := d.(type) {
		case int:
			dim.Value = &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: int64(d)}
		case string:
			dim.Value = &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: d}
		}
		shape.Dim = append(shape.Dim, dim)
	}
	return &onnxpb.ValueInfoProto{Name: proto.String(name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{
		TensorType: &onnxpb.TypeProto_Tensor{ElemType: proto.Int32(int32(elem)), Shape: shape}}}}
}

// FloatTensor is make_tensor for float32 values.
func FloatTensor(name string, dims []int64, vals ...float32) *onnxpb.TensorProto {
	return &onnxpb.TensorProto{Name: proto.String(name), Dims: dims, DataType: proto.Int32(int32(onnxpb.TensorProto_FLOAT)), FloatData: vals}
}

// Int64Tensor is make_tensor for a 1-D int64 tensor.
func Int64Tensor(name string, vals ...int64) *onnxpb.TensorProto {
	return &onnxpb.TensorProto{Name: proto.String(name), Dims: []int64{int64(len(vals))}, DataType: proto.Int32(int32(onnxpb.TensorProto_INT64)), Int64Data: vals}
}

// FromTensor is an f32 tensor as a TensorProto.
func FromTensor(name string, t *tensor.Tensor) *onnxpb.TensorProto {
	if t.DType != lang.F32 {
		panic("onnxbuild: only f32 tensors")
	}
	dims := make([]int64, len(t.Shape))
	for i, d := range t.Shape {
		dims[i] = int64(d)
	}
	vals := make([]float32, t.Len())
	for i := range vals {
		vals[i] = float32(t.F[i])
	}
	return FloatTensor(name, dims, vals...)
}

// Graph is make_graph.
func Graph(name string, nodes []*onnxpb.NodeProto, ins, outs []*onnxpb.ValueInfoProto, inits ...*onnxpb.TensorProto) *onnxpb.GraphProto {
	return &onnxpb.GraphProto{Name: proto.String(name), Node: nodes, Input: ins, Output: outs, Initializer: inits}
}

// Model is make_model with the default domain at opset.
func Model(g *onnxpb.GraphProto, opset int64) *onnxpb.ModelProto {
	return &onnxpb.ModelProto{
		IrVersion:    proto.Int64(10),
		ProducerName: proto.String("tofuc onnxbuild"),
		OpsetImport:  []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(opset)}},
		Graph:        g,
	}
}
