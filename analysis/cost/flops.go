package cost

import (
	"errors"
	"fmt"

	"tofuc/lang"
	"tofuc/lang/ir"
)

// InstanceFLOPs counts the floating-point operations of an instance read
// from its lambdas: the DefFLOPs of each local and output.
func InstanceFLOPs(inst *ir.Instance) (int64, error) {
	var total int64
	for _, ds := range [][]*ir.Def{inst.Locals, inst.Outputs} {
		for _, d := range ds {
			f, err := DefFLOPs(d)
			if err == nil {
				total, err = checkedAdd(total, f)
			}
			if err != nil {
				return 0, fmt.Errorf("%s: %w", inst.Op, err)
			}
		}
	}
	return total, nil
}

// DefFLOPs counts the floating-point operations of one Def: its number of
// elements times the operations of its body, where a reduction costs its
// body plus one combination per element of its range. Index arithmetic is
// free.
func DefFLOPs(d *ir.Def) (int64, error) {
	n := int64(1)
	for _, v := range d.Vars {
		e, ok := v.Extent.IsConst()
		if !ok {
			return 0, fmt.Errorf("extent %s is not concrete", v.Extent)
		}
		var err error
		if n, err = checkedMul(n, e); err != nil {
			return 0, err
		}
	}
	f, err := exprFLOPs(d.Body)
	if err != nil {
		return 0, err
	}
	return checkedMul(n, f)
}

// errOverflow reports a FLOP or byte count that leaves int64 (a model
// whose sizes were bound to huge values).
var errOverflow = errors.New("its FLOPs or bytes leave 64-bit integers")

func checkedAdd(a, b int64) (int64, error) {
	if s, ok := lang.AddInt64(a, b); ok {
		return s, nil
	}
	return 0, errOverflow
}

func checkedMul(a, b int64) (int64, error) {
	if p, ok := lang.MulInt64(a, b); ok {
		return p, nil
	}
	return 0, errOverflow
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
			if n, err = checkedMul(n, c); err != nil {
				return 0, err
			}
		}
		if body, err = checkedAdd(body, 1); err != nil {
			return 0, err
		}
		return checkedMul(n, body)
	}
	for _, c := range ir.Children(e) {
		f, err := exprFLOPs(c)
		if err == nil {
			own, err = checkedAdd(own, f)
		}
		if err != nil {
			return 0, err
		}
	}
	return own, nil
}
