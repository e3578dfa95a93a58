package onnx

import (
	"math/rand/v2"
	"slices"
	"testing"

	"tofuc/analysis/check"
	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/parser"
	"tofuc/runtime/interp"
	"tofuc/runtime/tensor"
)

// TestRelayoutFoldEqualsInterpreter: folding a relayout by copying its
// elements gives what the interpreter computes from the operator's
// definition, for every relayout, in float and integer dtypes, on shapes
// where the order of the elements matters.
func TestRelayoutFoldEqualsInterpreter(t *testing.T) {
	prog, err := check.NewProgram(parser.Parse)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		op    string
		attrs map[string]ir.AttrValue
		shape []int
	}{
		{"reshape", map[string]ir.AttrValue{"shape": ir.IntList(6, -1)}, []int{2, 3, 4, 5}},
		{"reshape", map[string]ir.AttrValue{"shape": ir.IntList(0, 3, 0, -1)}, []int{2, 5, 4, 3}},
		{"reshape", map[string]ir.AttrValue{"shape": ir.IntList(-1)}, []int{3, 7, 2}},
		{"flatten", map[string]ir.AttrValue{"axis": {Kind: ir.AttrInt, Int: 2}}, []int{2, 3, 4, 5}},
		{"flatten", map[string]ir.AttrValue{"axis": {Kind: ir.AttrInt, Int: 0}}, []int{3, 4}},
		{"squeeze", map[string]ir.AttrValue{"axes": ir.IntList(1, 3)}, []int{4, 1, 3, 1, 2}},
		{"unsqueeze", map[string]ir.AttrValue{"axes": ir.IntList(0, 3)}, []int{3, 5, 2}},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range cases {
		for _, dt := range []lang.DType{lang.F32, lang.I64} {
			in := tensor.New(dt, c.shape)
			for i := range in.Len() {
				in.SetFlat(i, float64(rng.IntN(1000)-500)/8)
			}
			dims := make([]lang.Dim, len(c.shape))
			for i, n := range c.shape {
				dims[i] = lang.Const(int64(n))
			}
			inst, err := prog.Instantiate(prog.StdOps()[c.op], c.attrs, []check.TensorType{{DType: dt, Shape: dims}}, lang.Pos{})
			if err != nil {
				t.Fatalf("%s%v: %v", c.op, c.shape, err)
			}
			fast := relayout(inst, []*tensor.Tensor{in})
			if fast == nil {
				t.Fatalf("%s%v %s: not folded as a relayout", c.op, c.shape, dt)
			}
			want, err := interp.EvalInstance(inst, []*tensor.Tensor{in}, nil)
			if err != nil {
				t.Fatal(err)
			}
			got := fast[0]
			if !slices.Equal(got.Shape, want[0].Shape) || got.DType != want[0].DType {
				t.Fatalf("%s%v %s: the copy is %s%v, the interpreter's %s%v", c.op, c.shape, dt, got.DType, got.Shape, want[0].DType, want[0].Shape)
			}
			for i := range got.Len() {
				if got.Flat(i) != want[0].Flat(i) {
					t.Fatalf("%s%v %s: element %d is %g, the interpreter's %g", c.op, c.shape, dt, i, got.Flat(i), want[0].Flat(i))
				}
			}
		}
	}
}
