package onnx

import (
	"math"
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

// leibniz is the determinant of the n x n matrix a by the sum over
// permutations.
func leibniz(a []float64, n int) float64 {
	perm := make([]int, n)
	used := make([]bool, n)
	var rec func(i int, sign, prod float64) float64
	rec = func(i int, sign, prod float64) float64 {
		if i == n {
			return sign * prod
		}
		s := 0.0
		for j := range n {
			if used[j] {
				continue
			}
			inv := 0 // the inversions j adds: used columns after it
			for k := j + 1; k < n; k++ {
				if used[k] {
					inv++
				}
			}
			sg := sign
			if inv%2 == 1 {
				sg = -sign
			}
			used[j], perm[i] = true, j
			s += rec(i+1, sg, prod*a[i*n+j])
			used[j] = false
		}
		return s
	}
	return rec(0, 1, 1)
}

// TestImportDet checks Det of a batch of 4x4 matrices, one singular and
// one needing row swaps, against the Leibniz formula.
func TestImportDet(t *testing.T) {
	const b, n = 3, 4
	r := rand.New(rand.NewPCG(3, 4))
	vals := make([]float64, b*n*n)
	for i := range vals {
		vals[i] = float64(float32(r.NormFloat64()))
	}
	copy(vals[n*n+2*n:n*n+3*n], vals[n*n:n*n+n]) // matrix 1: rows 0 and 2 equal
	vals[2*n*n] = 0                              // matrix 2: a zero at the first pivot
	x := tensor.FromFloats(lang.F64, []int{b, n, n}, vals)
	f64 := onnxpb.TensorProto_DOUBLE
	g := onnxbuild.Graph("g", []*onnxpb.NodeProto{onnxbuild.Node("Det", []string{"x"}, []string{"y"})},
		[]*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("x", f64, b, n, n)}, []*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("y", f64)})
	_, got := run(t, model(g, 22), Options{}, map[string]*tensor.Tensor{"x": x}, nil)
	for k := range b {
		want := leibniz(vals[k*n*n:(k+1)*n*n], n)
		if d := got[0].Flat(k) - want; d > 1e-12 || d < -1e-12 {
			t.Errorf("matrix %d: det %v, want %v", k, got[0].Flat(k), want)
		}
	}
}

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
