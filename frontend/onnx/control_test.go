package onnx

import (
	"strings"
	"testing"

	"tofuc/frontend/onnx/onnxpb"
	"tofuc/internal/onnxbuild"
	"tofuc/lang"
	"tofuc/runtime/tensor"
)

func graphAttr(name string, g *onnxpb.GraphProto) *onnxpb.AttributeProto {
	typ := onnxpb.AttributeProto_GRAPH
	return &onnxpb.AttributeProto{Name: &name, Type: &typ, G: g}
}

// TestImportIf takes the branch a condition known at import names (a
// constant, or a graph input given in Options.Known), and refuses a
// condition computed from the data: both branches would run, the one not
// taken too.
func TestImportIf(t *testing.T) {
	f32, b := onnxpb.TensorProto_FLOAT, onnxpb.TensorProto_BOOL
	branch := func(op string) *onnxpb.GraphProto {
		return onnxbuild.Graph(op, []*onnxpb.NodeProto{onnxbuild.Node(op, []string{"x", "x"}, []string{op + "_y"})},
			nil, []*onnxpb.ValueInfoProto{onnxbuild.TensorInfo(op+"_y", f32)})
	}
	g := onnxbuild.Graph("g", []*onnxpb.NodeProto{onnxbuild.Node("If", []string{"c"}, []string{"y"},
		graphAttr("then_branch", branch("Add")), graphAttr("else_branch", branch("Mul")))},
		[]*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("c", b), onnxbuild.TensorInfo("x", f32, 3)},
		[]*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("y", f32)})
	if _, err := Import(model(g, 16), Options{}); err == nil || !strings.Contains(err.Error(), "not known at import") {
		t.Errorf("a condition given at run time: %v", err)
	}
	x := tensor.FromFloats(lang.F32, []int{3}, []float64{1, 2, 3})
	sum := tensor.FromFloats(lang.F32, []int{3}, []float64{2, 4, 6})
	prod := tensor.FromFloats(lang.F32, []int{3}, []float64{1, 4, 9})
	for _, cond := range []bool{true, false} {
		c := tensor.Scalar(lang.Bool, 0)
		want := prod
		if cond {
			c, want = tensor.Scalar(lang.Bool, 1), sum
		}
		_, got := run(t, model(g, 16), Options{Known: map[string]*tensor.Tensor{"c": c}}, map[string]*tensor.Tensor{"c": c, "x": x}, nil)
		if err := tensor.Compare(got[0], want, tensor.Exact); err != nil {
			t.Errorf("cond %v given as known: %v", cond, err)
		}
		dt := int32(b)
		constant := onnxbuild.Node("Constant", nil, []string{"c"}, onnxbuild.TensorAttr("value", &onnxpb.TensorProto{DataType: &dt, Int32Data: []int32{int32(c.Flat(0))}}))
		known := onnxbuild.Graph("g", append([]*onnxpb.NodeProto{constant}, g.Node...), g.Input[1:], g.Output)
		res, got := run(t, model(known, 16), Options{}, map[string]*tensor.Tensor{"x": x}, nil)
		if strings.Contains(string(res.Source), "where(") {
			t.Errorf("a condition known at import: where in\n%s", res.Source)
		}
		if err := tensor.Compare(got[0], want, tensor.Exact); err != nil {
			t.Errorf("cond %v at import: %v", cond, err)
		}
	}
}

// TestImportScan runs a reverse cumulative sum along axis 1 (scan input
// and output reversed) against a direct evaluation.
func TestImportScan(t *testing.T) {
	f32 := onnxpb.TensorProto_FLOAT
	body := onnxbuild.Graph("body", []*onnxpb.NodeProto{
		onnxbuild.Node("Add", []string{"s", "xt"}, []string{"s2"}),
		onnxbuild.Node("Identity", []string{"s2"}, []string{"yt"})},
		[]*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("s", f32, 2), onnxbuild.TensorInfo("xt", f32, 2)},
		[]*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("s2", f32, 2), onnxbuild.TensorInfo("yt", f32, 2)})
	g := onnxbuild.Graph("g", []*onnxpb.NodeProto{onnxbuild.Node("Scan", []string{"s0", "x"}, []string{"s", "y"},
		graphAttr("body", body), onnxbuild.Int("num_scan_inputs", 1),
		onnxbuild.Ints("scan_input_axes", 1), onnxbuild.Ints("scan_input_directions", 1),
		onnxbuild.Ints("scan_output_axes", -1), onnxbuild.Ints("scan_output_directions", 1))},
		[]*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("s0", f32, 2), onnxbuild.TensorInfo("x", f32, 2, 4)},
		[]*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("s", f32), onnxbuild.TensorInfo("y", f32)})
	s0 := tensor.FromFloats(lang.F32, []int{2}, []float64{100, 200})
	x := tensor.FromFloats(lang.F32, []int{2, 4}, []float64{1, 2, 3, 4, 5, 6, 7, 8})
	want := tensor.New(lang.F32, []int{2, 4})
	final := tensor.New(lang.F32, []int{2})
	for i := range 2 {
		acc := s0.At(i)
		for step := range 4 {
			j := 3 - step // reverse input
			acc += x.At(i, j)
			want.Set(acc, i, 3-step) // reverse output: step k at position L-1-k
		}
		final.Set(acc, i)
	}
	_, got := run(t, model(g, 16), Options{}, map[string]*tensor.Tensor{"s0": s0, "x": x}, nil)
	if err := tensor.Compare(got[0], final, tensor.Exact); err != nil {
		t.Errorf("final state: %v", err)
	}
	if err := tensor.Compare(got[1], want, tensor.Exact); err != nil {
		t.Errorf("scan output: %v", err)
	}
}

// TestImportLoop unrolls a loop whose body reads an outer value and
// stops on its condition; a condition unknown at import is reported.
func TestImportLoop(t *testing.T) {
	f32, i64, b := onnxpb.TensorProto_FLOAT, onnxpb.TensorProto_INT64, onnxpb.TensorProto_BOOL
	body := onnxbuild.Graph("body", []*onnxpb.NodeProto{
		onnxbuild.Node("Add", []string{"acc", "x"}, []string{"acc2"}),
		onnxbuild.Node("Less", []string{"i", "two"}, []string{"more"}),
		onnxbuild.Node("Cast", []string{"i"}, []string{"fi"}, onnxbuild.Int("to", int64(f32))),
		onnxbuild.Node("Mul", []string{"acc2", "fi"}, []string{"scan"})},
		[]*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("i", i64), onnxbuild.TensorInfo("c", b), onnxbuild.TensorInfo("acc", f32, 2)},
		[]*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("more", b), onnxbuild.TensorInfo("acc2", f32, 2), onnxbuild.TensorInfo("scan", f32, 2)})
	g := onnxbuild.Graph("g", []*onnxpb.NodeProto{onnxbuild.Node("Loop", []string{"n", "c0", "a0"}, []string{"a", "ys"}, graphAttr("body", body))},
		[]*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("n", i64), onnxbuild.TensorInfo("c0", b), onnxbuild.TensorInfo("a0", f32, 2), onnxbuild.TensorInfo("x", f32, 2)},
		[]*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("a", f32), onnxbuild.TensorInfo("ys", f32)},
		onnxbuild.Int64Tensor("two", 2))
	known := map[string]*tensor.Tensor{"n": tensor.Scalar(lang.I64, 10), "c0": tensor.Scalar(lang.Bool, 1)}
	a0 := tensor.FromFloats(lang.F32, []int{2}, []float64{1, 2})
	x := tensor.FromFloats(lang.F32, []int{2}, []float64{10, 20})
	// Iterations 0, 1 and 2 run (the condition i < 2 turns false at 2).
	a := tensor.FromFloats(lang.F32, []int{2}, []float64{31, 62})
	ys := tensor.FromFloats(lang.F32, []int{3, 2}, []float64{0, 0, 21, 42, 62, 124})
	_, got := run(t, model(g, 13), Options{Known: known}, map[string]*tensor.Tensor{"a0": a0, "x": x}, nil)
	if err := tensor.Compare(got[0], a, tensor.Exact); err != nil {
		t.Errorf("final value: %v", err)
	}
	if err := tensor.Compare(got[1], ys, tensor.Exact); err != nil {
		t.Errorf("scan output: %v", err)
	}
	// A condition computed from run-time data is reported.
	body.Node[1] = onnxbuild.Node("Less", []string{"x", "acc"}, []string{"more0"})
	body.Node = append(body.Node, onnxbuild.Node("Cast", []string{"more0"}, []string{"more0f"}, onnxbuild.Int("to", int64(f32))),
		onnxbuild.Node("ReduceMin", []string{"more0f"}, []string{"more1"}, onnxbuild.Int("keepdims", 0)),
		onnxbuild.Node("Cast", []string{"more1"}, []string{"more"}, onnxbuild.Int("to", int64(b))))
	if _, err := Import(model(g, 13), Options{Known: known}); err == nil || !strings.Contains(err.Error(), "must be known at import") {
		t.Errorf("run-time condition: %v", err)
	}
}

// TestImportSequenceOps edits a list of tensors at import: insert from
// the back, erase, at, length, and both ConcatFromSequence forms.
func TestImportSequenceOps(t *testing.T) {
	f32 := onnxpb.TensorProto_FLOAT
	nodes := []*onnxpb.NodeProto{
		onnxbuild.Node("SequenceConstruct", []string{"a", "b", "c"}, []string{"s0"}),
		onnxbuild.Node("SequenceInsert", []string{"s0", "d", "minus1"}, []string{"s1"}), // a b d c
		onnxbuild.Node("SequenceErase", []string{"s1", "zero"}, []string{"s2"}),         // b d c
		onnxbuild.Node("SequenceAt", []string{"s2", "one"}, []string{"at"}),
		onnxbuild.Node("SequenceLength", []string{"s2"}, []string{"n"}),
		onnxbuild.Node("ConcatFromSequence", []string{"s2"}, []string{"cat"}, onnxbuild.Int("axis", 0)),
		onnxbuild.Node("ConcatFromSequence", []string{"s2"}, []string{"stacked"}, onnxbuild.Int("axis", -1), onnxbuild.Int("new_axis", 1)),
	}
	var ins []*onnxpb.ValueInfoProto
	feed := map[string]*tensor.Tensor{}
	for k, name := range []string{"a", "b", "c", "d"} {
		ins = append(ins, onnxbuild.TensorInfo(name, f32, 2))
		feed[name] = tensor.FromFloats(lang.F32, []int{2}, []float64{float64(10 * k), float64(10*k + 1)})
	}
	g := onnxbuild.Graph("g", nodes, ins, []*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("at", f32), onnxbuild.TensorInfo("n", onnxpb.TensorProto_INT64),
		onnxbuild.TensorInfo("cat", f32), onnxbuild.TensorInfo("stacked", f32)},
		onnxbuild.Int64Tensor("minus1", -1), onnxbuild.Int64Tensor("zero", 0), onnxbuild.Int64Tensor("one", 1))
	_, got := run(t, model(g, 13), Options{}, feed, nil)
	want := []*tensor.Tensor{
		feed["d"],
		tensor.Scalar(lang.I64, 3),
		tensor.FromFloats(lang.F32, []int{6}, []float64{10, 11, 30, 31, 20, 21}),
		tensor.FromFloats(lang.F32, []int{2, 3}, []float64{10, 30, 20, 11, 31, 21}),
	}
	for i, w := range want {
		if err := tensor.Compare(got[i], w, tensor.Exact); err != nil {
			t.Errorf("output %d: %v", i, err)
		}
	}
}

// TestImportScan8 scans each batch element of an opset-8 Scan; its
// sequence_lens, a graph input bound at import, must be the full length.
func TestImportScan8(t *testing.T) {
	f32, i64 := onnxpb.TensorProto_FLOAT, onnxpb.TensorProto_INT64
	body := onnxbuild.Graph("body", []*onnxpb.NodeProto{
		onnxbuild.Node("Add", []string{"s", "xt"}, []string{"s2"}),
		onnxbuild.Node("Identity", []string{"s2"}, []string{"yt"})},
		[]*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("s", f32, 1), onnxbuild.TensorInfo("xt", f32, 1)},
		[]*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("s2", f32, 1), onnxbuild.TensorInfo("yt", f32, 1)})
	g := onnxbuild.Graph("g", []*onnxpb.NodeProto{onnxbuild.Node("Scan", []string{"lens", "s0", "x"}, []string{"s", "y"},
		graphAttr("body", body), onnxbuild.Int("num_scan_inputs", 1), onnxbuild.Ints("directions", 1))},
		[]*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("lens", i64, 2), onnxbuild.TensorInfo("s0", f32, 2, 1), onnxbuild.TensorInfo("x", f32, 2, 3, 1)},
		[]*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("s", f32), onnxbuild.TensorInfo("y", f32)})
	s0 := tensor.FromFloats(lang.F32, []int{2, 1}, []float64{0, 100})
	x := tensor.FromFloats(lang.F32, []int{2, 3, 1}, []float64{1, 2, 3, 4, 5, 6})
	full := map[string]*tensor.Tensor{"lens": tensor.FromInts(lang.I64, []int{2}, []int64{3, 3})}
	_, got := run(t, model(g, 8), Options{Known: full}, map[string]*tensor.Tensor{"s0": s0, "x": x}, nil)
	// Reverse: steps read x[b, 2], x[b, 1], x[b, 0].
	if err := tensor.Compare(got[0], tensor.FromFloats(lang.F32, []int{2, 1}, []float64{6, 115}), tensor.Exact); err != nil {
		t.Errorf("final state: %v", err)
	}
	if err := tensor.Compare(got[1], tensor.FromFloats(lang.F32, []int{2, 3, 1}, []float64{3, 5, 6, 106, 111, 115}), tensor.Exact); err != nil {
		t.Errorf("scan output: %v", err)
	}
	short := map[string]*tensor.Tensor{"lens": tensor.FromInts(lang.I64, []int{2}, []int64{3, 2})}
	if _, err := Import(model(g, 8), Options{Known: short}); err == nil || !strings.Contains(err.Error(), "only full-length sequences are supported") {
		t.Errorf("a shorter sequence: %v", err)
	}
}
