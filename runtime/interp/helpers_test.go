package interp

import (
	"math/rand/v2"

	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/runtime/tensor"
)

// Builders for hand-written IR.

func dims(ns ...int64) []lang.Dim {
	out := make([]lang.Dim, len(ns))
	for i, n := range ns {
		out[i] = lang.Const(n)
	}
	return out
}

func tens(name string, dt lang.DType, shape ...lang.Dim) *ir.Tensor {
	return &ir.Tensor{Name: name, DType: dt, Shape: shape}
}

func vr(name string, ext lang.Dim) *ir.Var { return &ir.Var{Name: name, Extent: ext} }

func ref(v *ir.Var) ir.Expr { return &ir.VarRef{V: v} }

func ci(n int64) ir.Expr { return &ir.Const{T: lang.I64, Int: n} }

func cint(t lang.DType, n int64) ir.Expr { return &ir.Const{T: t, Int: n} }

func cf(t lang.DType, x float64) ir.Expr { return &ir.Const{T: t, Float: x} }

func at(t *ir.Tensor, idx ...ir.Expr) *ir.Access {
	return &ir.Access{Pos: lang.Pos{File: "test.tdl", Line: 1, Col: 1}, T: t, Index: idx}
}

func atd(t *ir.Tensor, def ir.Expr, idx ...ir.Expr) *ir.Access {
	a := at(t, idx...)
	a.Default = def
	return a
}

func bin(op ir.BinOp, l, r ir.Expr) *ir.Binary {
	t := lang.Promote(l.Type(), r.Type())
	if op.IsComparison() || op == ir.OpAnd || op == ir.OpOr {
		t = lang.Bool
	}
	return &ir.Binary{Op: op, L: l, R: r, T: t}
}

func add(l, r ir.Expr) ir.Expr { return bin(ir.OpAdd, l, r) }
func sub(l, r ir.Expr) ir.Expr { return bin(ir.OpSub, l, r) }
func mul(l, r ir.Expr) ir.Expr { return bin(ir.OpMul, l, r) }

func sum(t lang.DType, body ir.Expr, vars ...*ir.Var) ir.Expr {
	return &ir.Reduce{Kind: ir.Sum, Vars: vars, Body: body, T: t}
}

func call(fn string, t lang.DType, args ...ir.Expr) ir.Expr {
	return &ir.Call{Fn: fn, Args: args, T: t}
}

// def defines t over fresh variables; body receives them.
func def(t *ir.Tensor, body func(v ...*ir.Var) ir.Expr) *ir.Def {
	vars := make([]*ir.Var, len(t.Shape))
	for i, d := range t.Shape {
		vars[i] = vr(string(rune('i'+i)), d)
	}
	return &ir.Def{Pos: lang.Pos{File: "test.tdl", Line: 2, Col: 1}, Tensor: t, Vars: vars, Body: body(vars...)}
}

func inst(inputs []*ir.Tensor, outputs ...*ir.Def) *ir.Instance {
	return &ir.Instance{Op: "test", Inputs: inputs, Outputs: outputs}
}

func randTensor(r *rand.Rand, dt lang.DType, shape ...int) *tensor.Tensor {
	t := tensor.New(dt, shape)
	for i := range t.Len() {
		if dt.IsFloat() {
			t.SetFlat(i, r.Float64()*2-1)
		} else {
			t.I[i] = dt.WrapInt(r.Int64N(200) - 100)
		}
	}
	return t
}

// matmulInst is C[i, j] = sum_k A[i, k] * B[k, j].
func matmulInst(dt lang.DType, m, k, n lang.Dim) *ir.Instance {
	a := tens("A", dt, m, k)
	b := tens("B", dt, k, n)
	c := tens("C", dt, m, n)
	kv := vr("k", k)
	return inst([]*ir.Tensor{a, b}, def(c, func(v ...*ir.Var) ir.Expr {
		return sum(dt, mul(at(a, ref(v[0]), ref(kv)), at(b, ref(kv), ref(v[1]))), kv)
	}))
}
