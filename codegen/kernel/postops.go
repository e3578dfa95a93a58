package kernel

import (
	"math"
	"slices"

	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/runtime/plan"
)

// PostOps is a kernel's output as its only sum followed by what a
// library's call can add to it in the same pass (oneDNN's bias and
// post-ops, plan.PostOps): a bias read along one output variable, then
// bounds (a ReLU, a clip) in order.
type PostOps struct {
	Bias    int // the bias's argument (f32, one dimension); -1: none
	BiasVar int // the position in Vars of the variable the bias is read at
	Acts    []plan.Activation
}

// PostOps describes k's output as its sum and post-ops when it is one:
// the last stage is a chain of max and min with numeric constants over
// the sum plus, at most, one read of an f32 argument at one output
// variable, through the stages before it read at the output index.
func (k *Kernel) PostOps() (*PostOps, bool) {
	if len(k.Reductions) != 1 || len(k.Stages) == 0 || k.Out().DType != lang.F32 || k.SumIn != nil {
		return nil, false
	}
	p := &PostOps{Bias: -1, BiasVar: -1}
	last := len(k.Stages) - 1
	if !k.postOps(p, last, k.Stages[last].Body) {
		return nil, false
	}
	slices.Reverse(p.Acts) // found from the outside in
	return p, true
}

// postOps matches e, part of stage st's body, adding the bounds around
// the sum to p.Acts from the outside in and the bias to p.
func (k *Kernel) postOps(p *PostOps, st int, e ir.Expr) bool {
	switch x := e.(type) {
	case *ir.Cast:
		return x.T == lang.F32 && x.X.Type() == lang.F32 && k.postOps(p, st, x.X)
	case *ir.Call:
		if len(x.Args) != 2 || (x.Fn != "max" && x.Fn != "min") {
			return false
		}
		for i, arg := range x.Args {
			c, ok := floatConst(arg)
			if !ok {
				continue
			}
			// The bound in f32, as the kernel compares: one that bounds
			// nothing (a clip's missing side, -inf for a max, inf for a
			// min) is dropped; one that replaces every value (inf for a
			// max, NaN) is no post-op.
			value := float64(float32(c))
			kind, open := plan.ActMax, math.IsInf(value, -1)
			if x.Fn == "min" {
				kind, open = plan.ActMin, math.IsInf(value, 1)
			}
			switch {
			case open:
			case math.IsInf(value, 0), math.IsNaN(value):
				return false
			default:
				p.Acts = append(p.Acts, plan.Activation{Kind: kind, Value: value})
			}
			return k.postOps(p, st, x.Args[1-i])
		}
		return false
	case *ir.Binary:
		if x.Op != ir.OpAdd || p.Bias >= 0 {
			return false
		}
		sides := []ir.Expr{x.L, x.R}
		for i, side := range sides {
			if arg, v, ok := k.biasRead(st, side); ok && k.isSum(st, sides[1-i]) {
				p.Bias, p.BiasVar = arg, v
				return true
			}
		}
		return false
	case *ir.Access:
		if prev, ok := k.stageRead(st, x); ok {
			return k.postOps(p, prev, k.Stages[prev].Body)
		}
	}
	return k.isSum(st, e)
}

// isSum reports whether e, part of stage st's body, is the kernel's sum
// itself, directly or as an earlier stage's value at the output index.
func (k *Kernel) isSum(st int, e ir.Expr) bool {
	switch x := e.(type) {
	case *ir.Reduce:
		return st == 0 && x == k.Reductions[0]
	case *ir.Cast:
		return x.T == lang.F32 && x.X.Type() == lang.F32 && k.isSum(st, x.X)
	case *ir.Access:
		prev, ok := k.stageRead(st, x)
		return ok && k.isSum(prev, k.Stages[prev].Body)
	}
	return false
}

// stageRead is the earlier stage that a, in stage st's body, reads at
// the output index (st's own variables, in order), if it is one.
func (k *Kernel) stageRead(st int, a *ir.Access) (int, bool) {
	src, ok := k.Source(a.T)
	vars := k.Stages[st].Vars
	if !ok || src.Stage < 0 || src.Stage >= st || a.Default != nil || len(a.Index) != len(vars) {
		return 0, false
	}
	for d, x := range a.Index {
		if r, ok := x.(*ir.VarRef); !ok || r.V != vars[d] {
			return 0, false
		}
	}
	return src.Stage, true
}

// biasRead is the argument e, in stage st's body, reads directly when it
// reads an f32 argument of one dimension at one of st's variables, of
// that variable's extent, and the variable's position.
func (k *Kernel) biasRead(st int, e ir.Expr) (arg, pos int, ok bool) {
	a, isAccess := e.(*ir.Access)
	if !isAccess || a.Default != nil || len(a.Index) != 1 {
		return 0, 0, false
	}
	src, found := k.Source(a.T)
	r, isVar := a.Index[0].(*ir.VarRef)
	if !found || src.Arg < 0 || !isVar || k.Args[src.Arg].DType != lang.F32 || len(k.Args[src.Arg].Shape) != 1 {
		return 0, 0, false
	}
	pos = slices.Index(k.Stages[st].Vars, r.V)
	if pos < 0 || k.Args[src.Arg].Shape[0] != k.Shape[pos] {
		return 0, 0, false
	}
	return src.Arg, pos, true
}

// floatConst is e's value when e is a numeric constant.
func floatConst(e ir.Expr) (float64, bool) {
	if c, ok := e.(*ir.Cast); ok {
		e = c.X
	}
	c, ok := e.(*ir.Const)
	switch {
	case !ok:
		return 0, false
	case c.T.IsFloat():
		return c.Float, true
	case c.T.IsInt():
		return float64(c.Int), true
	}
	return 0, false
}
