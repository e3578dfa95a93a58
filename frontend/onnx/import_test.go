package onnx

import (
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"tofuc/parser"

	"google.golang.org/protobuf/proto"

	"tofuc/analysis/check"
	"tofuc/frontend/onnx/onnxpb"
	"tofuc/internal/onnxbuild"
	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/runtime/exec"
	"tofuc/runtime/tensor"
)

// Small ONNX models are built with internal/onnxbuild.

func model(g *onnxpb.GraphProto, opset int64) *Model {
	return &Model{Path: "test.onnx", Proto: &onnxpb.ModelProto{
		IrVersion:   proto.Int64(8),
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(opset)}},
		Graph:       g,
	}}
}

// run imports m, checks the TDL and evaluates it on inputs (by ONNX name).
func run(t *testing.T, m *Model, opts Options, inputs map[string]*tensor.Tensor, set map[string]ir.AttrValue) (*Result, []*tensor.Tensor) {
	t.Helper()
	res, err := Import(m, opts)
	if err != nil {
		t.Fatal(err)
	}
	prog, err := check.NewProgram(parser.Parse)
	if err != nil {
		t.Fatal(err)
	}
	mod, err := prog.LoadSource("test.tdl", res.Source)
	if err != nil {
		t.Fatalf("%v\n%s", err, res.Source)
	}
	g, err := mod.Model("", set)
	if err != nil {
		t.Fatalf("%v\n%s", err, res.Source)
	}
	feed := map[string]*tensor.Tensor{}
	for _, p := range res.Inputs {
		feed[p.TDL] = inputs[p.ONNX]
	}
	out, err := exec.Run(g, exec.Interp{}, feed, res.Params, 0)
	if err != nil {
		t.Fatal(err)
	}
	var outs []*tensor.Tensor
	for _, v := range g.Outputs {
		outs = append(outs, out.Outputs[v.Name])
	}
	return res, outs
}

func TestImportFoldsConstantsAndKeepsInitializersAsParameters(t *testing.T) {
	// y = relu(x @ w + b) * 2, with b = ConstantOfShape(Shape(w)[1:2]) (folded)
	// and the 2 from a Constant.
	g := &onnxpb.GraphProto{
		Node: []*onnxpb.NodeProto{
			onnxbuild.Node("Shape", []string{"w"}, []string{"wshape"}),
			onnxbuild.Node("Slice", []string{"wshape", "one", "two"}, []string{"n"}),
			onnxbuild.Node("ConstantOfShape", []string{"n"}, []string{"b"}, &onnxpb.AttributeProto{Name: proto.String("value"), T: onnxbuild.FloatTensor("", []int64{1}, 0.5)}),
			onnxbuild.Node("MatMul", []string{"x", "w"}, []string{"xw"}),
			onnxbuild.Node("Add", []string{"xw", "b"}, []string{"pre"}),
			onnxbuild.Node("Relu", []string{"pre"}, []string{"h"}),
			onnxbuild.Node("Constant", []string{}, []string{"two_f"}, &onnxpb.AttributeProto{Name: proto.String("value_float"), F: proto.Float32(2)}),
			onnxbuild.Node("Mul", []string{"h", "two_f"}, []string{"y"}),
		},
		Initializer: []*onnxpb.TensorProto{onnxbuild.FloatTensor("w", []int64{2, 3}, 1, -1, 0, 2, 1, -3), onnxbuild.Int64Tensor("one", 1), onnxbuild.Int64Tensor("two", 2)},
		Input:       []*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("x", onnxpb.TensorProto_FLOAT, "batch", 2), onnxbuild.TensorInfo("w", onnxpb.TensorProto_FLOAT, 2, 3)},
		Output:      []*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("y", onnxpb.TensorProto_FLOAT, "batch", 3)},
	}
	x := tensor.FromFloats(lang.F32, []int{2, 2}, []float64{1, 2, -1, 0})
	res, outs := run(t, model(g, 17), Options{}, map[string]*tensor.Tensor{"x": x}, map[string]ir.AttrValue{"batch": {Kind: ir.AttrInt, Int: 2}})
	src := string(res.Source)
	for _, want := range []string{"model test<batch = 1>(x: f32[batch, 2])", "w = param f32[2, 3]", "full<shape = [3], value = 0.5>()", "relu("} {
		if !strings.Contains(src, want) {
			t.Errorf("source lacks %q:\n%s", want, src)
		}
	}
	if len(res.Params) != 1 || res.Params["w"] == nil {
		t.Errorf("params %v, want only w", res.Params)
	}
	if res.Folded < 4 {
		t.Errorf("%d nodes folded, want the 4 constant ones", res.Folded)
	}
	// x @ w = [[5, 1, -6], [-1, 1, 0]]; + 0.5, relu, * 2.
	want := tensor.FromFloats(lang.F32, []int{2, 3}, []float64{11, 3, 0, 0, 3, 1})
	if err := tensor.Compare(outs[0], want, tensor.Exact); err != nil {
		t.Error(err)
	}
}

func TestImportListsEveryUnsupportedOperator(t *testing.T) {
	g := &onnxpb.GraphProto{
		Node: []*onnxpb.NodeProto{
			onnxbuild.Node("Relu", []string{"x"}, []string{"a"}),
			onnxbuild.Node("FancyOp", []string{"a"}, []string{"b"}),
			onnxbuild.Node("Relu", []string{"b"}, []string{"c"}),
			{OpType: proto.String("Custom"), Domain: proto.String("com.example"), Input: []string{"c"}, Output: []string{"d"}, Name: proto.String("mine")},
		},
		Input:  []*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("x", onnxpb.TensorProto_FLOAT, 4)},
		Output: []*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("d", onnxpb.TensorProto_FLOAT, 4)},
	}
	_, err := Import(model(g, 13), Options{})
	var unsup *UnsupportedError
	if !errors.As(err, &unsup) || len(unsup.Ops) != 2 {
		t.Fatalf("got %v, want both unsupported operators", err)
	}
	msg := err.Error()
	for _, want := range []string{`FancyOp (node "FancyOp_b", opset 13)`, `com.example.Custom (node "mine", opset 13)`} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
}

func TestImportBindsShapeInputsFromKnownValues(t *testing.T) {
	g := &onnxpb.GraphProto{
		Node:   []*onnxpb.NodeProto{onnxbuild.Node("Reshape", []string{"x", "shape"}, []string{"y"})},
		Input:  []*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("x", onnxpb.TensorProto_FLOAT, 2, 3), onnxbuild.TensorInfo("shape", onnxpb.TensorProto_INT64, 2)},
		Output: []*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("y", onnxpb.TensorProto_FLOAT, 3, 2)},
	}
	if _, err := Import(model(g, 13), Options{}); err == nil || !strings.Contains(err.Error(), `input "shape" must be known at import`) {
		t.Fatalf("without a value: %v", err)
	}
	x := tensor.FromFloats(lang.F32, []int{2, 3}, []float64{1, 2, 3, 4, 5, 6})
	shape := tensor.FromInts(lang.I64, []int{2}, []int64{3, -1})
	res, outs := run(t, model(g, 13), Options{Known: map[string]*tensor.Tensor{"shape": shape}}, map[string]*tensor.Tensor{"x": x}, nil)
	if len(res.Inputs) != 1 || res.Inputs[0].ONNX != "x" {
		t.Errorf("inputs %v, want only x", res.Inputs)
	}
	if fmtShape := outs[0].Shape; len(fmtShape) != 2 || fmtShape[0] != 3 || fmtShape[1] != 2 {
		t.Errorf("shape %v, want [3 2]", fmtShape)
	}
}

// TestImportBindsInputsComputedIntoShapes: a graph input from which a
// compile-time input is computed (Reshape's shape as x's shape plus
// an offset) must be known too, but not one read only for its shape (x).
func TestImportBindsInputsComputedIntoShapes(t *testing.T) {
	g := &onnxpb.GraphProto{
		Node: []*onnxpb.NodeProto{
			onnxbuild.Node("Shape", []string{"x"}, []string{"s"}),
			onnxbuild.Node("Add", []string{"s", "d"}, []string{"shape"}),
			onnxbuild.Node("ConstantOfShape", []string{"shape"}, []string{"y"}),
		},
		Input:  []*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("x", onnxpb.TensorProto_FLOAT, 2, 3), onnxbuild.TensorInfo("d", onnxpb.TensorProto_INT64, 2)},
		Output: []*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("y", onnxpb.TensorProto_FLOAT)},
	}
	if _, err := Import(model(g, 13), Options{}); err == nil || !strings.Contains(err.Error(), `input "d" must be known at import`) {
		t.Fatalf("without a value: %v", err)
	}
	d := tensor.FromInts(lang.I64, []int{2}, []int64{1, -1})
	res, outs := run(t, model(g, 13), Options{Known: map[string]*tensor.Tensor{"d": d}}, map[string]*tensor.Tensor{"x": tensor.New(lang.F32, []int{2, 3})}, nil)
	if len(res.Inputs) != 1 || res.Inputs[0].ONNX != "x" {
		t.Errorf("inputs %v, want only x", res.Inputs)
	}
	if s := outs[0].Shape; len(s) != 2 || s[0] != 3 || s[1] != 2 {
		t.Errorf("shape %v, want [3 2]", s)
	}
}

func TestImportNamesAreValidAndDistinct(t *testing.T) {
	g := &onnxpb.GraphProto{
		Node: []*onnxpb.NodeProto{
			onnxbuild.Node("Relu", []string{"input:0"}, []string{"relu"}),
			onnxbuild.Node("Neg", []string{"relu"}, []string{"0"}),
			onnxbuild.Node("Abs", []string{"0"}, []string{"conv1/out"}),
			onnxbuild.Node("Exp", []string{"conv1/out"}, []string{"conv1_out"}),
		},
		Input:  []*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("input:0", onnxpb.TensorProto_FLOAT, 2)},
		Output: []*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("conv1_out", onnxpb.TensorProto_FLOAT, 2), onnxbuild.TensorInfo("0", onnxpb.TensorProto_FLOAT, 2)},
	}
	x := tensor.FromFloats(lang.F32, []int{2}, []float64{-1, 2})
	res, outs := run(t, model(g, 13), Options{}, map[string]*tensor.Tensor{"input:0": x}, nil)
	seen := map[string]bool{}
	for _, p := range append(res.Inputs, res.Outputs...) {
		if seen[p.TDL] {
			t.Errorf("name %s used twice", p.TDL)
		}
		seen[p.TDL] = true
	}
	if got := outs[0].F[1]; math.Abs(got-math.Exp(2)) > 1e-5 {
		t.Errorf("exp(|-relu(2)|) = %v", got)
	}
}

func TestTensorRejectsAbsurdAndInconsistentSizes(t *testing.T) {
	for name, tp := range map[string]*onnxpb.TensorProto{
		"huge shape":     {Dims: []int64{1 << 40, 1 << 40}, DataType: proto.Int32(1), RawData: []byte{}},
		"negative dim":   {Dims: []int64{-3}, DataType: proto.Int32(1)},
		"short raw data": {Dims: []int64{4}, DataType: proto.Int32(1), RawData: make([]byte, 12)},
		"few floats":     {Dims: []int64{4}, DataType: proto.Int32(1), FloatData: []float32{1, 2}},
		"string":         {Dims: []int64{1}, DataType: proto.Int32(int32(onnxpb.TensorProto_STRING))},
		"external escapes": {Dims: []int64{1}, DataType: proto.Int32(1), DataLocation: onnxpb.TensorProto_EXTERNAL.Enum(),
			ExternalData: []*onnxpb.StringStringEntryProto{{Key: proto.String("location"), Value: proto.String("../../etc/passwd")}}},
	} {
		if _, err := Tensor(tp, t.TempDir()); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestTensorReadsExternalData(t *testing.T) {
	dir := t.TempDir()
	raw := make([]byte, 8+3*4)
	for i, v := range []float32{1.5, -2, 3} {
		binary.LittleEndian.PutUint32(raw[8+4*i:], math.Float32bits(v))
	}
	if err := os.WriteFile(filepath.Join(dir, "weights.bin"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	tp := &onnxpb.TensorProto{Name: proto.String("w"), Dims: []int64{3}, DataType: proto.Int32(1), DataLocation: onnxpb.TensorProto_EXTERNAL.Enum(),
		ExternalData: []*onnxpb.StringStringEntryProto{
			{Key: proto.String("location"), Value: proto.String("weights.bin")},
			{Key: proto.String("offset"), Value: proto.String("8")},
			{Key: proto.String("length"), Value: proto.String("12")},
		}}
	got, err := Tensor(tp, dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := tensor.Compare(got, tensor.FromFloats(lang.F32, []int{3}, []float64{1.5, -2, 3}), tensor.Exact); err != nil {
		t.Error(err)
	}
	tp.ExternalData[2].Value = proto.String("16")
	if _, err := Tensor(tp, dir); err == nil {
		t.Error("a length that does not match the shape was accepted")
	}
}

func TestDecodeRejectsMalformedFiles(t *testing.T) {
	good, err := proto.Marshal(model(&onnxpb.GraphProto{Name: proto.String("g")}, 13).Proto)
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{
		"truncated": good[:len(good)-3],
		"garbage":   []byte("this is not a protobuf"),
		"no graph":  {},
	} {
		if _, err := Decode(name, data); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func FuzzImport(f *testing.F) {
	for _, g := range []*onnxpb.GraphProto{
		{Node: []*onnxpb.NodeProto{onnxbuild.Node("Relu", []string{"x"}, []string{"y"})},
			Input: []*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("x", onnxpb.TensorProto_FLOAT, 2)}, Output: []*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("y", onnxpb.TensorProto_FLOAT, 2)}},
		{Node: []*onnxpb.NodeProto{onnxbuild.Node("Reshape", []string{"x", "s"}, []string{"y"}), onnxbuild.Node("Transpose", []string{"y"}, []string{"z"}, onnxbuild.Ints("perm", 1, 0))},
			Initializer: []*onnxpb.TensorProto{onnxbuild.Int64Tensor("s", 3, -1)},
			Input:       []*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("x", onnxpb.TensorProto_FLOAT, "n", 6)}, Output: []*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("z", onnxpb.TensorProto_FLOAT)}},
	} {
		data, err := proto.Marshal(model(g, 13).Proto)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	// Attention, LSTM and SwiGLU, whose converters build many calls.
	for _, b := range []onnxbuild.Built{onnxbuild.LSTM(), onnxbuild.TransformerBlock()} {
		data, err := proto.Marshal(b.Model)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	prog, err := check.NewProgram(parser.Parse)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Decode("fuzz.onnx", data)
		if err != nil {
			return
		}
		if res, err := Import(m, Options{Program: prog, FoldLimit: 1 << 16, CallLimit: 1 << 12}); err == nil && len(res.Source) == 0 {
			t.Error("an import without error gave no source")
		}
	})
}

// A PyTorch export of x.view(x.size(0), -1) with a symbolic batch keeps the
// batch symbolic: the Shape, Gather, Unsqueeze, Concat chain is computed
// symbolically and the Reshape copies the batch extent.
func TestImportSymbolicShapeChain(t *testing.T) {
	g := &onnxpb.GraphProto{
		Node: []*onnxpb.NodeProto{
			onnxbuild.Node("Shape", []string{"x"}, []string{"s"}),
			onnxbuild.Node("Gather", []string{"s", "zero"}, []string{"n"}),
			onnxbuild.Node("Unsqueeze", []string{"n", "axes0"}, []string{"n1"}),
			onnxbuild.Node("Concat", []string{"n1", "minus1"}, []string{"target"}, &onnxpb.AttributeProto{Name: proto.String("axis"), I: proto.Int64(0)}),
			onnxbuild.Node("Reshape", []string{"x", "target"}, []string{"flat"}),
			onnxbuild.Node("MatMul", []string{"flat", "w"}, []string{"y"}),
		},
		Initializer: []*onnxpb.TensorProto{
			{Name: proto.String("zero"), DataType: proto.Int32(int32(onnxpb.TensorProto_INT64)), Int64Data: []int64{0}},
			onnxbuild.Int64Tensor("axes0", 0), onnxbuild.Int64Tensor("minus1", -1),
			onnxbuild.FloatTensor("w", []int64{6, 1}, 1, 1, 1, 1, 1, 1),
		},
		Input:  []*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("x", onnxpb.TensorProto_FLOAT, "N", 2, 3)},
		Output: []*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("y", onnxpb.TensorProto_FLOAT, "N", 1)},
	}
	x := tensor.FromFloats(lang.F32, []int{3, 2, 3}, []float64{1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 0, 0, 0, 0, 0, 1})
	res, outs := run(t, model(g, 13), Options{}, map[string]*tensor.Tensor{"x": x}, map[string]ir.AttrValue{"N": {Kind: ir.AttrInt, Int: 3}})
	if !strings.Contains(string(res.Source), "reshape<shape = [0, -1]>(x)") {
		t.Errorf("the reshape does not copy the symbolic batch:\n%s", res.Source)
	}
	want := tensor.FromFloats(lang.F32, []int{3, 1}, []float64{6, 12, 1})
	if err := tensor.Compare(outs[0], want, tensor.Exact); err != nil {
		t.Error(err)
	}

	g.Node = append(g.Node[:1], onnxbuild.Node("ConstantOfShape", []string{"s"}, []string{"y"}))
	if _, err := Import(model(g, 13), Options{}); err == nil || !strings.Contains(err.Error(), "symbolic [N, 2, 3]") {
		t.Errorf("ConstantOfShape of a symbolic shape: %v", err)
	}
}

// Split along an axis of known extent works whatever the other axes
// are: a fused QKV projection of a dynamic batch splits along its last
// axis (opset 17's num_outputs-less form, and opset 18's num_outputs).
func TestImportSplitSymbolicBatch(t *testing.T) {
	for _, opset := range []int64{17, 18} {
		split := onnxbuild.Node("Split", []string{"x"}, []string{"a", "b", "c"}, &onnxpb.AttributeProto{Name: proto.String("axis"), I: proto.Int64(-1)})
		if opset == 18 {
			split.Attribute = append(split.Attribute, &onnxpb.AttributeProto{Name: proto.String("num_outputs"), I: proto.Int64(3)})
		}
		g := &onnxpb.GraphProto{
			Node:  []*onnxpb.NodeProto{split},
			Input: []*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("x", onnxpb.TensorProto_FLOAT, "N", 6)},
			Output: []*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("a", onnxpb.TensorProto_FLOAT, "N", 2),
				onnxbuild.TensorInfo("b", onnxpb.TensorProto_FLOAT, "N", 2), onnxbuild.TensorInfo("c", onnxpb.TensorProto_FLOAT, "N", 2)},
		}
		x := tensor.FromFloats(lang.F32, []int{2, 6}, []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
		_, outs := run(t, model(g, opset), Options{}, map[string]*tensor.Tensor{"x": x}, map[string]ir.AttrValue{"N": {Kind: ir.AttrInt, Int: 2}})
		for i, want := range [][]float64{{1, 2, 7, 8}, {3, 4, 9, 10}, {5, 6, 11, 12}} {
			if err := tensor.Compare(outs[i], tensor.FromFloats(lang.F32, []int{2, 2}, want), tensor.Exact); err != nil {
				t.Errorf("opset %d, output %d: %v", opset, i, err)
			}
		}
	}
}

// Resize of a dynamic-batch image by scales [1, 1, 2, 2] (how PyTorch
// exports nn.Upsample) needs only the resized axes' extents.
func TestImportResizeSymbolicBatch(t *testing.T) {
	g := &onnxpb.GraphProto{
		Node:        []*onnxpb.NodeProto{onnxbuild.Node("Resize", []string{"x", "", "scales"}, []string{"y"})},
		Initializer: []*onnxpb.TensorProto{onnxbuild.FloatTensor("scales", []int64{4}, 1, 1, 2, 2)},
		Input:       []*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("x", onnxpb.TensorProto_FLOAT, "N", 1, 2, 2)},
		Output:      []*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("y", onnxpb.TensorProto_FLOAT, "N", 1, 4, 4)},
	}
	x := tensor.FromFloats(lang.F32, []int{2, 1, 2, 2}, []float64{1, 2, 3, 4, 5, 6, 7, 8})
	_, outs := run(t, model(g, 13), Options{}, map[string]*tensor.Tensor{"x": x}, map[string]ir.AttrValue{"N": {Kind: ir.AttrInt, Int: 2}})
	want := tensor.FromFloats(lang.F32, []int{2, 1, 4, 4}, []float64{
		1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4,
		5, 5, 6, 6, 5, 5, 6, 6, 7, 7, 8, 8, 7, 7, 8, 8})
	if err := tensor.Compare(outs[0], want, tensor.Exact); err != nil {
		t.Error(err)
	}
}

// refEinsum evaluates an explicit equation without ellipses by brute force.
func refEinsum(eq string, ops []*tensor.Tensor) *tensor.Tensor {
	lhs, out, _ := strings.Cut(eq, "->")
	terms := strings.Split(lhs, ",")
	extent := map[byte]int{}
	for i, t := range terms {
		for k := range len(t) {
			extent[t[k]] = ops[i].Shape[k]
		}
	}
	var letters []byte
	for l := range extent {
		letters = append(letters, l)
	}
	shape := make([]int, len(out))
	for k := range len(out) {
		shape[k] = extent[out[k]]
	}
	res := tensor.New(lang.F32, shape)
	idx := map[byte]int{}
	var walk func(d int)
	walk = func(d int) {
		if d == len(letters) {
			prod := 1.0
			for i, t := range terms {
				pos := make([]int, len(t))
				for k := range len(t) {
					pos[k] = idx[t[k]]
				}
				prod *= ops[i].At(pos...)
			}
			pos := make([]int, len(out))
			for k := range len(out) {
				pos[k] = idx[out[k]]
			}
			res.Set(res.At(pos...)+prod, pos...)
			return
		}
		for v := range extent[letters[d]] {
			idx[letters[d]] = v
			walk(d + 1)
		}
	}
	walk(0)
	return res
}

func TestImportEinsum(t *testing.T) {
	for _, tc := range []struct {
		eq, explicit string
		shapes       [][]int
	}{
		{"ij,jk->ik", "ij,jk->ik", [][]int{{2, 3}, {3, 4}}},
		{"bij,bjk->bik", "bij,bjk->bik", [][]int{{2, 2, 3}, {2, 3, 2}}},
		{"ij,kj", "ij,kj->ik", [][]int{{2, 3}, {4, 3}}},
		{"i,i", "i,i->", [][]int{{5}, {5}}},
		{"ii->i", "ii->i", [][]int{{3, 3}}},
		{"ii", "ii->", [][]int{{3, 3}}},
		{"ij->ji", "ij->ji", [][]int{{2, 3}}},
		{"ijk->k", "ijk->k", [][]int{{2, 3, 2}}},
		{"...ij,...jk->...ik", "bij,bjk->bik", [][]int{{3, 2, 4}, {3, 4, 2}}},
		{"bii->bi", "bii->bi", [][]int{{2, 3, 3}}},
		{"iij,jk->ik", "iij,jk->ik", [][]int{{3, 3, 2}, {2, 4}}},
		{"ijji->", "ijji->", [][]int{{2, 3, 3, 2}}},
	} {
		var ins []*onnxpb.ValueInfoProto
		var names []string
		feed := map[string]*tensor.Tensor{}
		var ops []*tensor.Tensor
		for i, s := range tc.shapes {
			name := string(rune('a' + i))
			dims := make([]any, len(s))
			n := 1
			for k, d := range s {
				dims[k] = d
				n *= d
			}
			ins = append(ins, onnxbuild.TensorInfo(name, onnxpb.TensorProto_FLOAT, dims...))
			names = append(names, name)
			vals := make([]float64, n)
			for k := range vals {
				vals[k] = float64((k*7+i*3)%5 - 2)
			}
			feed[name] = tensor.FromFloats(lang.F32, s, vals)
			ops = append(ops, feed[name])
		}
		g := &onnxpb.GraphProto{
			Node:   []*onnxpb.NodeProto{onnxbuild.Node("Einsum", names, []string{"y"}, &onnxpb.AttributeProto{Name: proto.String("equation"), S: []byte(tc.eq)})},
			Input:  ins,
			Output: []*onnxpb.ValueInfoProto{{Name: proto.String("y")}},
		}
		_, outs := run(t, model(g, 12), Options{}, feed, nil)
		if err := tensor.Compare(outs[0], refEinsum(tc.explicit, ops), tensor.Exact); err != nil {
			t.Errorf("%s: %v", tc.eq, err)
		}
	}
}

func TestImportAliasedOutputs(t *testing.T) {
	g := &onnxpb.GraphProto{
		Node: []*onnxpb.NodeProto{
			onnxbuild.Node("Relu", []string{"x"}, []string{"r"}),
			onnxbuild.Node("Identity", []string{"r"}, []string{"a"}),
			onnxbuild.Node("Identity", []string{"r"}, []string{"b"}),
		},
		Input:  []*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("x", onnxpb.TensorProto_FLOAT, 2)},
		Output: []*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("a", onnxpb.TensorProto_FLOAT, 2), onnxbuild.TensorInfo("b", onnxpb.TensorProto_FLOAT, 2), onnxbuild.TensorInfo("x", onnxpb.TensorProto_FLOAT, 2)},
	}
	x := tensor.FromFloats(lang.F32, []int{2}, []float64{-1, 3})
	_, outs := run(t, model(g, 13), Options{}, map[string]*tensor.Tensor{"x": x}, nil)
	want := tensor.FromFloats(lang.F32, []int{2}, []float64{0, 3})
	for i, w := range []*tensor.Tensor{want, want, x} {
		if err := tensor.Compare(outs[i], w, tensor.Exact); err != nil {
			t.Errorf("output %d: %v", i, err)
		}
	}
}

// Malformed nodes are reported, with every other problem, and never panic.
func TestImportMalformedNodesAreErrors(t *testing.T) {
	g := &onnxpb.GraphProto{
		Node: []*onnxpb.NodeProto{
			onnxbuild.Node("Pad", []string{"v", "pads"}, []string{"p"}, &onnxpb.AttributeProto{Name: proto.String("mode"), S: []byte("reflect")}),
			onnxbuild.Node("MaxPool", []string{"v"}, []string{"m"}, onnxbuild.Ints("kernel_shape", 2)),
			onnxbuild.Node("Conv", []string{"m4", "w1"}, []string{"c"}),
			onnxbuild.Node("Concat", []string{}, []string{"cc"}),
			onnxbuild.Node("Range", []string{"zero", "nan", "one"}, []string{"r"}),
			onnxbuild.Node("FancyOp", []string{"v"}, []string{"f"}),
		},
		Initializer: []*onnxpb.TensorProto{onnxbuild.Int64Tensor("pads", -1, 1), onnxbuild.FloatTensor("w1", []int64{3}, 1, 2, 3),
			onnxbuild.FloatTensor("zero", nil, 0), onnxbuild.FloatTensor("nan", nil, float32(math.NaN())), onnxbuild.FloatTensor("one", nil, 1)},
		Input:  []*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("v", onnxpb.TensorProto_FLOAT, 4), onnxbuild.TensorInfo("m4", onnxpb.TensorProto_FLOAT, 1, 1, 4, 4)},
		Output: []*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("p", onnxpb.TensorProto_FLOAT, 6)},
	}
	_, err := Import(model(g, 18), Options{})
	var unsup *UnsupportedError
	if !errors.As(err, &unsup) || len(unsup.Ops) != 6 {
		t.Fatalf("got %v, want all six nodes reported", err)
	}
	if strings.Contains(err.Error(), "internal error") {
		t.Errorf("a converter panicked:\n%v", err)
	}
}

// Pad's edge, reflect and wrap modes on any axes, pads past the extent
// included, against a direct evaluation of NumPy's rules.
func TestImportPadModesOnAnyAxis(t *testing.T) {
	x := tensor.New(lang.F32, []int{2, 3, 2})
	for i := range x.Len() {
		x.SetFlat(i, float64(i+1))
	}
	pads := []int64{1, 0, 3, 2, 0, 1} // axis 0: 1, 2; axis 2: 3, 1
	for _, mode := range []string{"edge", "reflect", "wrap"} {
		g := &onnxpb.GraphProto{
			Node:        []*onnxpb.NodeProto{onnxbuild.Node("Pad", []string{"x", "pads"}, []string{"y"}, onnxbuild.String("mode", mode))},
			Initializer: []*onnxpb.TensorProto{onnxbuild.Int64Tensor("pads", pads...)},
			Input:       []*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("x", onnxpb.TensorProto_FLOAT, 2, 3, 2)},
			Output:      []*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("y", onnxpb.TensorProto_FLOAT, 5, 3, 6)},
		}
		_, outs := run(t, model(g, 19), Options{}, map[string]*tensor.Tensor{"x": x}, nil)
		// src maps a padded position to the input's along an axis of n.
		src := func(j, n int) int {
			switch mode {
			case "edge":
				return min(max(j, 0), n-1)
			case "wrap":
				return ((j % n) + n) % n
			}
			for j < 0 || j >= n { // reflect about the ends, again and again
				if j < 0 {
					j = -j
				} else {
					j = 2*(n-1) - j
				}
			}
			return j
		}
		want := tensor.New(lang.F32, []int{5, 3, 6})
		for a := range 5 {
			for b := range 3 {
				for c := range 6 {
					want.Set(x.At(src(a-1, 2), b, src(c-3, 2)), a, b, c)
				}
			}
		}
		if err := tensor.Compare(outs[0], want, tensor.Exact); err != nil {
			t.Errorf("mode %s: %v", mode, err)
		}
	}
}

// Before opset 7, broadcast = 1 with an axis aligns b at that axis.
func TestImportLegacyBroadcast(t *testing.T) {
	g := &onnxpb.GraphProto{
		Node: []*onnxpb.NodeProto{onnxbuild.Node("Add", []string{"x", "b"}, []string{"y"},
			&onnxpb.AttributeProto{Name: proto.String("broadcast"), I: proto.Int64(1)}, &onnxpb.AttributeProto{Name: proto.String("axis"), I: proto.Int64(1)})},
		Input:  []*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("x", onnxpb.TensorProto_FLOAT, 1, 2, 1, 2), onnxbuild.TensorInfo("b", onnxpb.TensorProto_FLOAT, 2)},
		Output: []*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("y", onnxpb.TensorProto_FLOAT, 1, 2, 1, 2)},
	}
	x := tensor.New(lang.F32, []int{1, 2, 1, 2})
	b := tensor.FromFloats(lang.F32, []int{2}, []float64{10, 20})
	_, outs := run(t, model(g, 6), Options{}, map[string]*tensor.Tensor{"x": x, "b": b}, nil)
	want := tensor.FromFloats(lang.F32, []int{1, 2, 1, 2}, []float64{10, 10, 20, 20})
	if err := tensor.Compare(outs[0], want, tensor.Exact); err != nil {
		t.Error(err)
	}
}

// ConvTranspose with output_shape and auto_pad NOTSET puts the larger half
// of the padding at the start, as the ONNX specification says.
func TestImportConvTransposeOutputShape(t *testing.T) {
	g := &onnxpb.GraphProto{
		Node:   []*onnxpb.NodeProto{onnxbuild.Node("ConvTranspose", []string{"x", "w"}, []string{"y"}, onnxbuild.Ints("strides", 2, 2), onnxbuild.Ints("output_shape", 6, 6))},
		Input:  []*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("x", onnxpb.TensorProto_FLOAT, 1, 1, 3, 3), onnxbuild.TensorInfo("w", onnxpb.TensorProto_FLOAT, 1, 1, 3, 3)},
		Output: []*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("y", onnxpb.TensorProto_FLOAT, 1, 1, 6, 6)},
	}
	x := tensor.New(lang.F32, []int{1, 1, 3, 3})
	w := tensor.New(lang.F32, []int{1, 1, 3, 3})
	for i := range 9 {
		x.F[i], w.F[i] = float64(i+1), float64(i%4)
	}
	_, outs := run(t, model(g, 13), Options{}, map[string]*tensor.Tensor{"x": x, "w": w}, nil)
	// Full output is 7x7 (pads 0); the total padding 1 goes to the start.
	want := tensor.New(lang.F32, []int{1, 1, 6, 6})
	for i := range 3 {
		for j := range 3 {
			for ki := range 3 {
				for kj := range 3 {
					oi, oj := 2*i+ki-1, 2*j+kj-1
					if oi >= 0 && oi < 6 && oj >= 0 && oj < 6 {
						want.Set(want.At(0, 0, oi, oj)+x.At(0, 0, i, j)*w.At(0, 0, ki, kj), 0, 0, oi, oj)
					}
				}
			}
		}
	}
	if err := tensor.Compare(outs[0], want, tensor.Exact); err != nil {
		t.Error(err)
	}
}

// TestDropoutInTraining: Dropout with training_mode true is the identity
// (mask all true) when its ratio is 0, and refused, naming the ratio,
// when it is not.
func TestDropoutInTraining(t *testing.T) {
	graph := func(ratio float32) *onnxpb.GraphProto {
		bools := &onnxpb.TensorProto{Name: proto.String("training"), DataType: proto.Int32(int32(onnxpb.TensorProto_BOOL)), Int32Data: []int32{1}}
		return &onnxpb.GraphProto{
			Node:        []*onnxpb.NodeProto{onnxbuild.Node("Dropout", []string{"x", "ratio", "training"}, []string{"y", "mask"})},
			Initializer: []*onnxpb.TensorProto{onnxbuild.FloatTensor("ratio", nil, ratio), bools},
			Input:       []*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("x", onnxpb.TensorProto_FLOAT, 3)},
			Output:      []*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("y", onnxpb.TensorProto_FLOAT, 3), onnxbuild.TensorInfo("mask", onnxpb.TensorProto_BOOL, 3)},
		}
	}
	x := tensor.FromFloats(lang.F32, []int{3}, []float64{1, -2, 3})
	_, outs := run(t, model(graph(0), 17), Options{}, map[string]*tensor.Tensor{"x": x}, nil)
	for i := range 3 {
		if outs[0].Flat(i) != x.Flat(i) || outs[1].Flat(i) != 1 {
			t.Fatalf("ratio 0: y %v, mask %v; want x and all true", outs[0], outs[1])
		}
	}
	if _, err := Import(model(graph(0.1), 17), Options{}); err == nil || !strings.Contains(err.Error(), "training_mode = true with ratio 0.1") {
		t.Errorf("ratio 0.1: %v", err)
	}
}

// TestImportMatMulOfWeights: MatMul of a batch of rows by a 2-D matrix
// (a layer's weights) is linear_nobias, whose matrix is read at its own
// indices only, so that the batch is the product's rows (as
// matmul_broadcast it was a batch of one-row products); a batch by a
// batch stays matmul_broadcast. Both equal to a direct product.
func TestImportMatMulOfWeights(t *testing.T) {
	for _, tc := range []struct {
		name   string
		wShape []int64
		want   string
	}{{"2-D weights", []int64{3, 2}, "linear_nobias(x, w)"}, {"batched", []int64{2, 3, 2}, "matmul_broadcast(x, w)"}} {
		n := int64(1)
		for _, d := range tc.wShape {
			n *= d
		}
		w := make([]float32, n)
		for i := range w {
			w[i] = float32(i%5) - 2
		}
		g := &onnxpb.GraphProto{
			Node:        []*onnxpb.NodeProto{onnxbuild.Node("MatMul", []string{"x", "w"}, []string{"y"})},
			Initializer: []*onnxpb.TensorProto{onnxbuild.FloatTensor("w", tc.wShape, w...)},
			Input:       []*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("x", onnxpb.TensorProto_FLOAT, 2, 4, 3)},
			Output:      []*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("y", onnxpb.TensorProto_FLOAT)},
		}
		x := tensor.New(lang.F32, []int{2, 4, 3})
		for i := range x.Len() {
			x.SetFlat(i, float64(i%7)-3)
		}
		res, outs := run(t, model(g, 13), Options{}, map[string]*tensor.Tensor{"x": x}, nil)
		if !strings.Contains(string(res.Source), tc.want) {
			t.Errorf("%s: no %s in\n%s", tc.name, tc.want, res.Source)
		}
		want := tensor.New(lang.F32, []int{2, 4, 2})
		for b := range 2 {
			for i := range 4 {
				for j := range 2 {
					sum := 0.0
					for k := range 3 {
						wk := k*2 + j
						if len(tc.wShape) == 3 {
							wk += b * 6
						}
						sum += x.F[(b*4+i)*3+k] * float64(w[wk])
					}
					want.F[(b*4+i)*2+j] = sum
				}
			}
		}
		if err := tensor.Compare(outs[0], want, tensor.Exact); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}
