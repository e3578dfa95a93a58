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
func DefFLOPs(d *ir.Def) (int64, error) { return DefFLOPsRecomputing(d, nil) }

// DefFLOPsRecomputing is DefFLOPs of a Def whose reads of some tensors
// compute them where they read them (a kernel's recomputed locals and
// inlined producers): recomputed is such a tensor's Def, nil for the
// rest (and a nil recomputed for every tensor), and each read costs the
// Def's body at its index, as the element code computes it.
func DefFLOPsRecomputing(d *ir.Def, recomputed func(*ir.Tensor) *ir.Def) (int64, error) {
	return defCount(d, counter{own: flopsOf, perTerm: 1, recomputed: recomputed})
}

// DefMathCalls counts the calls of math function fn (ir.MathFuncs) that
// one Def makes: its number of elements times the calls of its body,
// reads of the tensors recomputed says making their Def's calls
// (DefFLOPsRecomputing; nil: none).
func DefMathCalls(d *ir.Def, fn string, recomputed func(*ir.Tensor) *ir.Def) (int64, error) {
	return defCount(d, counter{own: func(e ir.Expr) int64 {
		if c, ok := e.(*ir.Call); ok && c.Fn == fn {
			return 1
		}
		return 0
	}, recomputed: recomputed})
}

// counter is what a count sums over an expression's nodes: own at each
// node, perTerm more per element of a reduction's range (its
// combination), and at a read of a tensor that recomputed gives a Def
// for, that Def's body.
type counter struct {
	own        func(ir.Expr) int64
	perTerm    int64
	recomputed func(*ir.Tensor) *ir.Def
}

// defCount is d's number of elements times c's count of its body.
func defCount(d *ir.Def, c counter) (int64, error) {
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
	f, err := c.expr(d.Body)
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

// flopsOf is the floating-point operations of node e itself: one for a
// float arithmetic operation or a math call, none for the rest.
func flopsOf(e ir.Expr) int64 {
	switch e := e.(type) {
	case *ir.Binary:
		if e.T.IsFloat() {
			return 1
		}
	case *ir.Unary:
		if e.T.IsFloat() {
			return 1
		}
	case *ir.Call:
		return 1
	}
	return 0
}

// expr sums c over e's nodes, a reduction's body counted once per
// element of its range.
func (c counter) expr(e ir.Expr) (int64, error) {
	if r, ok := e.(*ir.Reduce); ok {
		body, err := c.expr(r.Body)
		if err != nil {
			return 0, err
		}
		n := int64(1)
		for _, v := range r.Vars {
			x, ok := v.Extent.IsConst()
			if !ok {
				return 0, fmt.Errorf("reduction extent %s is not concrete", v.Extent)
			}
			if n, err = checkedMul(n, x); err != nil {
				return 0, err
			}
		}
		if body, err = checkedAdd(body, c.perTerm); err != nil {
			return 0, err
		}
		return checkedMul(n, body)
	}
	total := c.own(e)
	if a, ok := e.(*ir.Access); ok && c.recomputed != nil {
		if d := c.recomputed(a.T); d != nil {
			f, err := c.expr(d.Body)
			if err == nil {
				total, err = checkedAdd(total, f)
			}
			if err != nil {
				return 0, err
			}
		}
	}
	for _, x := range ir.Children(e) {
		f, err := c.expr(x)
		if err == nil {
			total, err = checkedAdd(total, f)
		}
		if err != nil {
			return 0, err
		}
	}
	return total, nil
}
