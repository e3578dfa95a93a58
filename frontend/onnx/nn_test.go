package onnx

import (
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
