package interp

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/runtime/tensor"
)

// identical reports whether two tensors have the same dtype, shape and bits.
func identical(a, b *tensor.Tensor) error {
	if a.DType != b.DType || fmt.Sprint(a.Shape) != fmt.Sprint(b.Shape) {
		return fmt.Errorf("%s%v vs %s%v", a.DType, a.Shape, b.DType, b.Shape)
	}
	for i := range a.F {
		if math.Float64bits(a.F[i]) != math.Float64bits(b.F[i]) {
			return fmt.Errorf("element %d: %v vs %v", i, a.F[i], b.F[i])
		}
	}
	for i := range a.I {
		if a.I[i] != b.I[i] {
			return fmt.Errorf("element %d: %v vs %v", i, a.I[i], b.I[i])
		}
	}
	return nil
}

// TestVectorParity checks that the vector path gives bit-identical results
// to the scalar path (the plain reading of the semantics) on expressions
// that exercise its special cases.
func TestVectorParity(t *testing.T) {
	f32 := lang.F32
	type tcase struct {
		name   string
		inst   *ir.Instance
		inputs []*tensor.Tensor
	}
	r := rand.New(rand.NewPCG(21, 22))
	withNaN := func(x *tensor.Tensor) *tensor.Tensor {
		for i := 0; i < len(x.F); i += 7 {
			x.F[i] = math.NaN()
		}
		return x
	}
	var cases []tcase
	{
		// Mixed dimensions, a negative coefficient and a default that
		// depends on the row: y[i, j] = x[i+j-2, 2*j-i] or (i - j).
		x := tens("x", f32, dims(5, 9)...)
		y := tens("y", f32, dims(4, 6)...)
		cases = append(cases, tcase{"mixed", inst([]*ir.Tensor{x}, def(y, func(v ...*ir.Var) ir.Expr {
			return atd(x, &ir.Cast{X: sub(ref(v[0]), ref(v[1])), T: f32},
				sub(add(ref(v[0]), ref(v[1])), ci(2)), sub(mul(ci(2), ref(v[1])), ref(v[0])))
		})), []*tensor.Tensor{randTensor(r, f32, 5, 9)}})
	}
	{
		// Segments (a row longer than a block), a reversed row and a fused
		// sum of a vector times a uniform value.
		x := tens("x", lang.F64, dims(3, 700)...)
		s := tens("s", lang.F64, dims(3)...)
		y := tens("y", lang.F64, dims(2, 700)...)
		k := vr("k", lang.Const(3))
		cases = append(cases, tcase{"segments", inst([]*ir.Tensor{x, s}, def(y, func(v ...*ir.Var) ir.Expr {
			return add(sum(lang.F64, mul(at(x, ref(k), sub(ci(699), ref(v[1]))), at(s, ref(k))), k), &ir.Cast{X: ref(v[0]), T: lang.F64})
		})), []*tensor.Tensor{randTensor(r, lang.F64, 3, 700), randTensor(r, lang.F64, 3)}})
	}
	for _, kind := range []ir.Reducer{ir.Max, ir.Min, ir.Prod, ir.Sum} {
		// Reductions with NaN, partial blocks (h = 7 with 3 rows per
		// block) and a strided access.
		x := tens("x", f32, dims(2, 7, 3, 300)...)
		y := tens("y", lang.F16, dims(2, 7, 150)...)
		k := vr("k", lang.Const(3))
		cases = append(cases, tcase{"reduce " + kind.String(), inst([]*ir.Tensor{x}, def(y, func(v ...*ir.Var) ir.Expr {
			return &ir.Reduce{Kind: kind, Vars: []*ir.Var{k}, Body: at(x, ref(v[0]), ref(v[1]), ref(k), mul(ref(v[2]), ci(2))), T: f32}
		})), []*tensor.Tensor{withNaN(randTensor(r, f32, 2, 7, 3, 300))}})
	}
	{
		// Scalar fallbacks inside vector code: Select, integer arithmetic,
		// math calls, comparisons, an opaque call and casts.
		x := tens("x", f32, dims(3, 4, 4)...)
		y := tens("y", lang.BF16, dims(3, 4, 4)...)
		cases = append(cases, tcase{"fallbacks", inst([]*ir.Tensor{x}, def(y, func(v ...*ir.Var) ir.Expr {
			sel := &ir.Select{C: bin(ir.OpGt, ref(v[1]), ci(0)), A: at(x, ref(v[0]), sub(ref(v[1]), ci(1)), ref(v[2])), B: cf(f32, 7), T: f32}
			ints := &ir.Cast{X: bin(ir.OpMod, mul(ref(v[1]), ref(v[2])), ci(3)), T: f32}
			ex := call("exp", f32, &ir.Unary{Op: "-", X: at(x, ref(v[0]), ref(v[1]), ref(v[2])), T: f32})
			mx := call("max", f32, at(x, ref(v[0]), ref(v[1]), ref(v[2])), cf(f32, 0))
			cmp := &ir.Cast{X: bin(ir.OpLt, at(x, ref(v[0]), ref(v[1]), ref(v[2])), cf(f32, 0)), T: f32}
			op := &ir.Opaque{Fn: "inverse", Args: []*ir.View{{T: x, Index: []ir.Expr{ref(v[0]), nil, nil}}}, Shape: dims(4, 4), Index: []ir.Expr{ref(v[1]), bin(ir.OpMod, ref(v[2]), ci(4))}, T: lang.F64}
			rnd := &ir.Cast{X: mul(at(x, ref(v[0]), ref(v[1]), ref(v[2])), cf(lang.F64, 1.0/3)), T: lang.F16}
			return add(add(add(add(add(add(sel, ints), ex), mx), cmp), &ir.Cast{X: op, T: f32}), rnd)
		})), []*tensor.Tensor{randTensor(r, f32, 3, 4, 4)}})
	}
	{
		// A default that is itself a guarded access, and a division.
		x := tens("x", f32, dims(6, 6)...)
		y := tens("y", f32, dims(6, 6)...)
		cases = append(cases, tcase{"nested default", inst([]*ir.Tensor{x}, def(y, func(v ...*ir.Var) ir.Expr {
			inner := atd(x, cf(f32, -1), ref(v[1]), sub(ref(v[0]), ci(3)))
			return bin(ir.OpDiv, atd(x, inner, ref(v[0]), add(ref(v[1]), ci(2))), cf(f32, 3))
		})), []*tensor.Tensor{randTensor(r, f32, 6, 6)}})
	}
	cases = append(cases,
		tcase{"matmul", matmulInst(f32, lang.Const(9), lang.Const(13), lang.Const(300)), []*tensor.Tensor{randTensor(r, f32, 9, 13), randTensor(r, f32, 13, 300)}},
		tcase{"conv", convInst(2, 5, 9, 11), []*tensor.Tensor{randTensor(r, f32, 2, 5, 9, 11), randTensor(r, f32, 5, 5, 3, 3)}},
	)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want, err := evalInstance(c.inst, c.inputs, nil, nil, config{scalar: true, workers: 1})
			if err != nil {
				t.Fatal(err)
			}
			for _, workers := range []int{1, 3} {
				got, err := evalInstance(c.inst, c.inputs, nil, nil, config{workers: workers})
				if err != nil {
					t.Fatal(err)
				}
				for i := range want {
					if err := identical(want[i], got[i]); err != nil {
						t.Errorf("workers=%d: output %d differs: %v", workers, i, err)
					}
				}
			}
		})
	}
}
