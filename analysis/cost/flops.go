package cost

import (
	"fmt"

	"tofuc/lang/ir"
)

// InstanceFLOPs counts the floating-point operations of an instance read
// from its lambdas: for each output or local, its number of elements times
// the operations of its body, where a reduction costs its body plus one
// combination per element of its range. Index arithmetic is free.
func InstanceFLOPs(inst *ir.Instance) (int64, error) {
	var total int64
	for _, ds := range [][]*ir.Def{inst.Locals, inst.Outputs} {
		for _, d := range ds {
			n := int64(1)
			for _, v := range d.Vars {
				e, ok := v.Extent.IsConst()
				if !ok {
					return 0, fmt.Errorf("%s: extent %s is not concrete", inst.Op, v.Extent)
				}
				n *= e
			}
			f, err := exprFLOPs(d.Body)
			if err != nil {
				return 0, err
			}
			total += n * f
		}
	}
	return total, nil
}

func exprFLOPs(e ir.Expr) (int64, error) {
	var own int64
	switch e := e.(type) {
	case *ir.Binary:
		if e.T.IsFloat() {
			own = 1
		}
	case *ir.Unary:
		if e.T.IsFloat() {
			own = 1
		}
	case *ir.Call:
		own = 1
	case *ir.Reduce:
		body, err := exprFLOPs(e.Body)
		if err != nil {
			return 0, err
		}
		n := int64(1)
		for _, v := range e.Vars {
			c, ok := v.Extent.IsConst()
			if !ok {
				return 0, fmt.Errorf("reduction extent %s is not concrete", v.Extent)
			}
			n *= c
		}
		return n * (body + 1), nil
	}
	for _, c := range ir.Children(e) {
		f, err := exprFLOPs(c)
		if err != nil {
			return 0, err
		}
		own += f
	}
	return own, nil
}

// Elementwise reports whether an instance computes each output element
// from the elements at the same index of its full-rank inputs (lower-rank
// inputs, such as a bias or a scalar, may be read anywhere): one output,
// no locals, no reduction.
func Elementwise(inst *ir.Instance) bool {
	if len(inst.Outputs) != 1 || len(inst.Locals) > 0 {
		return false
	}
	d := inst.Outputs[0]
	ok := true
	ir.Walk(d.Body, func(e ir.Expr) bool {
		switch e := e.(type) {
		case *ir.Reduce, *ir.Opaque:
			ok = false
		case *ir.Access:
			if len(e.Index) == len(d.Vars) && !identityIndex(e.Index, d.Vars) {
				ok = false
			}
		}
		return ok
	})
	return ok
}

func identityIndex(idx []ir.Expr, vars []*ir.Var) bool {
	for i, x := range idx {
		r, isVar := x.(*ir.VarRef)
		if !isVar || r.V != vars[i] {
			return false
		}
	}
	return true
}
