package codegen

import (
	"fmt"

	"tofuc/codegen/kernel"
	"tofuc/lang"
	"tofuc/lang/ir"
)

// reductionKey is the buffer key of a reduction kernel's operand i.
type reductionKey struct {
	label string
	i     int
}

// reductionKernel returns the plan index of the kernel a GPU runtime
// launches for a reduce step: out = parts[0] ⊕ parts[1] ⊕ ... element by
// element, folded in the parts' order in the dtype's domain (float64 for
// floats) and rounded once, as runtime/cpu combines them. Its arguments
// are the parts, then the result, all of shape and dtype of the result.
func (b *builder) reductionKernel(reducer string, dt lang.DType, shape []int64, parts int) (int, error) {
	dims := make([]lang.Dim, len(shape))
	for i, n := range shape {
		dims[i] = lang.Const(n)
	}
	inst := &ir.Instance{Op: "reduce_" + reducer}
	for i := range parts {
		inst.Inputs = append(inst.Inputs, &ir.Tensor{Name: fmt.Sprintf("p%d", i), DType: dt, Shape: dims})
	}
	out := &ir.Def{Tensor: &ir.Tensor{Name: "out", DType: dt, Shape: dims}}
	for i, d := range dims {
		out.Vars = append(out.Vars, &ir.Var{Name: fmt.Sprintf("i%d", i), Extent: d})
	}
	read := func(t *ir.Tensor) ir.Expr {
		idx := make([]ir.Expr, len(out.Vars))
		for i, v := range out.Vars {
			idx[i] = &ir.VarRef{V: v}
		}
		return &ir.Access{T: t, Index: idx}
	}
	acc := read(inst.Inputs[0])
	for _, t := range inst.Inputs[1:] {
		var err error
		if acc, err = fold(reducer, dt, acc, read(t)); err != nil {
			return 0, err
		}
	}
	out.Body = acc
	inst.Outputs = []*ir.Def{out}
	label := fmt.Sprintf("%s of %d %s%v", reducer, parts, dt, shape)
	bind := func(t *ir.Tensor) (kernel.Binding, error) {
		for i, in := range inst.Inputs {
			if in == t {
				return kernel.Binding{Buffer: reductionKey{label, i}}, nil
			}
		}
		return kernel.Binding{}, fmt.Errorf("tensor %s is no part", t.Name)
	}
	k, err := kernel.Build(label, reductionKey{label, parts}, []kernel.Stage{{Inst: inst, Def: out, Bind: bind}})
	if err != nil {
		return 0, err
	}
	idx, err := b.kernel(k)
	if err != nil {
		return 0, err
	}
	b.p.Kernels[idx].Reducer = reducer // part of its record: a reduce step's reducer is checked against it
	return idx, nil
}

// fold combines a with b as the reducer does; max and min keep a NaN.
func fold(reducer string, dt lang.DType, a, b ir.Expr) (ir.Expr, error) {
	bin := func(op ir.BinOp, l, r ir.Expr, t lang.DType) ir.Expr { return &ir.Binary{Op: op, L: l, R: r, T: t} }
	switch reducer {
	case "sum":
		return bin(ir.OpAdd, a, b, dt), nil
	case "prod":
		return bin(ir.OpMul, a, b, dt), nil
	case "max", "min":
		// a is read first, so that the kernel's arguments are the parts
		// in order (kernel.Build numbers them as the body reads them).
		op := ir.OpLt
		if reducer == "min" {
			op = ir.OpGt
		}
		take := bin(op, a, b, lang.Bool)
		if dt.IsFloat() {
			take = bin(ir.OpOr, take, bin(ir.OpNe, b, b, lang.Bool), lang.Bool)
		}
		return &ir.Select{C: take, A: b, B: a, T: dt}, nil
	}
	return nil, fmt.Errorf("unknown reducer %q", reducer)
}

// zeroKernel is a kernel writing zeros into the buffer of key, of dtype
// dt and shape.
func zeroKernel(label string, key any, dt lang.DType, shape []int64) (*kernel.Kernel, error) {
	out := &ir.Def{Tensor: &ir.Tensor{Name: "out", DType: dt}, Body: &ir.Const{T: dt}}
	for i, n := range shape {
		out.Tensor.Shape = append(out.Tensor.Shape, lang.Const(n))
		out.Vars = append(out.Vars, &ir.Var{Name: fmt.Sprintf("i%d", i), Extent: lang.Const(n)})
	}
	inst := &ir.Instance{Op: "zeros", Outputs: []*ir.Def{out}}
	bind := func(t *ir.Tensor) (kernel.Binding, error) {
		return kernel.Binding{}, fmt.Errorf("zeros reads no tensor, not %s", t.Name)
	}
	return kernel.Build(label, key, []kernel.Stage{{Inst: inst, Def: out, Bind: bind}})
}
