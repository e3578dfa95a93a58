package schedule

import (
	"slices"

	"tofuc/lang/ir"
)

// IsView reports whether each output of inst reads one contiguous range of
// one input, read from its lambda: the body is an access to an input at
// the output's own indices, except at most one axis shifted by a
// constant; on the first axis where the range is narrower than the input
// (or shifted), every axis before has extent 1 and every axis after is
// whole.
func IsView(inst *ir.Instance) bool {
	if len(inst.Locals) > 0 || len(inst.Outputs) == 0 {
		return false
	}
	for _, d := range inst.Outputs {
		a, ok := d.Body.(*ir.Access)
		if !ok || a.Default != nil || len(a.Index) != len(d.Vars) {
			return false
		}
		shifted := -1
		for i, x := range a.Index {
			if r, ok := x.(*ir.VarRef); ok && r.V == d.Vars[i] {
				continue
			}
			if shifted >= 0 || !shiftOf(x, d.Vars[i]) {
				return false
			}
			shifted = i
		}
		if shifted < 0 {
			for i, v := range d.Vars {
				if !a.T.Shape[i].Equal(v.Extent) {
					shifted = i
					break
				}
			}
		}
		if shifted < 0 {
			continue // the whole input
		}
		for i := 0; i < shifted; i++ {
			if c, ok := a.T.Shape[i].IsConst(); !ok || c != 1 {
				return false
			}
		}
		for i := shifted + 1; i < len(d.Vars); i++ {
			if !a.T.Shape[i].Equal(d.Vars[i].Extent) {
				return false
			}
		}
	}
	return true
}

// shiftOf reports whether x is v plus a constant.
func shiftOf(x ir.Expr, v *ir.Var) bool {
	b, ok := x.(*ir.Binary)
	if !ok || b.Op != ir.OpAdd {
		return false
	}
	r, isVar := b.L.(*ir.VarRef)
	if !isVar || r.V != v {
		return false
	}
	switch k := b.R.(type) {
	case *ir.Const:
		return true
	case *ir.Size:
		_, ok := k.D.IsConst()
		return ok
	}
	return false
}

// IsInjective reports whether inst moves its input's elements without
// computing anything: one output whose lambda reads one input at indices
// computed from its variables alone (affine, or divided and reduced by
// constants as a head merge's are), every index in range (no default: a pad's
// zeros keep their launch, so that a contraction reading the padded
// tensor packs plain runs), as transposes, non-contiguous slices and
// head splits do.
func IsInjective(inst *ir.Instance) bool {
	if len(inst.Outputs) != 1 || len(inst.Locals) > 0 {
		return false
	}
	a, ok := inst.Outputs[0].Body.(*ir.Access)
	if !ok || a.Default != nil || !slices.Contains(inst.Inputs, a.T) {
		return false
	}
	computed := false
	for _, x := range a.Index {
		ir.Walk(x, func(e ir.Expr) bool {
			switch e.(type) {
			case *ir.Access, *ir.Reduce, *ir.Opaque:
				computed = true
			}
			return !computed
		})
	}
	return !computed
}

// fusibleOn reports whether an instance can be evaluated on the value of
// its input i held in registers at the output's index: one output, no
// reduction or opaque call in it, and input i read only at the output's
// own index. Its other inputs and locals, in buffers by then, may be read
// at any index (a bias, a broadcast scale).
func fusibleOn(inst *ir.Instance, i int) bool {
	if len(inst.Outputs) != 1 {
		return false
	}
	d := inst.Outputs[0]
	ok := true
	ir.Walk(d.Body, func(e ir.Expr) bool {
		switch e := e.(type) {
		case *ir.Reduce, *ir.Opaque:
			ok = false
		case *ir.Access:
			if e.T == inst.Inputs[i] && !identityIndex(e.Index, d.Vars) {
				ok = false
			}
		}
		return ok
	})
	return ok
}

func identityIndex(idx []ir.Expr, vars []*ir.Var) bool {
	if len(idx) != len(vars) {
		return false
	}
	for i, x := range idx {
		r, isVar := x.(*ir.VarRef)
		if !isVar || r.V != vars[i] {
			return false
		}
	}
	return true
}
