package onnx

import (
	"math"
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/proto"

	"tofuc/frontend/onnx/onnxpb"
	"tofuc/internal/onnxbuild"
	"tofuc/lang"
	"tofuc/runtime/tensor"
)

func u8Tensor(name string, dims []int64, vals ...int32) *onnxpb.TensorProto {
	return &onnxpb.TensorProto{Name: proto.String(name), Dims: dims, DataType: proto.Int32(int32(onnxpb.TensorProto_UINT8)), Int32Data: vals}
}

// TestQuantizeLinearPerAxis checks QuantizeLinear along axis 0 of a
// [2, 4] input against y = clip(round_half_even(x / s) + z, 0, 255): ties
// both ways, saturation at both ends.
func TestQuantizeLinearPerAxis(t *testing.T) {
	g := onnxbuild.Graph("q",
		[]*onnxpb.NodeProto{onnxbuild.Node("QuantizeLinear", []string{"x", "s", "z"}, []string{"y"}, onnxbuild.Int("axis", 0))},
		[]*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("x", onnxpb.TensorProto_FLOAT, 2, 4)},
		[]*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("y", onnxpb.TensorProto_UINT8, 2, 4)},
		onnxbuild.FloatTensor("s", []int64{2}, 2, 0.5), u8Tensor("z", []int64{2}, 10, 200))
	xs := []float64{5, 7, -1000, 1000, 0.25, 0.75, -150, 40}
	_, outs := run(t, model(g, 21), Options{}, map[string]*tensor.Tensor{"x": tensor.FromFloats(lang.F32, []int{2, 4}, xs)}, nil)
	scales, zeros := []float64{2, 0.5}, []float64{10, 200}
	for i, x := range xs {
		want := math.Min(255, math.Max(0, math.RoundToEven(x/scales[i/4])+zeros[i/4]))
		if got := outs[0].Flat(i); got != want {
			t.Errorf("x %g: %g, want %g", x, got, want)
		}
	}
}

// TestQLinearMatMulPerRowAndColumn checks QLinearMatMul with a per-row
// a_scale and zero point and a per-column b_scale against the integer
// product requantized in float64.
func TestQLinearMatMulPerRowAndColumn(t *testing.T) {
	const m, k, n = 3, 40, 2
	rng := rand.New(rand.NewPCG(3, 4))
	a, b := make([]int32, m*k), make([]int32, k*n)
	for i := range a {
		a[i] = rng.Int32N(256)
	}
	for i := range b {
		b[i] = rng.Int32N(256)
	}
	as, az := []float32{0.02, 0.05, 0.03}, []int32{120, 128, 3}
	bs, bz := []float32{0.01, 0.04}, []int32{128, 100}
	g := onnxbuild.Graph("qmm",
		[]*onnxpb.NodeProto{onnxbuild.Node("QLinearMatMul", []string{"a", "as", "az", "b", "bs", "bz", "ys", "yz"}, []string{"y"})},
		nil, []*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("y", onnxpb.TensorProto_UINT8, m, n)},
		u8Tensor("a", []int64{m, k}, a...), onnxbuild.FloatTensor("as", []int64{m}, as...), u8Tensor("az", []int64{m}, az...),
		u8Tensor("b", []int64{k, n}, b...), onnxbuild.FloatTensor("bs", []int64{n}, bs...), u8Tensor("bz", []int64{n}, bz...),
		onnxbuild.FloatTensor("ys", nil, 0.7), u8Tensor("yz", nil, 90))
	_, outs := run(t, model(g, 21), Options{}, nil, nil)
	for i := range m {
		for j := range n {
			sum := 0.0
			for l := range k {
				sum += float64(a[i*k+l]-az[i]) * float64(b[l*n+j]-bz[j])
			}
			scale := float64(float32(float32(as[i]*bs[j]) / float32(0.7)))
			want := math.Min(255, math.Max(0, math.RoundToEven(sum*scale)+90))
			if got := outs[0].Flat(i*n + j); got != want {
				t.Errorf("y[%d, %d] = %g, want %g", i, j, got, want)
			}
		}
	}
}

// TestTypesOfComputedValues: the element type a conversion depends on is
// found where no value_info declares it: a zero point computed by Neg is
// int8 (not the default uint8), a float8 CastLike target reached through
// Where rounds, and MatMulInteger takes a 1-D operand as MatMul does.
func TestTypesOfComputedValues(t *testing.T) {
	i8 := &onnxpb.TensorProto{Name: proto.String("z"), DataType: proto.Int32(int32(onnxpb.TensorProto_INT8)), Int32Data: []int32{5}}
	fp8 := &onnxpb.TensorProto{Name: proto.String("t"), Dims: []int64{1}, DataType: proto.Int32(int32(onnxpb.TensorProto_FLOAT8E4M3FN)), RawData: []byte{0x38}}
	g := onnxbuild.Graph("types",
		[]*onnxpb.NodeProto{
			onnxbuild.Node("Neg", []string{"z"}, []string{"zn"}),
			onnxbuild.Node("QuantizeLinear", []string{"x", "s", "zn"}, []string{"q"}),
			onnxbuild.Node("Where", []string{"c", "t", "t"}, []string{"w"}),
			onnxbuild.Node("CastLike", []string{"x", "w"}, []string{"y"}),
			onnxbuild.Node("MatMulInteger", []string{"a", "b"}, []string{"m"}),
		},
		[]*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("x", onnxpb.TensorProto_FLOAT, 3), onnxbuild.TensorInfo("c", onnxpb.TensorProto_BOOL, 1)},
		[]*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("q", onnxpb.TensorProto_INT8, 3), onnxbuild.TensorInfo("y", onnxpb.TensorProto_FLOAT8E4M3FN, 3),
			onnxbuild.TensorInfo("m", onnxpb.TensorProto_INT32, 2)},
		i8, fp8, onnxbuild.FloatTensor("s", nil, 2), u8Tensor("a", []int64{3}, 1, 2, 3), u8Tensor("b", []int64{3, 2}, 1, 0, 0, 1, 1, 1))
	x := tensor.FromFloats(lang.F32, []int{3}, []float64{-20, 1000, 17})
	c := tensor.New(lang.Bool, []int{1})
	_, outs := run(t, model(g, 21), Options{}, map[string]*tensor.Tensor{"x": x, "c": c}, nil)
	for _, check := range []struct {
		what string
		got  *tensor.Tensor
		want []float64
	}{
		{"QuantizeLinear to int8", outs[0], []float64{-15, 127, 3}},
		{"CastLike to FLOAT8E4M3FN", outs[1], []float64{-20, 448, 16}},
		{"MatMulInteger of a 1-D a", outs[2], []float64{4, 5}},
	} {
		for i, w := range check.want {
			if g := check.got.Flat(i); g != w {
				t.Errorf("%s: element %d is %g, want %g (dtype %s)", check.what, i, g, w, check.got.DType)
			}
		}
	}
}
