package onnx

import (
	"math"
	"testing"

	"tofuc/frontend/onnx/onnxpb"
	"tofuc/internal/onnxbuild"
	"tofuc/lang"
	"tofuc/runtime/tensor"
)

// TestImportBitCast runs BitCast between dtypes of each width against
// bit patterns worked out by hand.
func TestImportBitCast(t *testing.T) {
	type tc struct {
		from, to lang.DType
		in, want *tensor.Tensor
	}
	f := func(dt lang.DType, v ...float64) *tensor.Tensor { return tensor.FromFloats(dt, []int{len(v)}, v) }
	i := func(dt lang.DType, v ...int64) *tensor.Tensor { return tensor.FromInts(dt, []int{len(v)}, v) }
	b := func(v ...bool) *tensor.Tensor {
		out := tensor.New(lang.Bool, []int{len(v)})
		for k, x := range v {
			if x {
				out.I[k] = 1
			}
		}
		return out
	}
	for _, c := range []tc{
		{lang.F32, lang.U32, f(lang.F32, 1, -1), i(lang.U32, 0x3f800000, 0xbf800000)},
		{lang.U32, lang.F32, i(lang.U32, 0x3f800000, 0xbf800000), f(lang.F32, 1, -1)},
		{lang.I32, lang.F32, i(lang.I32, 0x40490fdb), f(lang.F32, float64(float32(3.1415927)))},
		{lang.F16, lang.BF16, f(lang.F16, 1, -2), f(lang.BF16, 0x1p-7, -2)},
		{lang.BF16, lang.F16, f(lang.BF16, 1), f(lang.F16, 1.875)},
		{lang.F16, lang.U16, f(lang.F16, math.Copysign(0, -1), 65504), i(lang.U16, 0x8000, 0x7bff)},
		{lang.U64, lang.F64, i(lang.U64, 0x3ff0000000000000), f(lang.F64, 1)},
		{lang.F64, lang.U64, f(lang.F64, -1), i(lang.U64, -0x4010000000000000)},
		{lang.Bool, lang.I8, b(true, false), i(lang.I8, 1, 0)},
		{lang.U8, lang.I8, i(lang.U8, 200, 5), i(lang.I8, -56, 5)},
		{lang.I8, lang.Bool, i(lang.I8, -1, 0), b(true, false)},
		{lang.I16, lang.U16, i(lang.I16, -1), i(lang.U16, 0xffff)},
	} {
		pf, pt := onnxElem(t, c.from), onnxElem(t, c.to)
		g := onnxbuild.Graph("g", []*onnxpb.NodeProto{onnxbuild.Node("BitCast", []string{"x"}, []string{"y"}, onnxbuild.Int("to", int64(pt)))},
			[]*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("x", pf, c.in.Shape[0])}, []*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("y", pt)})
		_, got := run(t, model(g, 26), Options{}, map[string]*tensor.Tensor{"x": c.in}, nil)
		if err := tensor.Compare(got[0], c.want, tensor.Exact); err != nil {
			t.Errorf("%s to %s: %v", c.from, c.to, err)
		}
	}
}

// onnxElem is the ONNX element type of dt.
func onnxElem(t *testing.T, dt lang.DType) onnxpb.TensorProto_DataType {
	for e := range int32(17) {
		if d, err := DType(e); err == nil && d == dt {
			return onnxpb.TensorProto_DataType(e)
		}
	}
	t.Fatalf("no ONNX element type for %s", dt)
	return 0
}
