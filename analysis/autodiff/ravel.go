package autodiff

import (
	"maps"
	"slices"

	"tofuc/lang"
	"tofuc/lang/ir"
)

// solveRavel solves the part of a read index that reshapes (stdlib's
// reshape, flatten): the dimensions d of extent n_d > 1 whose index
// divides or takes a remainder, or is linear in several variables,
// index_d = (L / s_d) % n_d, s their
// row-major strides, with L = Σ t_k·v_k over variables of extents
// e_k > 1 (the others are 0), t their row-major strides, and the two
// sizes equal. Such a map is a bijection, and each v_k =
// (L' / t_k) % e_k with L' = Σ s_d·u_d: the gradient is a gather, where
// inverting each dimension alone would leave a sum over every element
// for every element. It returns the solutions and the dimensions
// solved, or nil where the index has no such part (or an extent is not
// a constant); invert solves the other dimensions one by one.
func solveRavel(u []*ir.Var, index []ir.Expr) (map[*ir.Var]ir.Expr, map[int]bool) {
	var group []int // the dimensions L's parts index
	for d, idx := range index {
		b, ok := idx.(*ir.Binary)
		coefs, linearIdx := linear(idx)
		if ok && (b.Op == ir.OpDiv || b.Op == ir.OpMod) || linearIdx && len(coefs) > 1 {
			group = append(group, d)
		}
	}
	n := make([]int64, len(group))
	for i, d := range group {
		e, ok := u[d].Extent.IsConst()
		if !ok || e == 1 {
			return nil, nil
		}
		n[i] = e
	}
	if len(group) == 0 {
		return nil, nil
	}
	strides := lang.RowMajor(n)
	var lin map[*ir.Var]int64 // L's coefficients, the same in every part
	for i, d := range group {
		l, ok := ravelPart(index[d], strides[i], n[i], i == 0)
		if !ok || lin != nil && !maps.Equal(l, lin) {
			return nil, nil
		}
		lin = l
	}
	var flat ir.Expr = ir.IndexConst(0) // L' = Σ s_d·u_d
	for i, d := range group {
		flat = ir.IndexAdd(flat, ir.IndexMul(&ir.VarRef{V: u[d]}, strides[i]))
	}
	solved := ravelSolutions(flat, n, lin)
	if solved == nil {
		return nil, nil
	}
	handled := map[int]bool{}
	for _, d := range group {
		handled[d] = true
	}
	return solved, handled
}

// ravelPart matches one dimension's index, (L / stride) % extent (the
// first dimension's without the modulo, a stride of 1 without the
// division), and returns L's coefficients when L is linear with no
// constant.
func ravelPart(idx ir.Expr, stride, extent int64, first bool) (map[*ir.Var]int64, bool) {
	if b, ok := idx.(*ir.Binary); ok && b.Op == ir.OpMod {
		if k, ok := ir.ConstInt(b.R); !ok || k != extent {
			return nil, false
		}
		idx = b.L
	} else if !first {
		return nil, false
	}
	if stride != 1 {
		b, ok := idx.(*ir.Binary)
		if !ok || b.Op != ir.OpDiv {
			return nil, false
		}
		if k, ok := ir.ConstInt(b.R); !ok || k != stride {
			return nil, false
		}
		idx = b.L
	}
	coefs, ok := linear(idx)
	if !ok {
		return nil, false
	}
	zero := map[*ir.Var]ir.Expr{}
	for v := range coefs {
		zero[v] = ir.IndexConst(0)
	}
	if k, ok := ir.ConstInt(foldIndex(substitute(idx, zero))); !ok || k != 0 {
		return nil, false
	}
	return coefs, true
}

// ravelSolutions checks that L's coefficients lin, over its variables of
// extent above 1, are the row-major strides of their extents, over as
// many elements as n, and solves each variable from flat (L'); a
// variable of extent 1 is 0.
func ravelSolutions(flat ir.Expr, n []int64, lin map[*ir.Var]int64) map[*ir.Var]ir.Expr {
	solved := map[*ir.Var]ir.Expr{}
	var used []*ir.Var
	for v := range lin {
		switch e, ok := v.Extent.IsConst(); {
		case !ok:
			return nil
		case e == 1:
			solved[v] = ir.IndexConst(0)
		default:
			used = append(used, v)
		}
	}
	slices.SortFunc(used, func(a, b *ir.Var) int { return int(lin[b] - lin[a]) })
	extents, _ := constExtents(used)
	if product(extents) != product(n) || !slices.Equal(coefsOf(used, lin), lang.RowMajor(extents)) {
		return nil
	}
	for k, v := range used {
		e := flat
		if t := lin[v]; t != 1 {
			e = ir.IndexBin(ir.OpDiv, e, ir.IndexConst(t))
		}
		if k > 0 {
			e = ir.IndexBin(ir.OpMod, e, ir.IndexConst(extents[k]))
		}
		solved[v] = e
	}
	return solved
}

// constExtents are the variables' extents, when all are constants.
func constExtents(vars []*ir.Var) ([]int64, bool) {
	out := make([]int64, len(vars))
	for i, v := range vars {
		e, ok := v.Extent.IsConst()
		if !ok {
			return nil, false
		}
		out[i] = e
	}
	return out, true
}

func product(xs []int64) int64 {
	p := int64(1)
	for _, x := range xs {
		p *= x
	}
	return p
}

func coefsOf(vars []*ir.Var, lin map[*ir.Var]int64) []int64 {
	out := make([]int64, len(vars))
	for i, v := range vars {
		out[i] = lin[v]
	}
	return out
}
