package kernel

import (
	"fmt"

	"tofuc/lang"
	"tofuc/lang/ir"
)

// OpaqueCall is an opaque function a kernel needs computed on the host
// before it runs: for every index of the batch (the output variables its
// views are fixed to), Fn is applied to the views, and the results fill
// buffer Result, which the kernel then reads like any argument.
type OpaqueCall struct {
	Fn     string
	Pos    lang.Pos
	Args   []OpaqueArg
	Batch  []int64 // extents of the batch variables
	Shape  []int64 // the shape of one result
	Result any     // the key of the result buffer
	DType  lang.DType
}

// OpaqueArg is a view: buffer Key with dimension d fixed to batch
// variable Fixed[d] (-1: passed whole).
type OpaqueArg struct {
	Key   any
	Fixed []int
}

// OpaqueResult is the key of the buffer holding the results of an opaque
// call of a kernel.
type OpaqueResult struct {
	Kernel string // the kernel's label
	Call   int
}

// hoistOpaque replaces every opaque call of d's body by a read of a
// result buffer computed on the host (see OpaqueCall). The views must be
// fixed by output variables of d, as in `opaque cholesky(m[b, :, :])[i,
// j]`; the call is then computed once per value of those variables.
func (b *builder) hoistOpaque(d *ir.Def) (*ir.Def, error) {
	var err error
	body := ir.Map(d.Body, func(e ir.Expr) ir.Expr {
		o, ok := e.(*ir.Opaque)
		if !ok || err != nil {
			return e
		}
		var a *ir.Access
		a, err = b.opaqueRead(o, d)
		if err != nil {
			return e
		}
		return a
	})
	if err != nil {
		return nil, err
	}
	return &ir.Def{Pos: d.Pos, Tensor: d.Tensor, Vars: d.Vars, Body: body}, nil
}

func (b *builder) opaqueRead(o *ir.Opaque, d *ir.Def) (*ir.Access, error) {
	var batch []*ir.Var
	slot := map[*ir.Var]int{}
	call := OpaqueCall{Fn: o.Fn, Pos: o.Pos, Result: OpaqueResult{b.k.Label, len(b.k.Opaques)}}
	for _, v := range o.Args {
		key, bound := b.buffers[v.T]
		if !bound {
			return nil, fmt.Errorf("%s: opaque %s reads %s, which is no buffer", o.Pos, o.Fn, v.T.Name)
		}
		arg := OpaqueArg{Key: key}
		for _, x := range v.Index {
			if x == nil {
				arg.Fixed = append(arg.Fixed, -1)
				continue
			}
			r, ok := x.(*ir.VarRef)
			if !ok || !isVar(r.V, d.Vars) {
				return nil, fmt.Errorf("%s: opaque %s: compiled code needs views fixed by output indices, not %s", o.Pos, o.Fn, ir.ExprString(x))
			}
			if _, seen := slot[r.V]; !seen {
				slot[r.V] = len(batch)
				batch = append(batch, r.V)
			}
			arg.Fixed = append(arg.Fixed, slot[r.V])
		}
		call.Args = append(call.Args, arg)
	}
	result := &ir.Tensor{Name: o.Fn + " result", DType: lang.F64}
	if !o.T.IsFloat() {
		result.DType = lang.I64
	}
	call.DType = result.DType
	var index []ir.Expr
	for _, v := range batch {
		n, ok := v.Extent.IsConst()
		if !ok {
			return nil, fmt.Errorf("%s: opaque %s: symbolic extent %s", o.Pos, o.Fn, v.Extent)
		}
		call.Batch = append(call.Batch, n)
		result.Shape = append(result.Shape, v.Extent)
		index = append(index, &ir.VarRef{V: v})
	}
	for _, dim := range o.Shape {
		n, ok := dim.IsConst()
		if !ok {
			return nil, fmt.Errorf("%s: opaque %s: symbolic result shape", o.Pos, o.Fn)
		}
		call.Shape = append(call.Shape, n)
		result.Shape = append(result.Shape, dim)
	}
	b.k.Opaques = append(b.k.Opaques, call)
	b.buffers[result] = call.Result
	return &ir.Access{Pos: o.Pos, T: result, Index: append(index, o.Index...)}, nil
}

func isVar(v *ir.Var, vars []*ir.Var) bool {
	for _, w := range vars {
		if w == v {
			return true
		}
	}
	return false
}
