package kernel

import (
	"tofuc/lang/ir"
)

// GEMM describes a kernel whose first stage is a sum of products,
// C[batch, rows, cols] = Σ_k A[batch, rows, k] · B[batch, cols, k],
// around which the rest of the stage (a bias, a scale) and the later
// stages are an epilogue. Every variable of the output is a batch
// variable (read by both factors, or by neither), a row variable (read by
// A only) or a column variable (read by B only); a host code generator
// packs A and B into panels and multiplies them with a register-blocked,
// vectorised micro-kernel (codegen/emit's gemm).
type GEMM struct {
	Sum *ir.Reduce
	// A and B are the factors; A is the side with fewer elements, whose
	// values are broadcast over the vector lanes of B.
	A, B  ir.Expr
	Batch []*ir.Var // in output order
	Rows  []*ir.Var
	Cols  []*ir.Var
	K     []*ir.Var // the sum's variables
}

// Extent is the number of values of a list of variables.
func Extent(vars []*ir.Var) int64 {
	n := int64(1)
	for _, v := range vars {
		c, _ := v.Extent.IsConst()
		n *= c
	}
	return n
}

// gemm recognises the first stage of a contraction kernel whose
// sum and factors are floating point.
func (b *builder) gemm() *GEMM {
	k := b.k
	if k.Kind != Contraction || len(k.Reductions) != 1 {
		return nil
	}
	r := k.Reductions[0]
	if r.Kind != ir.Sum || !r.T.IsFloat() || !k.Stages[0].Tensor.DType.IsFloat() {
		return nil
	}
	body := r.Body
	for {
		c, ok := body.(*ir.Cast)
		if !ok {
			break
		}
		body = c.X
	}
	m, ok := body.(*ir.Binary)
	if !ok || m.Op != ir.OpMul || !m.L.Type().IsFloat() || !m.R.Type().IsFloat() || !plainFactor(m.L) || !plainFactor(m.R) {
		return nil
	}
	c := &GEMM{Sum: r, A: m.L, B: m.R, K: r.Vars}
	inL, inR := varRefs(m.L), varRefs(m.R)
	for _, v := range k.Vars {
		switch {
		case inL[v] == inR[v]:
			c.Batch = append(c.Batch, v)
		case inL[v]:
			c.Rows = append(c.Rows, v)
		default:
			c.Cols = append(c.Cols, v)
		}
	}
	if Extent(c.Rows) > Extent(c.Cols) {
		c.A, c.B = c.B, c.A
		c.Rows, c.Cols = c.Cols, c.Rows
	}
	return c
}

// plainFactor reports whether e can be evaluated for any index values
// once per element: no reduction and no opaque call.
func plainFactor(e ir.Expr) bool {
	ok := true
	ir.Walk(e, func(x ir.Expr) bool {
		switch x.(type) {
		case *ir.Reduce, *ir.Opaque:
			ok = false
		}
		return ok
	})
	return ok
}

// varRefs is the set of variables e reads.
func varRefs(e ir.Expr) map[*ir.Var]bool {
	out := map[*ir.Var]bool{}
	ir.Walk(e, func(x ir.Expr) bool {
		if r, ok := x.(*ir.VarRef); ok {
			out[r.V] = true
		}
		return true
	})
	return out
}
