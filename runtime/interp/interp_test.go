package interp

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"

	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/runtime/opaque"
	"tofuc/runtime/tensor"
)

func TestMatmul(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct {
		dt      lang.DType
		m, k, n int
	}{
		{lang.F64, 7, 5, 3},
		{lang.F32, 33, 17, 65},
		{lang.F32, 1, 1, 1},
		{lang.F32, 4, 0, 3}, // empty reduction: zeros
		{lang.I32, 9, 8, 7},
	} {
		t.Run(fmt.Sprintf("%v_%dx%dx%d", c.dt, c.m, c.k, c.n), func(t *testing.T) {
			a := randTensor(r, c.dt, c.m, c.k)
			b := randTensor(r, c.dt, c.k, c.n)
			out, err := EvalInstance(matmulInst(c.dt, lang.Const(int64(c.m)), lang.Const(int64(c.k)), lang.Const(int64(c.n))), []*tensor.Tensor{a, b}, nil)
			if err != nil {
				t.Fatal(err)
			}
			got := out[0]
			for i := range c.m {
				for j := range c.n {
					var want float64
					for k := range c.k {
						want += a.At(i, k) * b.At(k, j)
					}
					if w := tensor.Scalar(c.dt, want).Flat(0); got.At(i, j) != w {
						t.Fatalf("C[%d, %d] = %v, want %v", i, j, got.At(i, j), w)
					}
				}
			}
		})
	}
}

func TestMatmulIdentitySymbolic(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	n := 6
	a := randTensor(r, lang.F32, 4, n)
	id := tensor.New(lang.F32, []int{n, n})
	for i := range n {
		id.Set(1, i, i)
	}
	in := matmulInst(lang.F32, lang.Sym("M"), lang.Sym("K"), lang.Sym("N"))
	out, err := EvalInstance(in, []*tensor.Tensor{a, id}, map[string]int64{"N": 6})
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range a.F {
		if out[0].F[i] != v {
			t.Fatalf("A·I differs from A at %d: %v vs %v", i, out[0].F[i], v)
		}
	}
	// A symbol bound to two values.
	_, err = EvalInstance(in, []*tensor.Tensor{a, id}, map[string]int64{"N": 5})
	if err == nil || !strings.Contains(err.Error(), "N = 5") {
		t.Errorf("conflicting N: %v", err)
	}
	_, err = EvalInstance(in, []*tensor.Tensor{a, tensor.New(lang.F32, []int{5, 6})}, nil)
	if err == nil || !strings.Contains(err.Error(), "K = 6") {
		t.Errorf("conflicting K: %v", err)
	}
	_, err = EvalInstance(in, []*tensor.Tensor{a, tensor.New(lang.F64, []int{6, 6})}, nil)
	if err == nil || !strings.Contains(err.Error(), "is f64, want f32") {
		t.Errorf("wrong dtype: %v", err)
	}
}

// conv1d: out[b, co, x] = sum_{ci, dx} data[b, ci, x+dx] * w[co, ci, dx].
func TestConv1dHalo(t *testing.T) {
	const B, CI, CO, X, K = 2, 3, 4, 10, 3
	data := tens("data", lang.F32, dims(B, CI, X)...)
	w := tens("w", lang.F32, dims(CO, CI, K)...)
	out := tens("out", lang.F32, dims(B, CO, X-K+1)...)
	civ, dxv := vr("ci", lang.Const(CI)), vr("dx", lang.Const(K))
	in := inst([]*ir.Tensor{data, w}, def(out, func(v ...*ir.Var) ir.Expr {
		return sum(lang.F32, mul(at(data, ref(v[0]), ref(civ), add(ref(v[2]), ref(dxv))), at(w, ref(v[1]), ref(civ), ref(dxv))), civ, dxv)
	}))
	r := rand.New(rand.NewPCG(5, 6))
	d, wt := randTensor(r, lang.F32, B, CI, X), randTensor(r, lang.F32, CO, CI, K)
	res, err := EvalInstance(in, []*tensor.Tensor{d, wt}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for b := range B {
		for co := range CO {
			for x := range X - K + 1 {
				var want float64
				for c := range CI {
					for dx := range K {
						want += d.At(b, c, x+dx) * wt.At(co, c, dx)
					}
				}
				if got := res[0].At(b, co, x); got != float64(float32(want)) {
					t.Fatalf("out[%d,%d,%d] = %v, want %v", b, co, x, got, want)
				}
			}
		}
	}
}

func TestZeroPaddingDefault(t *testing.T) {
	x := tens("x", lang.F32, dims(5)...)
	y := tens("y", lang.F32, dims(5)...)
	dv := vr("d", lang.Const(3))
	in := inst([]*ir.Tensor{x}, def(y, func(v ...*ir.Var) ir.Expr {
		return sum(lang.F32, atd(x, cf(lang.F32, 0), sub(add(ref(v[0]), ref(dv)), ci(1))), dv)
	}))
	out, err := EvalInstance(in, []*tensor.Tensor{tensor.FromFloats(lang.F32, []int{5}, []float64{1, 2, 3, 4, 5})}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := out[0].String(), "f32[5] [3, 6, 9, 12, 9]"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// scalar evaluates a rank-0 output of dtype dt whose body is e.
func scalar(t *testing.T, dt lang.DType, e ir.Expr, inputs []*ir.Tensor, vals ...*tensor.Tensor) *tensor.Tensor {
	t.Helper()
	out, err := EvalInstance(inst(inputs, def(tens("out", dt), func(...*ir.Var) ir.Expr { return e })), vals, nil)
	if err != nil {
		t.Fatal(err)
	}
	return out[0]
}

func TestScalarSemantics(t *testing.T) {
	i8, u8, i32, u64, f64 := lang.I8, lang.U8, lang.I32, lang.U64, lang.F64
	nan := math.NaN()
	x := tens("x", lang.F32, dims(3)...)
	xv := tensor.FromFloats(lang.F32, []int{3}, []float64{1, nan, 3})
	kv := vr("k", lang.Const(3))
	red := func(kind ir.Reducer, body ir.Expr, t lang.DType, n int64) ir.Expr {
		v := vr("r", lang.Const(n))
		if body == nil {
			body = at(x, ref(v))
		}
		return &ir.Reduce{Kind: kind, Vars: []*ir.Var{v}, Body: body, T: t}
	}
	for _, c := range []struct {
		name string
		dt   lang.DType
		e    ir.Expr
		want string
	}{
		{"i8 wrap add", i8, bin(ir.OpAdd, cint(i8, 100), cint(i8, 100)), "-56"},
		{"i8 wrap mul", i8, bin(ir.OpMul, cint(i8, 16), cint(i8, 16)), "0"},
		{"u8 wrap add", u8, bin(ir.OpAdd, cint(u8, 200), cint(u8, 100)), "44"},
		{"u8 wrap sub", u8, bin(ir.OpSub, cint(u8, 0), cint(u8, 1)), "255"},
		{"i8 neg", i8, &ir.Unary{Op: "-", X: cint(i8, -128), T: i8}, "-128"},
		{"i32 overflow", i32, bin(ir.OpMul, cint(i32, 1<<20), cint(i32, 1<<12)), "0"},
		{"wrap to T not operands", i32, &ir.Binary{Op: ir.OpAdd, L: cint(i8, 100), R: cint(i8, 100), T: i32}, "200"},
		{"div trunc", i32, bin(ir.OpDiv, cint(i32, -7), cint(i32, 2)), "-3"},
		{"div trunc neg divisor", i32, bin(ir.OpDiv, cint(i32, 7), cint(i32, -2)), "-3"},
		{"mod trunc", i32, bin(ir.OpMod, cint(i32, -7), cint(i32, 2)), "-1"},
		{"div by zero", i32, bin(ir.OpDiv, cint(i32, 7), cint(i32, 0)), "0"},
		{"mod by zero", i32, bin(ir.OpMod, cint(i32, 7), cint(i32, 0)), "0"},
		{"i8 min / -1", i8, bin(ir.OpDiv, cint(i8, -128), cint(i8, -1)), "-128"},
		{"u64 unsigned div", u64, bin(ir.OpDiv, cint(u64, -2), cint(u64, 2)), "9223372036854775807"},
		{"u64 unsigned compare", lang.Bool, bin(ir.OpLt, cint(u64, 1), cint(u64, -1)), "true"},
		{"float div", f64, bin(ir.OpDiv, cf(f64, 1), cf(f64, 4)), "0.25"},
		{"int/float promote", f64, bin(ir.OpAdd, cint(i32, 1), cf(f64, 0.5)), "1.5"},
		{"nan compare", lang.Bool, bin(ir.OpEq, cf(f64, nan), cf(f64, nan)), "false"},
		{"and short-circuits", lang.Bool, bin(ir.OpAnd, cint(lang.Bool, 0), bin(ir.OpEq, at(x, ci(7)), cf(lang.F32, 0))), "false"},
		{"or short-circuits", lang.Bool, bin(ir.OpOr, cint(lang.Bool, 1), bin(ir.OpEq, at(x, ci(7)), cf(lang.F32, 0))), "true"},
		{"not", lang.Bool, &ir.Unary{Op: "!", X: cf(f64, 0), T: lang.Bool}, "true"},
		{"cast float to i8", i8, &ir.Cast{X: cf(f64, -300.7), T: i8}, "-44"},
		{"cast nan to int", i32, &ir.Cast{X: cf(f64, nan), T: i32}, "0"},
		{"cast to bool", lang.Bool, &ir.Cast{X: cf(f64, 0.25), T: lang.Bool}, "true"},
		{"cast rounds to f16", f64, &ir.Cast{X: cf(f64, 1+1.0/4096), T: lang.F16}, "1"},
		{"cast u64 to float", f64, &ir.Cast{X: cint(u64, -1), T: f64}, "1.8446744073709552e+19"},
		{"store float in int truncates", i32, cf(f64, -2.9), "-2"},
		{"store float in u8 wraps", u8, cf(f64, 257.5), "1"},
		{"f16 store rounds", lang.F16, cf(f64, 1+1.0/4096), "1"},
		{"f16 store overflows", lang.F16, cf(f64, 70000), "+Inf"},
		{"bf16 store rounds", lang.BF16, cf(f64, 1+1.0/512), "1"},
		{"bf16 store", lang.BF16, cf(f64, 3.14159), "3.140625"},
		{"f16 intermediate not rounded", lang.F16, bin(ir.OpSub, bin(ir.OpAdd, cf(lang.F16, 2048), cf(lang.F16, 1)), cf(lang.F16, 2048)), "1"},
		{"round half even", f64, call("round", f64, cf(f64, 2.5)), "2"},
		{"round half even neg", f64, call("round", f64, cf(f64, -3.5)), "-4"},
		{"sign", f64, call("sign", f64, cf(f64, -0.1)), "-1"},
		{"sigmoid", f64, call("sigmoid", f64, cf(f64, 0)), "0.5"},
		{"rsqrt", f64, call("rsqrt", f64, cf(f64, 4)), "0.5"},
		{"max nan", f64, call("max", f64, cf(f64, 1), cf(f64, nan)), "NaN"},
		{"min nan", f64, call("min", f64, cf(f64, nan), cf(f64, 1)), "NaN"},
		{"int abs", i8, call("abs", i8, cint(i8, -128)), "-128"},
		{"int max", i32, call("max", i32, cint(i32, -3), cint(i32, 2)), "2"},
		{"int sign", i32, call("sign", i32, cint(i32, -7)), "-1"},
		{"isnan", lang.Bool, call("isnan", lang.Bool, cf(f64, nan)), "true"},
		{"isinf of int", lang.Bool, call("isinf", lang.Bool, cint(i32, 3)), "false"},
		{"pow", f64, call("pow", f64, cf(f64, 2), cf(f64, 10)), "1024"},
		{"sqrt of int", f64, call("sqrt", f64, cint(i32, 9)), "3"},
		{"max reduce nan", lang.F32, red(ir.Max, nil, lang.F32, 3), "NaN"},
		{"min reduce nan", lang.F32, red(ir.Min, nil, lang.F32, 3), "NaN"},
		{"max reduce nan first", lang.F32, red(ir.Max, at(x, sub(ci(2), ref(kv))), lang.F32, 3), "NaN"},
		{"max reduce empty", lang.F32, red(ir.Max, nil, lang.F32, 0), "-Inf"},
		{"min reduce empty", lang.F32, red(ir.Min, nil, lang.F32, 0), "+Inf"},
		{"prod reduce empty", lang.F32, red(ir.Prod, nil, lang.F32, 0), "1"},
		{"sum reduce empty", lang.F32, red(ir.Sum, nil, lang.F32, 0), "0"},
		{"int max reduce empty", i8, red(ir.Max, cint(i8, 0), i8, 0), "-128"},
		{"int min reduce empty", u8, red(ir.Min, cint(u8, 0), u8, 0), "255"},
		{"int sum reduce wraps", i8, red(ir.Sum, cint(i8, 100), i8, 3), "44"},
		{"int prod reduce", i32, red(ir.Prod, cint(i32, 3), i32, 4), "81"},
		{"u64 max reduce", u64, red(ir.Max, cint(u64, -1), u64, 2), "18446744073709551615"},
		{"select lazy", lang.F32, &ir.Select{C: cint(lang.Bool, 1), A: at(x, ci(0)), B: at(x, ci(99)), T: lang.F32}, "1"},
		{"size", lang.I64, &ir.Size{D: lang.Const(7).Mul(lang.Const(3))}, "21"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, ok := c.e.(*ir.Reduce); ok && strings.Contains(c.name, "first") {
				c.e.(*ir.Reduce).Vars = []*ir.Var{kv}
			}
			got := scalar(t, c.dt, c.e, []*ir.Tensor{x}, xv).String()
			want := c.dt.String() + "[] " + c.want
			if got != want {
				t.Errorf("got %s, want %s", got, want)
			}
		})
	}
}

func TestSelectLaziness(t *testing.T) {
	// y[i] = select(i > 0, x[i-1], -1): x[-1] would be out of range.
	x := tens("x", lang.F32, dims(4)...)
	y := tens("y", lang.F32, dims(4)...)
	in := inst([]*ir.Tensor{x}, def(y, func(v ...*ir.Var) ir.Expr {
		return &ir.Select{C: bin(ir.OpGt, ref(v[0]), ci(0)), A: at(x, sub(ref(v[0]), ci(1))), B: cf(lang.F32, -1), T: lang.F32}
	}))
	out, err := EvalInstance(in, []*tensor.Tensor{tensor.FromFloats(lang.F32, []int{4}, []float64{1, 2, 3, 4})}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := out[0].String(); got != "f32[4] [-1, 1, 2, 3]" {
		t.Errorf("got %s", got)
	}
}

func TestOutOfRange(t *testing.T) {
	// y[i, j] = x[i, j + 1]: the last column reads past x. Large enough to
	// run on several goroutines.
	for _, n := range []int64{3, 300} {
		x := tens("x", lang.F32, dims(n, n)...)
		y := tens("y", lang.F32, dims(n, n)...)
		a := at(x, nil, nil)
		a.Pos = lang.Pos{File: "conv.tdl", Line: 12, Col: 7}
		in := inst([]*ir.Tensor{x}, def(y, func(v ...*ir.Var) ir.Expr {
			a.Index = []ir.Expr{ref(v[0]), add(ref(v[1]), ci(1))}
			return a
		}))
		_, err := EvalInstance(in, []*tensor.Tensor{tensor.New(lang.F32, []int{int(n), int(n)})}, nil)
		want := fmt.Sprintf("conv.tdl:12:7: index %d out of range [0, %d) in dimension 1 of tensor x", n, n)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("n=%d: got %v, want %q", n, err, want)
		}
	}
	// A non-affine index (a Select) is checked too.
	x := tens("x", lang.I32, dims(2)...)
	idx := &ir.Select{C: cint(lang.Bool, 1), A: ci(5), B: ci(0), T: lang.I64}
	_, err := EvalInstance(inst([]*ir.Tensor{x}, def(tens("y", lang.I32), func(...*ir.Var) ir.Expr { return at(x, idx) })), []*tensor.Tensor{tensor.New(lang.I32, []int{2})}, nil)
	if err == nil || !strings.Contains(err.Error(), "index 5 out of range [0, 2) in dimension 0 of tensor x") {
		t.Errorf("got %v", err)
	}
}

// TestLocals checks a let tensor read by the output and affine folding of
// a reversed, strided index.
func TestLocals(t *testing.T) {
	x := tens("x", lang.I32, dims(6)...)
	sq := tens("sq", lang.I32, dims(6)...)
	y := tens("y", lang.I32, dims(3)...)
	in := inst([]*ir.Tensor{x}, def(y, func(v ...*ir.Var) ir.Expr {
		// y[i] = sq[5 - 2*i]
		return at(sq, sub(ci(5), mul(ci(2), ref(v[0]))))
	}))
	in.Locals = []*ir.Def{def(sq, func(v ...*ir.Var) ir.Expr { return mul(at(x, ref(v[0])), at(x, ref(v[0]))) })}
	out, err := EvalInstance(in, []*tensor.Tensor{tensor.FromInts(lang.I32, []int{6}, []int64{0, 1, 2, 3, 4, 5})}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := out[0].String(); got != "i32[3] [25, 9, 1]" {
		t.Errorf("got %s", got)
	}
}

func TestOpaqueCholesky(t *testing.T) {
	const B, N = 3, 5
	a := tens("A", lang.F64, dims(B, N, N)...)
	l := tens("L", lang.F64, dims(B, N, N)...)
	var calls atomic.Int64
	RegisterOpaque("counted_cholesky", func(args []*tensor.Tensor) (*tensor.Tensor, error) {
		calls.Add(1)
		return opaque.Lookup("cholesky")(args)
	})
	in := inst([]*ir.Tensor{a}, def(l, func(v ...*ir.Var) ir.Expr {
		return &ir.Opaque{Fn: "counted_cholesky", Args: []*ir.View{{T: a, Index: []ir.Expr{ref(v[0]), nil, nil}}}, Shape: dims(N, N), Index: []ir.Expr{ref(v[1]), ref(v[2])}, T: lang.F64}
	}))
	// A[b] = M·Mᵀ + N·I is positive definite.
	r := rand.New(rand.NewPCG(7, 8))
	av := tensor.New(lang.F64, []int{B, N, N})
	for b := range B {
		m := randTensor(r, lang.F64, N, N)
		for i := range N {
			for j := range N {
				var s float64
				for k := range N {
					s += m.At(i, k) * m.At(j, k)
				}
				if i == j {
					s += N
				}
				av.Set(s, b, i, j)
			}
		}
	}
	out, err := EvalInstance(in, []*tensor.Tensor{av}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if calls.Load() != B {
		t.Errorf("cholesky called %d times, want %d", calls.Load(), B)
	}
	L := out[0]
	for b := range B {
		for i := range N {
			for j := range N {
				if j > i && L.At(b, i, j) != 0 {
					t.Errorf("L[%d] is not lower triangular", b)
				}
				var s float64
				for k := range N {
					s += L.At(b, i, k) * L.At(b, j, k)
				}
				if math.Abs(s-av.At(b, i, j)) > 1e-12 {
					t.Errorf("(L·Lᵀ)[%d, %d, %d] = %v, want %v", b, i, j, s, av.At(b, i, j))
				}
			}
		}
	}
	// Not positive definite.
	av.Set(-100, 1, 0, 0)
	_, err = EvalInstance(in, []*tensor.Tensor{av}, nil)
	if err == nil || !strings.Contains(err.Error(), "not positive definite") {
		t.Errorf("got %v", err)
	}
	// A panicking function is an error, not a crash.
	RegisterOpaque("counted_cholesky", func([]*tensor.Tensor) (*tensor.Tensor, error) { panic("boom") })
	_, err = EvalInstance(in, []*tensor.Tensor{av}, nil)
	if err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("got %v", err)
	}
	// A result of the wrong shape.
	RegisterOpaque("counted_cholesky", func([]*tensor.Tensor) (*tensor.Tensor, error) { return tensor.New(lang.F64, []int{2}), nil })
	_, err = EvalInstance(in, []*tensor.Tensor{av}, nil)
	if err == nil || !strings.Contains(err.Error(), "shape [2], want [5 5]") {
		t.Errorf("got %v", err)
	}
}

func TestInverse(t *testing.T) {
	a := tens("A", lang.F32, dims(3, 3)...)
	y := tens("Y", lang.F64, dims(3, 3)...)
	in := inst([]*ir.Tensor{a}, def(y, func(v ...*ir.Var) ir.Expr {
		return &ir.Opaque{Fn: "inverse", Args: []*ir.View{{T: a}}, Shape: dims(3, 3), Index: []ir.Expr{ref(v[0]), ref(v[1])}, T: lang.F64}
	}))
	av := tensor.FromFloats(lang.F32, []int{3, 3}, []float64{0, 2, 0, 1, 0, 0, 0, 0, 4}) // needs pivoting
	out, err := EvalInstance(in, []*tensor.Tensor{av}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := out[0].String(); got != "f64[3, 3] [[0, 1, 0], [0.5, 0, 0], [0, 0, 0.25]]" {
		t.Errorf("got %s", got)
	}
	av.Set(0, 2, 2)
	if _, err = EvalInstance(in, []*tensor.Tensor{av}, nil); err == nil || !strings.Contains(err.Error(), "singular") {
		t.Errorf("got %v", err)
	}
}

func twoNodeGraph() *ir.Graph {
	n := lang.Sym("N")
	x := &ir.Value{Name: "x", DType: lang.F32, Shape: []lang.Dim{n, lang.Const(4)}}
	w := &ir.Value{Name: "W", DType: lang.F32, Shape: dims(4, 3)}
	b := &ir.Value{Name: "b", DType: lang.F32, Shape: dims(3)}
	h := &ir.Value{Name: "h", DType: lang.F32, Shape: []lang.Dim{n, lang.Const(3)}}
	y := &ir.Value{Name: "y", DType: lang.F32, Shape: []lang.Dim{n, lang.Const(3)}}
	half := &ir.Value{Name: "half", DType: lang.F32, Const: &ir.ConstData{Float: 0.5}}

	mm := matmulInst(lang.F32, n, lang.Const(4), lang.Const(3))
	hx := tens("h", lang.F32, n, lang.Const(3))
	bt := tens("b", lang.F32, lang.Const(3))
	st := tens("s", lang.F32)
	yt := tens("y", lang.F32, n, lang.Const(3))
	addRelu := inst([]*ir.Tensor{hx, bt, st}, def(yt, func(v ...*ir.Var) ir.Expr {
		return mul(call("max", lang.F32, add(at(hx, ref(v[0]), ref(v[1])), at(bt, ref(v[1]))), cf(lang.F32, 0)), at(st))
	}))
	return &ir.Graph{
		Name:   "mlp",
		Inputs: []*ir.Value{x},
		Params: []*ir.Param{
			{Value: w, Init: ir.Init{Kind: "glorot"}},
			{Value: b, Init: ir.Init{Kind: "normal", Args: []float64{1, 0.5}}},
		},
		Nodes: []*ir.Node{
			{Name: "mm", Inst: mm, Inputs: []*ir.Value{x, w}, Outputs: []*ir.Value{h}},
			{Name: "add", Inst: addRelu, Inputs: []*ir.Value{h, b, half}, Outputs: []*ir.Value{y}},
		},
		Outputs: []*ir.Value{y},
	}
}

func convInst(B, C, H, W int64) *ir.Instance {
	x := tens("x", lang.F32, dims(B, C, H, W)...)
	k := tens("k", lang.F32, dims(C, C, 3, 3)...)
	out := tens("out", lang.F32, dims(B, C, H, W)...)
	civ, khv, kwv := vr("ci", lang.Const(C)), vr("kh", lang.Const(3)), vr("kw", lang.Const(3))
	return inst([]*ir.Tensor{x, k}, def(out, func(v ...*ir.Var) ir.Expr {
		return sum(lang.F32, mul(
			atd(x, cf(lang.F32, 0), ref(v[0]), ref(civ), sub(add(ref(v[2]), ref(khv)), ci(1)), sub(add(ref(v[3]), ref(kwv)), ci(1))),
			at(k, ref(v[1]), ref(civ), ref(khv), ref(kwv))), civ, khv, kwv)
	}))
}

func TestConv2d(t *testing.T) {
	const B, C, H, W = 2, 3, 5, 4
	r := rand.New(rand.NewPCG(11, 12))
	x, k := randTensor(r, lang.F32, B, C, H, W), randTensor(r, lang.F32, C, C, 3, 3)
	out, err := EvalInstance(convInst(B, C, H, W), []*tensor.Tensor{x, k}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for b := range B {
		for co := range C {
			for h := range H {
				for w := range W {
					var s float64
					for c := range C {
						for kh := range 3 {
							for kw := range 3 {
								if y, x0 := h+kh-1, w+kw-1; y >= 0 && y < H && x0 >= 0 && x0 < W {
									s += x.At(b, c, y, x0) * k.At(co, c, kh, kw)
								}
							}
						}
					}
					if got := out[0].At(b, co, h, w); got != float64(float32(s)) {
						t.Fatalf("out[%d,%d,%d,%d] = %v, want %v", b, co, h, w, got, s)
					}
				}
			}
		}
	}
}

// BenchmarkConv times a 3x3 convolution: wide and shallow (64 channels,
// 56x56) and narrow and deep (512 channels, 7x7).
func BenchmarkConv(b *testing.B) {
	for _, c := range []struct {
		name    string
		C, H, W int
	}{{"64x56x56", 64, 56, 56}, {"512x7x7", 512, 7, 7}} {
		b.Run(c.name, func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 1))
			x, k := randTensor(r, lang.F32, 1, c.C, c.H, c.W), randTensor(r, lang.F32, c.C, c.C, 3, 3)
			in := convInst(1, int64(c.C), int64(c.H), int64(c.W))
			b.ResetTimer()
			for range b.N {
				if _, err := EvalInstance(in, []*tensor.Tensor{x, k}, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(c.C*c.C*c.H*c.W*9)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
		})
	}
}

func TestReadBeforeDefined(t *testing.T) {
	y := tens("y", lang.F32, dims(2)...)
	in := inst(nil, def(y, func(v ...*ir.Var) ir.Expr { return at(y, ref(v[0])) }))
	if _, err := EvalInstance(in, nil, nil); err == nil || !strings.Contains(err.Error(), "tensor y is read before it is defined") {
		t.Errorf("got %v", err)
	}
}
