package onnx

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"tofuc/frontend/onnx/onnxpb"
	"tofuc/internal/onnxbuild"
	"tofuc/lang"
	"tofuc/runtime/tensor"
)

// castModel is Cast(x) to the element type to, with Cast's saturate.
func castModel(n int, to onnxpb.TensorProto_DataType, saturate int64, extra ...*onnxpb.AttributeProto) *Model {
	attrs := append([]*onnxpb.AttributeProto{onnxbuild.Int("to", int64(to)), onnxbuild.Int("saturate", saturate)}, extra...)
	return model(onnxbuild.Graph("cast",
		[]*onnxpb.NodeProto{onnxbuild.Node("Cast", []string{"x"}, []string{"y"}, attrs...)},
		[]*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("x", onnxpb.TensorProto_FLOAT, n)},
		[]*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("y", to, n)}), 25)
}

// roundByTable rounds x to the nearest finite value of nt found by
// trying every code, ties to the even code; past the largest value (by
// rounding to a virtual next one) it overflows as ONNX's Cast defines.
func roundByTable(nt *narrowType, x float64, saturate bool) float64 {
	mf := nt.minifloat
	switch {
	case math.IsNaN(x):
		if !mf.hasNaN {
			return 0
		}
		return x
	case math.IsInf(x, 0) && (saturate || !mf.hasNaN):
		return math.Copysign(mf.maxFinite, x)
	case math.IsInf(x, 0) && mf.hasInf:
		return x
	case math.IsInf(x, 0):
		return math.NaN()
	}
	type point struct {
		v    float64
		even bool
	}
	var pts []point
	for c := range 1 << nt.bits {
		if v := nt.decode(uint8(c)); !math.IsNaN(v) && !math.IsInf(v, 0) {
			pts = append(pts, point{v, c%2 == 0})
		}
	}
	sort.Slice(pts, func(i, j int) bool { return pts[i].v < pts[j].v })
	top := pts[len(pts)-1]
	ulp := math.Ldexp(1, math.Ilogb(top.v)-mf.mantissa)
	pts = append(pts, point{top.v + ulp, !top.even}, point{-top.v - ulp, !top.even})
	best := pts[0]
	for _, p := range pts[1:] {
		d, db := math.Abs(p.v-x), math.Abs(best.v-x)
		if d < db || d == db && p.even && !best.even {
			best = p
		}
	}
	if math.Abs(best.v) <= mf.maxFinite {
		return best.v
	}
	switch {
	case saturate || !mf.hasNaN:
		return math.Copysign(mf.maxFinite, x)
	case mf.hasInf:
		return math.Copysign(math.Inf(1), x)
	}
	return math.NaN()
}

// TestCastToFloat8AndFloat4 checks Cast to every narrow float type, both
// saturating and not, against rounding by the type's table of values: at
// random magnitudes across its range and past it, at every midpoint
// between neighbouring values (the ties), and at zeros, infinities and nan.
func TestCastToFloat8AndFloat4(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for elem, nt := range narrowTypes {
		if nt.minifloat == nil {
			continue
		}
		var xs []float64
		for range 400 {
			mag := math.Ldexp(1, rng.IntN(2*nt.minifloat.mantissa+40)-nt.minifloat.mantissa-24) * nt.minifloat.maxFinite * 4 * rng.Float64()
			xs = append(xs, float64(float32(math.Copysign(mag, rng.Float64()-0.5))))
		}
		var vals []float64
		for c := range 1 << nt.bits {
			if v := nt.decode(uint8(c)); !math.IsNaN(v) && !math.IsInf(v, 0) {
				vals = append(vals, v)
			}
		}
		sort.Float64s(vals)
		for i := 1; i < len(vals); i++ {
			xs = append(xs, (vals[i-1]+vals[i])/2)
		}
		top := nt.minifloat.maxFinite
		ulp := math.Ldexp(1, math.Ilogb(top)-nt.minifloat.mantissa)
		xs = append(xs, 0, math.Copysign(0, -1), math.Inf(1), math.Inf(-1), math.NaN(), top+ulp/2, -top-ulp/2, top+ulp/4, top+ulp)
		x := tensor.FromFloats(lang.F32, []int{len(xs)}, xs)
		for _, saturate := range []bool{true, false} {
			sat := int64(0)
			if saturate {
				sat = 1
			}
			_, outs := run(t, castModel(len(xs), elem, sat), Options{}, map[string]*tensor.Tensor{"x": x}, nil)
			for i, v := range xs {
				got, want := outs[0].Flat(i), roundByTable(nt, v, saturate)
				if got != want && !(math.IsNaN(got) && math.IsNaN(want)) {
					t.Errorf("%s saturate %v: Cast(%g) = %g, want %g", nt.name, saturate, v, got, want)
				}
			}
		}
	}
}

// TestCastToE8M0 checks Cast to FLOAT8E8M0 in its three rounding modes
// against the powers of two on either side of each input.
func TestCastToE8M0(t *testing.T) {
	xs := []float64{1, 3, 0.75, 1.5, -6, 1e-39, 0, 5e37, 3e38, math.Inf(1), math.NaN(), math.Ldexp(1, -127), math.Ldexp(1.5, -127), 0.1, 1000}
	x := tensor.FromFloats(lang.F32, []int{len(xs)}, xs)
	for mode, name := range []string{"up", "down", "nearest"} {
		for _, saturate := range []int64{1, 0} {
			_, outs := run(t, castModel(len(xs), elemFloat8E8M0, saturate, onnxbuild.String("round_mode", name)), Options{}, map[string]*tensor.Tensor{"x": x}, nil)
			for i, v := range x.F {
				want := e8m0ByPowers(v, mode, saturate == 1)
				if got := outs[0].Flat(i); got != want && !(math.IsNaN(got) && math.IsNaN(want)) {
					t.Errorf("round_mode %s saturate %d: Cast(%g) = %g, want %g", name, saturate, v, got, want)
				}
			}
		}
	}
}

func e8m0ByPowers(x float64, mode int, saturate bool) float64 {
	a := math.Abs(x)
	if math.IsNaN(a) {
		return a
	}
	k := -127
	for k < 128 && math.Ldexp(1, k+1) <= a {
		k++
	}
	lo, hi := math.Ldexp(1, k), math.Ldexp(1, k+1)
	if mode == 0 && a > lo || mode == 2 && a-lo >= hi-a {
		k++
	}
	if k > 127 {
		if saturate {
			return math.Ldexp(1, 127)
		}
		return math.NaN()
	}
	return math.Ldexp(1, k)
}

// TestCastToNarrowIntegers checks that casts to 4- and 2-bit integers
// round floats to the nearest integer, ties to even, and wrap.
func TestCastToNarrowIntegers(t *testing.T) {
	xs := []float64{-9.7, -8, -2.5, -1, -0.4, 0, 0.9, 2.5, 2.7, 3, 3.5, 7.99, 8, 15, 16, 17.2, 100}
	x := tensor.FromFloats(lang.F32, []int{len(xs)}, xs)
	for elem, nt := range narrowTypes {
		if nt.minifloat != nil || nt.carrier == lang.F32 {
			continue
		}
		_, outs := run(t, castModel(len(xs), elem, 1), Options{}, map[string]*tensor.Tensor{"x": x}, nil)
		span := nt.hi - nt.lo + 1
		for i, v := range xs {
			want := ((int64(math.RoundToEven(v))-nt.lo)%span+span)%span + nt.lo
			if got := outs[0].Flat(i); got != float64(want) {
				t.Errorf("%s: Cast(%g) = %g, want %d", nt.name, v, got, want)
			}
		}
	}
}

// TestDecodeNarrowPacked reads 4- and 2-bit codes packed low bits first,
// from raw data and from int32_data, and float8 codes one to a byte.
func TestDecodeNarrowPacked(t *testing.T) {
	for _, tc := range []struct {
		elem onnxpb.TensorProto_DataType
		dims []int64
		raw  []byte
		want []float64
	}{
		{onnxpb.TensorProto_INT4, []int64{3}, []byte{0x9f, 0x07}, []float64{-1, -7, 7}},
		{onnxpb.TensorProto_UINT4, []int64{3}, []byte{0x9f, 0x07}, []float64{15, 9, 7}},
		{elemInt2, []int64{5}, []byte{0b11100100, 0b10}, []float64{0, 1, -2, -1, -2}},
		{elemUint2, []int64{4}, []byte{0b11100100}, []float64{0, 1, 2, 3}},
		{onnxpb.TensorProto_FLOAT8E4M3FN, []int64{4}, []byte{0x38, 0x7e, 0xff, 0x01}, []float64{1, 448, math.NaN(), math.Ldexp(1, -9)}},
		{onnxpb.TensorProto_FLOAT8E5M2FNUZ, []int64{3}, []byte{0x40, 0x80, 0x00}, []float64{1, math.NaN(), 0}},
		{onnxpb.TensorProto_FLOAT4E2M1, []int64{2}, []byte{0xf1}, []float64{0.5, -6}},
		{elemFloat8E8M0, []int64{2}, []byte{127, 0}, []float64{1, math.Ldexp(1, -127)}},
	} {
		ints := make([]int32, len(tc.raw))
		for i, b := range tc.raw {
			ints[i] = int32(b)
		}
		for _, tp := range []*onnxpb.TensorProto{
			{DataType: int32Ptr(int32(tc.elem)), Dims: tc.dims, RawData: tc.raw},
			{DataType: int32Ptr(int32(tc.elem)), Dims: tc.dims, Int32Data: ints},
		} {
			got, err := Tensor(tp, t.TempDir())
			if err != nil {
				t.Fatalf("%s: %v", tc.elem, err)
			}
			for i, w := range tc.want {
				if g := got.Flat(i); g != w && !(math.IsNaN(g) && math.IsNaN(w)) {
					t.Errorf("%s element %d: %g, want %g", narrowTypes[tc.elem].name, i, g, w)
				}
			}
		}
	}
	short := &onnxpb.TensorProto{DataType: int32Ptr(int32(onnxpb.TensorProto_INT4)), Dims: []int64{3}, RawData: []byte{1}}
	if _, err := Tensor(short, t.TempDir()); err == nil {
		t.Error("3 INT4 values in 1 byte: no error")
	}
}

func int32Ptr(v int32) *int32 { return &v }
