package kernel

import (
	"tofuc/lang/ir"
)

// Reads through views. A producer inlined into a kernel (a prologue) is
// recomputed where it is read; when it only reads another tensor at an
// index of its own (a reshape, a transpose, a slice, a broadcast), its
// read is the other tensor's at the composed index. composeViews makes
// that read direct and simplifies every index of the stage's reads
// (ir.SimplifyIndex), so that the bounds analysis, the classifier and
// the code generator see the index the kernel computes: ShuffleNet's
// channel shuffle was a dozen divisions an element and a checked read
// that kept its loop scalar (0.44 ms for 90,944 floats), and is x[n, (c
// % 2)·58 + c / 2, h, w].

// extentOf is a variable's extent, when it is a number.
func extentOf(v *ir.Var) (int64, bool) { return v.Extent.IsConst() }

// composeViews returns d with its reads of view-like locals made reads
// of what they read, and every read's index simplified, outside
// reductions: which sums are contractions (ir.IsContraction, by the
// variables their factors read) is the precision analysis's decision
// (analysis/rounding), made on the operators as written, and a
// contraction's form must agree with it (a tensor core's rounding is
// only allowed where that analysis expects it).
func (b *builder) composeViews(d *ir.Def) *ir.Def {
	isReduce := func(e ir.Expr) bool { _, ok := e.(*ir.Reduce); return ok }
	body := ir.MapUnless(d.Body, isReduce, func(e ir.Expr) ir.Expr {
		a, ok := e.(*ir.Access)
		if !ok {
			return e
		}
		return b.throughViews(a)
	})
	return &ir.Def{Pos: d.Pos, Tensor: d.Tensor, Vars: d.Vars, Body: body}
}

// throughViews simplifies a's index (a is Map's copy, changed in place)
// and follows a read of a local whose body is a read of the same dtype,
// at an index in the local's range (so that neither its default nor a
// range error applies): the read becomes the body's, its variables
// replaced by a's index and simplified, until the source is no such
// local.
func (b *builder) throughViews(a *ir.Access) *ir.Access {
	simplifyIndex(a)
	for {
		src, ok := b.k.source[a.T]
		if !ok || src.Local == nil {
			return a
		}
		inner, ok := src.Local.Body.(*ir.Access)
		if !ok || inner.T.DType != src.Local.Tensor.DType {
			return a
		}
		shape, err := concrete(src.Local.Tensor)
		if err != nil || len(shape) != len(a.Index) {
			return a
		}
		at := map[*ir.Var]ir.Expr{}
		for d, x := range a.Index {
			if !inRange(x, shape[d]) {
				return a
			}
			at[src.Local.Vars[d]] = x
		}
		composed, ok := readAt(inner, at)
		if !ok {
			return a
		}
		simplifyIndex(composed)
		composed.Pos = a.Pos
		a = composed
	}
}

// readAt is a copy of a with each variable of at replaced by its
// expression; ok is false when a reads any other variable.
func readAt(a *ir.Access, at map[*ir.Var]ir.Expr) (*ir.Access, bool) {
	ok := true
	out := ir.Map(a, func(e ir.Expr) ir.Expr {
		r, isRef := e.(*ir.VarRef)
		if !isRef {
			return e
		}
		x, found := at[r.V]
		ok = ok && found
		if !found {
			return e
		}
		return x
	})
	return out.(*ir.Access), ok
}

// simplifyIndex simplifies each index of a in place (ir.SimplifyIndex).
func simplifyIndex(a *ir.Access) {
	for i, x := range a.Index {
		a.Index[i] = ir.SimplifyIndex(x, extentOf)
	}
}
