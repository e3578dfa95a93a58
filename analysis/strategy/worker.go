package strategy

import (
	"fmt"

	"tofuc/lang"
	"tofuc/lang/ir"
)

// Worker is what one of k workers computes under a strategy.
type Worker struct {
	// Inst runs on the workers' input regions (Inputs, in the order of the
	// instance's inputs) and computes the worker's part of the output
	// (SplitOutput: Part of dimension Dim) or a partial output
	// (SplitReduction). Every dimension in it is a constant.
	Inst   *ir.Instance
	Inputs []Box
	Part   Box1
	Empty  bool // the worker's part is empty: it computes nothing
}

// Box1 is a constant interval [Lo, Hi].
type Box1 struct{ Lo, Hi int64 }

// Size is the number of values in the interval.
func (b Box1) Size() int64 { return max(0, b.Hi-b.Lo+1) }

// Box is a constant region: an interval per dimension.
type Box []Box1

// Worker builds worker w of k for concrete shapes: syms binds every shape
// symbol of the instance.
func (a *Analysis) Worker(s *Strategy, syms map[string]int64, w, k int) (*Worker, error) {
	extent, err := s.Var.Extent.Eval(syms)
	if err != nil {
		return nil, err
	}
	lo, hi := Part(extent, w, k)
	loSym, hiSym := s.PartSymbols()
	bind := func(name string) (lang.Dim, bool) {
		switch name {
		case loSym:
			return lang.Const(lo), true
		case hiSym:
			return lang.Const(hi), true
		}
		n, ok := syms[name]
		return lang.Const(n), ok
	}
	out := &Worker{Part: Box1{lo, hi}, Empty: hi < lo}
	for _, r := range s.Regions {
		box, err := evalRegion(r, bind)
		if err != nil {
			return nil, err
		}
		out.Inputs = append(out.Inputs, box)
	}
	if out.Empty {
		return out, nil
	}
	out.Inst, err = buildWorker(a.Inst, s, bind)
	return out, err
}

func evalRegion(r Region, bind func(string) (lang.Dim, bool)) (Box, error) {
	box := make(Box, len(r.Dims))
	for d, iv := range r.Dims {
		c := iv.Subst(bind)
		lo, ok1 := c.Lo.IsConst()
		hi, ok2 := c.Hi.IsConst()
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("region %s of %s has unbound symbols", iv, r.Tensor.Name)
		}
		box[d] = Box1{lo, max(hi, lo-1)}
	}
	return box, nil
}

// rebuild carries the state of buildWorker.
type rebuild struct {
	bind    func(string) (lang.Dim, bool)
	tensors map[*ir.Tensor]*ir.Tensor
	offsets map[*ir.Tensor][]lang.Dim // region starts, subtracted from indices
	vars    map[*ir.Var]*ir.Var
	shift   map[*ir.Var]lang.Dim // part starts, added to variables
}

func (b *rebuild) dim(d lang.Dim) lang.Dim {
	if b.bind == nil {
		return d
	}
	return d.Subst(b.bind)
}

// buildWorker rewrites the instance for one worker: inputs and locals
// become their regions (indices shifted by the regions' starts), split
// variables range over the part (shifted by its start). With bind nil the
// result stays symbolic in the part symbols (for the work estimate).
func buildWorker(inst *ir.Instance, s *Strategy, bind func(string) (lang.Dim, bool)) (*ir.Instance, error) {
	b := &rebuild{bind: bind, tensors: map[*ir.Tensor]*ir.Tensor{}, offsets: map[*ir.Tensor][]lang.Dim{},
		vars: map[*ir.Var]*ir.Var{}, shift: map[*ir.Var]lang.Dim{}}
	w := &ir.Instance{Op: inst.Op, Pos: inst.Pos, Attrs: inst.Attrs}
	for i, in := range inst.Inputs {
		w.Inputs = append(w.Inputs, b.region(in, s.Regions[i]))
	}
	for v, part := range s.splits {
		b.vars[v] = &ir.Var{Name: v.Name, Extent: b.dim(part.Size())}
		b.shift[v] = b.dim(part.Lo)
	}
	for _, d := range inst.Locals {
		r, ok := s.locals[d.Tensor]
		if !ok {
			continue // not needed by this worker
		}
		t := b.region(d.Tensor, r)
		for j, v := range d.Vars {
			b.vars[v] = &ir.Var{Name: v.Name, Extent: t.Shape[j]}
			b.shift[v] = b.offsets[d.Tensor][j]
		}
		w.Locals = append(w.Locals, b.def(d, t))
	}
	for _, d := range inst.Outputs {
		t := &ir.Tensor{Name: d.Tensor.Name, DType: d.Tensor.DType}
		for _, v := range d.Vars {
			nv := b.variable(v)
			t.Shape = append(t.Shape, nv.Extent)
		}
		w.Outputs = append(w.Outputs, b.def(d, t))
	}
	return w, nil
}

// region makes the tensor that holds r, remembering where it starts.
func (b *rebuild) region(t *ir.Tensor, r Region) *ir.Tensor {
	nt := &ir.Tensor{Name: t.Name, DType: t.DType}
	for _, iv := range r.Dims {
		size := b.dim(iv.Size()).Max(lang.Const(0))
		nt.Shape = append(nt.Shape, size)
		b.offsets[t] = append(b.offsets[t], b.dim(iv.Lo))
	}
	b.tensors[t] = nt
	return nt
}

// variable maps a variable of the instance to the worker's.
func (b *rebuild) variable(v *ir.Var) *ir.Var {
	if nv, ok := b.vars[v]; ok {
		return nv
	}
	nv := &ir.Var{Name: v.Name, Extent: b.dim(v.Extent)}
	b.vars[v] = nv
	return nv
}

func (b *rebuild) def(d *ir.Def, t *ir.Tensor) *ir.Def {
	nd := &ir.Def{Pos: d.Pos, Tensor: t}
	for _, v := range d.Vars {
		nd.Vars = append(nd.Vars, b.variable(v))
	}
	nd.Body = ir.Map(d.Body, b.expr)
	return nd
}

// expr rewrites one node whose children are already rewritten.
func (b *rebuild) expr(e ir.Expr) ir.Expr {
	switch x := e.(type) {
	case *ir.VarRef:
		nv := b.variable(x.V)
		ref := ir.Expr(&ir.VarRef{V: nv})
		if off, ok := b.shift[x.V]; ok {
			ref = ir.IndexAdd(ref, ir.IndexDim(off))
		}
		return ref
	case *ir.Size:
		return ir.IndexDim(b.dim(x.D))
	case *ir.Reduce:
		vars := make([]*ir.Var, len(x.Vars))
		for i, v := range x.Vars {
			vars[i] = b.variable(v)
		}
		x.Vars = vars
	case *ir.Access:
		x.Index = b.shifted(x.T, x.Index)
		x.T = b.tensors[x.T]
	case *ir.Opaque:
		for _, v := range x.Args {
			v.Index = b.shifted(v.T, v.Index)
			v.T = b.tensors[v.T]
		}
		shape := make([]lang.Dim, len(x.Shape))
		for i, d := range x.Shape {
			shape[i] = b.dim(d)
		}
		x.Shape = shape
	}
	return e
}

// shifted subtracts the region's start from each index into t.
func (b *rebuild) shifted(t *ir.Tensor, index []ir.Expr) []ir.Expr {
	out := make([]ir.Expr, len(index))
	for d, idx := range index {
		out[d] = idx
		if idx == nil {
			continue
		}
		if off := b.offsets[t][d]; !isZero(off) {
			out[d] = ir.IndexAdd(idx, ir.IndexMul(ir.IndexDim(off), -1))
		}
	}
	return out
}

func isZero(d lang.Dim) bool { n, ok := d.IsConst(); return ok && n == 0 }
