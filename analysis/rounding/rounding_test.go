package rounding

import (
	"math"
	"math/rand/v2"
	"testing"

	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/lang/precision"
	"tofuc/runtime/tensor"
)

// dot is y[i] = f(Σ_k a[i,k]·b[k]) over m rows of depth k, built by
// hand: the contraction whose bound is the arithmetic's γ_K·M.
func dot(m, k int64, fn string) *ir.Instance {
	a := &ir.Tensor{Name: "a", DType: lang.F32, Shape: []lang.Dim{lang.Const(m), lang.Const(k)}}
	b := &ir.Tensor{Name: "b", DType: lang.F32, Shape: []lang.Dim{lang.Const(k)}}
	i := &ir.Var{Name: "i", Extent: lang.Const(m)}
	j := &ir.Var{Name: "j", Extent: lang.Const(k)}
	prod := &ir.Binary{Op: ir.OpMul, T: lang.F32,
		L: &ir.Access{T: a, Index: []ir.Expr{&ir.VarRef{V: i}, &ir.VarRef{V: j}}},
		R: &ir.Access{T: b, Index: []ir.Expr{&ir.VarRef{V: j}}}}
	var body ir.Expr = &ir.Reduce{Kind: ir.Sum, Vars: []*ir.Var{j}, Body: prod, T: lang.F32}
	if fn != "" {
		body = &ir.Call{Fn: fn, Args: []ir.Expr{body}, T: lang.F32}
	}
	y := &ir.Tensor{Name: "y", DType: lang.F32, Shape: []lang.Dim{lang.Const(m)}}
	return &ir.Instance{Op: "dot", Inputs: []*ir.Tensor{a, b}, Outputs: []*ir.Def{{Tensor: y, Vars: []*ir.Var{i}, Body: body}}}
}

func randomF32(shape []int, r *rand.Rand) *tensor.Tensor {
	t := tensor.New(lang.F32, shape)
	for i := range t.Len() {
		t.SetFlat(i, float64(float32(r.Float64()*2-1)))
	}
	return t
}

// kernel computes dot as a kernel would: products and sums rounded by
// round after every operation, the terms dropped where drop says, then
// fn in double rounded to f32.
func kernel(a, b *tensor.Tensor, fn func(float64) float64, round func(float64) float64, drop func(i, k int) bool) *tensor.Tensor {
	m, k := a.Shape[0], a.Shape[1]
	y := tensor.New(lang.F32, []int{m})
	for i := range m {
		acc := 0.0
		for j := range k {
			if drop(i, j) {
				continue
			}
			acc = round(acc + round(a.Flat(i*k+j)*b.Flat(j)))
		}
		y.SetFlat(i, float64(float32(fn(acc))))
	}
	return y
}

// tileSum is the sum of the 16 terms of row i from depth j.
func tileSum(a, b *tensor.Tensor, i, j int) float64 {
	k, s := a.Shape[1], 0.0
	for d := j; d < j+16; d++ {
		s += a.Flat(i*k+d) * b.Flat(d)
	}
	return s
}

func f32(x float64) float64 { return float64(float32(x)) }

func f16(x float64) float64 { return lang.F16.RoundFloat(x) }

// TestBoundCatchesWrongArithmetic: a contraction summed in f32 is
// within its bound; summed in f16, or with a tile of 16 of its 2048
// terms dropped, it is not. The same for exp and tanh of the sum.
func TestBoundCatchesWrongArithmetic(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const m, k = 64, 2048
	for _, fn := range []string{"", "exp", "tanh"} {
		a, b := randomF32([]int{m, k}, r), randomF32([]int{k}, r)
		e, err := Expect(dot(m, k, fn), []*tensor.Tensor{a, b}, precision.F32)
		if err != nil {
			t.Fatal(err)
		}
		f := func(x float64) float64 { return x }
		if fn != "" {
			f, _ = ir.FloatFunc(fn)
		}
		never := func(int, int) bool { return false }
		if err := e.Compare(0, kernel(a, b, f, f32, never)); err != nil {
			t.Errorf("%q summed in f32: %v", fn, err)
		}
		if used := e.Used(0, kernel(a, b, f, f32, never)); used < 0.001 {
			t.Errorf("%q summed in f32 uses %.2g of its bound: a bound that loose would let wrong arithmetic through", fn, used)
		}
		if err := e.Compare(0, kernel(a, b, f, f16, never)); err == nil {
			t.Errorf("%q summed in f16 passes", fn)
		}
		// In the row of the smallest sum (where tanh does not saturate),
		// the first tile of 16 terms whose terms do not cancel out: a
		// tile summing to a rounding error is not a wrong result.
		row := 0
		for i := range m {
			if math.Abs(e.Want[0].Flat(i)) < math.Abs(e.Want[0].Flat(row)) {
				row = i
			}
		}
		tile := 0
		for ; math.Abs(tileSum(a, b, row, tile)) < 0.5; tile += 16 {
		}
		dropTile := func(i, j int) bool { return i == row && j >= tile && j < tile+16 }
		if err := e.Compare(0, kernel(a, b, f, f32, dropTile)); err == nil {
			t.Errorf("%q with a tile of 16 terms dropped (their sum %.3g) passes", fn, tileSum(a, b, row, tile))
		}
	}
}

// TestFactorRoundingThroughCasts: in bf16, a contraction whose product
// is cast, Σ f32(a·b) of f16 factors (which the GEMM description reads
// through the cast and a tensor-core form runs), is charged its factors'
// rounding: a kernel that rounds them to bf16, multiplies exactly and
// sums in double is within the bound, and a plain sum of squares (no
// contraction) is not charged.
func TestFactorRoundingThroughCasts(t *testing.T) {
	const m, k = 16, 256
	r := rand.New(rand.NewPCG(3, 4))
	inst := dot(m, k, "")
	a16 := &ir.Tensor{Name: "a", DType: lang.F16, Shape: inst.Inputs[0].Shape}
	b16 := &ir.Tensor{Name: "b", DType: lang.F16, Shape: inst.Inputs[1].Shape}
	sum := inst.Outputs[0].Body.(*ir.Reduce)
	prod := sum.Body.(*ir.Binary)
	prod.T = lang.F16
	prod.L.(*ir.Access).T, prod.R.(*ir.Access).T = a16, b16
	sum.Body = &ir.Cast{X: prod, T: lang.F32}
	inst.Inputs = []*ir.Tensor{a16, b16}
	a, b := randomF32([]int{m, k}, r), randomF32([]int{k}, r)
	for _, x := range []*tensor.Tensor{a, b} {
		for i := range x.Len() {
			x.SetFlat(i, f16(x.Flat(i)))
		}
	}
	a.DType, b.DType = lang.F16, lang.F16
	e, err := Expect(inst, []*tensor.Tensor{a, b}, precision.BF16)
	if err != nil {
		t.Fatal(err)
	}
	bf16 := func(x float64) float64 { return lang.BF16.RoundFloat(x) }
	if err := e.Compare(0, tensorCoreDot(a, b, bf16)); err != nil {
		t.Errorf("bf16 factors of a cast product: %v", err)
	}
	if u := (&bounder{mode: precision.BF16}).factorRounding(&ir.Reduce{Kind: ir.Sum, Vars: sum.Vars, Body: &ir.Binary{Op: ir.OpMul, L: prod.R, R: prod.R, T: lang.F16}, T: lang.F32}); !isZero(u) {
		t.Errorf("a sum of squares is charged factor rounding: %v", u)
	}
}

// TestF16FactorUnderflow: in f16, factors below f16's normal range
// (2⁻¹⁴) lose more than their relative unit when rounded; the bound
// charges the absolute error of their subnormals, so a kernel that
// rounds them to f16 is within it.
func TestF16FactorUnderflow(t *testing.T) {
	const m, k = 16, 64
	r := rand.New(rand.NewPCG(5, 6))
	a, b := randomF32([]int{m, k}, r), randomF32([]int{k}, r)
	for i := range a.Len() {
		a.SetFlat(i, f32(a.Flat(i)*1e-6)) // subnormal in f16
	}
	e, err := Expect(dot(m, k, ""), []*tensor.Tensor{a, b}, precision.F16)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Compare(0, tensorCoreDot(a, b, f16)); err != nil {
		t.Errorf("f16 factors below the normal range: %v", err)
	}
}

// tensorCoreDot computes dot as a tensor core would: the factors
// rounded by round, the products exact and summed in double, the sum
// rounded to f32.
func tensorCoreDot(a, b *tensor.Tensor, round func(float64) float64) *tensor.Tensor {
	m, k := a.Shape[0], a.Shape[1]
	y := tensor.New(lang.F32, []int{m})
	for i := range m {
		acc := 0.0
		for j := range k {
			acc += round(a.Flat(i*k+j)) * round(b.Flat(j))
		}
		y.SetFlat(i, f32(acc))
	}
	return y
}

func isZero(e ir.Expr) bool {
	c, ok := e.(*ir.Const)
	return ok && c.Float == 0
}

// TestBoundOfCancellation: 1 - x·x near x = 1 loses digits that an
// f32 evaluation cannot keep; the bound grows with the cancellation
// (its derivative term), so that the f32 result passes where a
// tolerance relative to the result would not.
func TestBoundOfCancellation(t *testing.T) {
	x := &ir.Tensor{Name: "x", DType: lang.F32, Shape: []lang.Dim{lang.Const(1)}}
	i := &ir.Var{Name: "i", Extent: lang.Const(1)}
	xi := &ir.Access{T: x, Index: []ir.Expr{&ir.VarRef{V: i}}}
	body := &ir.Call{Fn: "sqrt", T: lang.F32, Args: []ir.Expr{&ir.Binary{Op: ir.OpSub, T: lang.F32,
		L: &ir.Const{T: lang.F32, Float: 1}, R: &ir.Binary{Op: ir.OpMul, L: xi, R: xi, T: lang.F32}}}}
	y := &ir.Tensor{Name: "y", DType: lang.F32, Shape: []lang.Dim{lang.Const(1)}}
	inst := &ir.Instance{Op: "c", Inputs: []*ir.Tensor{x}, Outputs: []*ir.Def{{Tensor: y, Vars: []*ir.Var{i}, Body: body}}}
	in := tensor.New(lang.F32, []int{1})
	in.SetFlat(0, f32(0.99977))
	e, err := Expect(inst, []*tensor.Tensor{in}, precision.F32)
	if err != nil {
		t.Fatal(err)
	}
	v := float32(in.Flat(0))
	got := tensor.New(lang.F32, []int{1})
	got.SetFlat(0, f32(math.Sqrt(float64(1-v*v))))
	if err := e.Compare(0, got); err != nil {
		t.Errorf("sqrt(1 - x²) in f32: %v", err)
	}
	w := e.Want[0].Flat(0)
	if rel := math.Abs(got.Flat(0)-w) / w; rel < 8*U {
		t.Errorf("relative error %.3g: the case does not exercise cancellation", rel)
	}
}

// TestExactModeIsReordered: the exact mode keeps the reordered-sum
// tolerance, with no bounds.
func TestExactModeIsReordered(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	a, b := randomF32([]int{4, 300}, r), randomF32([]int{300}, r)
	e, err := Expect(dot(4, 300, ""), []*tensor.Tensor{a, b}, precision.Exact)
	if err != nil {
		t.Fatal(err)
	}
	if e.Bounds != nil || e.Longest != 300 {
		t.Fatalf("bounds %v, longest %d; want none and 300", e.Bounds, e.Longest)
	}
}

// elementwise is y[i] = body(x[i]) over n elements of dtype dt.
func elementwise(n int64, dt lang.DType, body func(x ir.Expr) ir.Expr) *ir.Instance {
	x := &ir.Tensor{Name: "x", DType: dt, Shape: []lang.Dim{lang.Const(n)}}
	i := &ir.Var{Name: "i", Extent: lang.Const(n)}
	xi := &ir.Access{T: x, Index: []ir.Expr{&ir.VarRef{V: i}}}
	y := &ir.Tensor{Name: "y", DType: dt, Shape: []lang.Dim{lang.Const(n)}}
	return &ir.Instance{Op: "e", Inputs: []*ir.Tensor{x}, Outputs: []*ir.Def{{Tensor: y, Vars: []*ir.Var{i}, Body: body(xi)}}}
}

func values(dt lang.DType, xs ...float64) *tensor.Tensor {
	t := tensor.New(dt, []int{len(xs)})
	for i, v := range xs {
		t.SetFlat(i, v)
	}
	return t
}

// TestBoundsAreFinite: -inf through exp (a mask), pow and sqrt at 0
// give finite bounds where the values are finite, not NaN (which would
// fail a correct kernel) or +inf (which would pass any).
func TestBoundsAreFinite(t *testing.T) {
	f32c := func(v float64) ir.Expr { return &ir.Const{T: lang.F32, Float: v} }
	for name, body := range map[string]func(x ir.Expr) ir.Expr{
		"exp(x)": func(x ir.Expr) ir.Expr { return &ir.Call{Fn: "exp", Args: []ir.Expr{x}, T: lang.F32} },
		"pow(max(x·3, 0), 2)": func(x ir.Expr) ir.Expr {
			m := &ir.Call{Fn: "max", T: lang.F32, Args: []ir.Expr{&ir.Binary{Op: ir.OpMul, L: x, R: f32c(3), T: lang.F32}, f32c(0)}}
			return &ir.Call{Fn: "pow", Args: []ir.Expr{m, f32c(2)}, T: lang.F32}
		},
		"sqrt(max(x·3, 0))": func(x ir.Expr) ir.Expr {
			m := &ir.Call{Fn: "max", T: lang.F32, Args: []ir.Expr{&ir.Binary{Op: ir.OpMul, L: x, R: f32c(3), T: lang.F32}, f32c(0)}}
			return &ir.Call{Fn: "sqrt", Args: []ir.Expr{m}, T: lang.F32}
		},
	} {
		in := values(lang.F32, math.Inf(-1), 0, -0.5, 0.25, 2)
		e, err := Expect(elementwise(5, lang.F32, body), []*tensor.Tensor{in}, precision.F32)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 5 {
			w, b := e.Want[0].Flat(i), e.Bounds[0].Flat(i)
			if !math.IsInf(w, 0) && (math.IsNaN(b) || math.IsInf(b, 0)) {
				t.Errorf("%s at %v: bound %v", name, in.Flat(i), b)
			}
		}
	}
}

// TestStoreRoundsToNeighbours: an f16 sum the kernel computes in f32 and
// the interpreter in double round to neighbouring f16 values (1 and
// 1 + 2⁻¹⁰); a store's bound is an ulp, so the kernel passes.
func TestStoreRoundsToNeighbours(t *testing.T) {
	n := int64(4)
	x := &ir.Tensor{Name: "x", DType: lang.F16, Shape: []lang.Dim{lang.Const(n)}}
	j := &ir.Var{Name: "j", Extent: lang.Const(n)}
	i := &ir.Var{Name: "i", Extent: lang.Const(1)}
	sum := &ir.Reduce{Kind: ir.Sum, Vars: []*ir.Var{j}, T: lang.F16, Body: &ir.Access{T: x, Index: []ir.Expr{&ir.VarRef{V: j}}}}
	y := &ir.Tensor{Name: "y", DType: lang.F16, Shape: []lang.Dim{lang.Const(1)}}
	inst := &ir.Instance{Op: "s", Inputs: []*ir.Tensor{x}, Outputs: []*ir.Def{{Tensor: y, Vars: []*ir.Var{i}, Body: sum}}}
	in := values(lang.F16, 1, 0x1p-11, 0x1p-24, 0x1p-24)
	e, err := Expect(inst, []*tensor.Tensor{in}, precision.F32)
	if err != nil {
		t.Fatal(err)
	}
	acc := float32(0)
	for k := range 4 {
		acc += float32(in.Flat(k))
	}
	got := values(lang.F16, lang.F16.RoundFloat(float64(acc)))
	if got.Flat(0) == e.Want[0].Flat(0) {
		t.Fatalf("the kernel's sum %v equals the interpreter's: the case does not round to neighbours", got.Flat(0))
	}
	if err := e.Compare(0, got); err != nil {
		t.Error(err)
	}
}
