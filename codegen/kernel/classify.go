package kernel

import (
	"fmt"
	"slices"

	"tofuc/analysis/schedule"

	"tofuc/lang/ir"
)

// accesses resolves every access of body (and of the recomputed locals
// it reads): which dimensions are checked at run time, and the error
// site of those without a default.
func (b *builder) accesses(body ir.Expr) error {
	var err error
	walked := map[*ir.Def]bool{}
	var walk func(e ir.Expr)
	walk = func(e ir.Expr) {
		ir.Walk(e, func(x ir.Expr) bool {
			if err != nil {
				return false
			}
			switch x := x.(type) {
			case *ir.Opaque:
				err = fmt.Errorf("opaque function %s inside a local or a fused stage", x.Fn)
			case *ir.Access:
				src, ok := b.k.source[x.T]
				if !ok {
					if _, bound := b.buffers[x.T]; !bound {
						err = fmt.Errorf("tensor %s is read but not bound", x.T.Name)
						return false
					}
					if src, err = b.argument(x.T); err != nil {
						return false
					}
				}
				if src.Local != nil && !walked[src.Local] {
					walked[src.Local] = true
					walk(src.Local.Body)
				}
				err = b.access(x, src)
			}
			return err == nil
		})
	}
	walk(body)
	return err
}

func (b *builder) access(a *ir.Access, src Source) error {
	var shape []int64
	switch {
	case src.Stage >= 0:
		if !identityOfStage(a, b.k) {
			return fmt.Errorf("a fused stage reads %s away from the output index", a.T.Name)
		}
		return nil
	case src.Const != nil:
		return nil
	case src.Local != nil:
		shape, _ = concrete(src.Local.Tensor)
	default:
		shape = b.k.Args[src.Arg].Shape
	}
	if len(a.Index) != len(shape) {
		return fmt.Errorf("%d indices for %s of rank %d", len(a.Index), a.T.Name, len(shape))
	}
	checked := make([]bool, len(shape))
	any := false
	for d, x := range a.Index {
		checked[d] = !inRange(x, shape[d])
		any = any || checked[d]
	}
	b.k.checked[a] = checked
	if any && a.Default == nil {
		b.k.site[a] = len(b.k.Sites)
		b.k.Sites = append(b.k.Sites, Site{Pos: a.Pos, Tensor: a.T.Name, Shape: shape})
	}
	return nil
}

// identityOfStage reports whether a reads at the index variables of the
// stage that contains it: a fused stage reads its producer at its own
// index. The stage is not known here, so any stage's variables qualify.
func identityOfStage(a *ir.Access, k *Kernel) bool {
	for _, d := range k.Stages {
		if identity(a.Index, d.Vars) {
			return true
		}
	}
	return false
}

// inRange reports whether index x provably stays in [0, n): an affine
// x by its merged terms (i + k - k has the range of i), another by
// ir.IndexRange (divisions and remainders).
func inRange(x ir.Expr, n int64) bool {
	var lo, hi int64
	a, ok := ir.AffineOf(x, nil)
	if ok {
		lo, hi, ok = a.Bounds(extentOf)
	} else {
		lo, hi, ok = ir.IndexRange(x, extentOf)
	}
	return ok && lo >= 0 && hi < n
}

func identity(idx []ir.Expr, vars []*ir.Var) bool {
	if len(idx) != len(vars) {
		return false
	}
	for i, x := range idx {
		r, ok := x.(*ir.VarRef)
		if !ok || r.V != vars[i] {
			return false
		}
	}
	return true
}

// classify sets the kernel's kind, its top-level reductions and the
// descriptions a form may lower it by: its row locals (Rows) or its GEMM.
func (b *builder) classify() {
	k := b.k
	if k.Rows = b.rows(); k.Rows != nil {
		k.Kind = Reduction
		k.Reductions = topLevelReductions(k.Stages[0].Body)
		for _, l := range k.Rows.Locals {
			if l.BufferLen > 0 {
				continue // each element's reductions are its own
			}
			for _, r := range l.Reductions {
				k.ReduceLen = max(k.ReduceLen, ir.Extent(r.Vars))
			}
		}
		return
	}
	k.Reductions = topLevelReductions(k.Stages[0].Body)
	for _, r := range k.Reductions {
		k.ReduceLen = max(k.ReduceLen, ir.Extent(r.Vars))
	}
	k.Kind = b.kind()
	k.GEMM = b.gemm()
}

func (b *builder) kind() Kind {
	k := b.k
	for _, r := range k.Reductions {
		if ir.IsContraction(r) {
			return Contraction
		}
	}
	if len(k.Reductions) > 0 {
		return Reduction
	}
	kind := Elementwise
	for _, d := range k.Stages {
		ir.Walk(d.Body, func(e ir.Expr) bool {
			switch e := e.(type) {
			case *ir.Reduce:
				if kind == Elementwise || kind == Injective {
					kind = Reduction
				}
			case *ir.Access:
				for _, x := range e.Index {
					if !ir.IsAffine(x) {
						kind = Gather
					}
				}
				if kind == Elementwise && len(e.Index) == len(d.Vars) && !identity(e.Index, d.Vars) {
					kind = Injective
				}
			}
			return true
		})
	}
	return kind
}

// rows is the row form of the kernel (schedule.Rows): the first stage is
// its instance's output, and the row locals are those recomputed here
// (not precomputed with the weights).
func (b *builder) rows() *Rows {
	inst, k := b.rootInst, b.k
	if len(k.Opaques) > 0 || len(inst.Outputs) != 1 || !slices.Equal(inst.Outputs[0].Vars, k.Vars) {
		return nil
	}
	var r Rows
	for _, l := range schedule.Rows(inst) {
		if src, ok := k.source[l.Def.Tensor]; !ok || src.Local != l.Def {
			continue
		}
		rl := RowLocal{Def: l.Def, At: l.Key, Reductions: topLevelReductions(l.Def.Body)}
		if l.Buffered() {
			rl.BufferLen = l.BufferLen()
			r.BufferLen += rl.BufferLen
		}
		r.Locals = append(r.Locals, rl)
		for _, p := range l.Key {
			if p >= 0 && !slices.Contains(r.Key, p) {
				r.Key = append(r.Key, p)
			}
		}
	}
	if len(r.Locals) == 0 {
		return nil
	}
	slices.Sort(r.Key)
	r.Count = 1
	for _, p := range r.Key {
		r.Count *= k.Shape[p]
	}
	r.Len = k.Elements / max(r.Count, 1)
	return &r
}

// topLevelReductions lists the reductions of e that every evaluation of
// e computes, outside other reductions and outside the branches of a
// select or the default of an access, in evaluation order.
func topLevelReductions(e ir.Expr) []*ir.Reduce {
	var out []*ir.Reduce
	var walk func(e ir.Expr)
	walk = func(e ir.Expr) {
		switch e := e.(type) {
		case *ir.Reduce:
			out = append(out, e)
		case *ir.Select:
			walk(e.C)
		case *ir.Access:
			for _, x := range e.Index {
				walk(x)
			}
		case *ir.Binary:
			if e.Op == ir.OpAnd || e.Op == ir.OpOr {
				walk(e.L) // the right operand may not be evaluated
				return
			}
			walk(e.L)
			walk(e.R)
		case *ir.Unary, *ir.Call, *ir.Cast:
			for _, c := range ir.Children(e) {
				walk(c)
			}
		}
	}
	walk(e)
	return out
}
