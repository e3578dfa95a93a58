package strategy

import (
	"cmp"
	"fmt"
	"slices"

	"tofuc/lang"
	"tofuc/lang/ir"
)

// Worker is what one of k workers computes under a strategy.
type Worker struct {
	// Inst runs on the workers' input regions (Inputs, in the order of the
	// instance's inputs, each packed: the bands of a dimension one after
	// the other) and computes the worker's part of the outputs
	// (SplitOutput: Part of dimension Dims[o] of output o) or partial
	// outputs (SplitReduction). Every dimension in it is a constant.
	Inst   *ir.Instance
	Inputs []Bands
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
// symbol of the instance (nil when the instance is concrete).
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
	for i, r := range s.Regions {
		shape, err := constShape(a.Inst.Inputs[i].Shape, bind)
		if err != nil {
			return nil, err
		}
		bands, err := r.Concrete(bind, shape)
		if err != nil {
			return nil, err
		}
		out.Inputs = append(out.Inputs, bands)
	}
	if out.Empty {
		return out, nil
	}
	out.Inst, err = buildWorker(a.Inst, s, bind, out.Inputs)
	return out, err
}

func constShape(shape []lang.Dim, bind func(string) (lang.Dim, bool)) ([]int64, error) {
	out := make([]int64, len(shape))
	for d, dim := range shape {
		n, ok := dim.Subst(bind).IsConst()
		if !ok {
			return nil, fmt.Errorf("shape %s has unbound symbols", lang.ShapeString(shape))
		}
		out[d] = n
	}
	return out, nil
}

// rebuild carries the state of buildWorker.
type rebuild struct {
	bind    func(string) (lang.Dim, bool)
	tensors map[*ir.Tensor]*ir.Tensor
	layouts map[*ir.Tensor]Bands // where each region's bands start, for packing indices
	vars    map[*ir.Var]*ir.Var
	// global maps a worker variable to the expression of the index value
	// it stands for in the whole instance (a part's start added, a packed
	// position unpacked).
	global map[*ir.Var]func(ir.Expr) ir.Expr
}

func (b *rebuild) dim(d lang.Dim) lang.Dim { return d.Subst(b.bind) }

// buildWorker rewrites the instance for one worker: inputs and locals
// become their regions, bands packed (indices mapped into the packing),
// split variables range over the part (shifted by its start).
func buildWorker(inst *ir.Instance, s *Strategy, bind func(string) (lang.Dim, bool), inputs []Bands) (*ir.Instance, error) {
	b := &rebuild{bind: bind, tensors: map[*ir.Tensor]*ir.Tensor{}, layouts: map[*ir.Tensor]Bands{},
		vars: map[*ir.Var]*ir.Var{}, global: map[*ir.Var]func(ir.Expr) ir.Expr{}}
	w := &ir.Instance{Op: inst.Op, Pos: inst.Pos, Attrs: inst.Attrs}
	for i, in := range inst.Inputs {
		w.Inputs = append(w.Inputs, b.region(in, inputs[i]))
	}
	for v, part := range s.splits {
		b.vars[v] = &ir.Var{Name: v.Name, Extent: b.dim(part.Size())}
		start := b.dim(part.Lo)
		b.global[v] = func(x ir.Expr) ir.Expr { return ir.IndexAdd(x, ir.IndexDim(start)) }
	}
	for _, d := range inst.Locals {
		r, ok := s.locals[d.Tensor]
		if !ok {
			continue // not needed by this worker
		}
		shape, err := constShape(d.Tensor.Shape, bind)
		if err != nil {
			return nil, err
		}
		bands, err := r.Concrete(bind, shape)
		if err != nil {
			return nil, err
		}
		t := b.region(d.Tensor, bands)
		for j, v := range d.Vars {
			b.vars[v] = &ir.Var{Name: v.Name, Extent: t.Shape[j]}
			b.global[v] = unpacker(bands[j])
		}
		w.Locals = append(w.Locals, b.def(d, t))
	}
	for _, d := range inst.Outputs {
		t := &ir.Tensor{Name: d.Tensor.Name, DType: d.Tensor.DType}
		for _, v := range d.Vars {
			t.Shape = append(t.Shape, b.variable(v).Extent)
		}
		w.Outputs = append(w.Outputs, b.def(d, t))
	}
	return w, nil
}

// region makes the tensor that holds the packed bands of t.
func (b *rebuild) region(t *ir.Tensor, bands Bands) *ir.Tensor {
	nt := &ir.Tensor{Name: t.Name, DType: t.DType}
	for _, n := range bands.Shape() {
		nt.Shape = append(nt.Shape, lang.Const(n))
	}
	b.tensors[t] = nt
	b.layouts[t] = bands
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
		ref := ir.Expr(&ir.VarRef{V: b.variable(x.V)})
		if g, ok := b.global[x.V]; ok {
			ref = g(ref)
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
		x.Index = b.packed(x.T, x.Index)
		x.T = b.tensors[x.T]
	case *ir.Opaque:
		for _, v := range x.Args {
			v.Index = b.packed(v.T, v.Index)
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

// packed maps each index into t to its position in the packed region.
func (b *rebuild) packed(t *ir.Tensor, index []ir.Expr) []ir.Expr {
	out := make([]ir.Expr, len(index))
	for d, idx := range index {
		out[d] = idx
		if idx != nil {
			out[d] = pack(b.layouts[t][d], idx)
		}
	}
	return out
}

// pack maps an index value inside the bands to its packed position: the
// start subtracted for one band; for bands of one width L at one stride S
// from lo (lstm_cell's gate blocks), ((g - lo) / S)·L + (g - lo) % S,
// which the interval analysis bounds band by band; otherwise a selection
// by band.
func pack(bands []Box1, g ir.Expr) ir.Expr {
	rel := ir.IndexAdd(g, ir.IndexConst(-bands[0].Lo))
	if len(bands) == 1 {
		return rel
	}
	if width, stride, ok := uniform(bands); ok {
		q := ir.IndexMul(ir.IndexBin(ir.OpDiv, rel, ir.IndexConst(stride)), width)
		return ir.IndexAdd(q, ir.IndexBin(ir.OpMod, rel, ir.IndexConst(stride)))
	}
	at := starts(bands)
	last := len(bands) - 1
	out := ir.IndexAdd(g, ir.IndexConst(at[last]-bands[last].Lo))
	for i := last - 1; i >= 0; i-- {
		in := &ir.Binary{Op: ir.OpLe, L: g, R: ir.IndexConst(bands[i].Hi), T: lang.Bool}
		out = &ir.Select{C: in, A: ir.IndexAdd(g, ir.IndexConst(at[i]-bands[i].Lo)), B: out, T: lang.I64}
	}
	return out
}

// unpacker maps a packed position to the index value it holds: the
// inverse of pack.
func unpacker(bands []Box1) func(ir.Expr) ir.Expr {
	return func(p ir.Expr) ir.Expr {
		if len(bands) == 1 {
			return ir.IndexAdd(p, ir.IndexConst(bands[0].Lo))
		}
		if width, stride, ok := uniform(bands); ok {
			q := ir.IndexMul(ir.IndexBin(ir.OpDiv, p, ir.IndexConst(width)), stride)
			r := ir.IndexBin(ir.OpMod, p, ir.IndexConst(width))
			return ir.IndexAdd(ir.IndexAdd(q, r), ir.IndexConst(bands[0].Lo))
		}
		at := starts(bands)
		last := len(bands) - 1
		out := ir.IndexAdd(p, ir.IndexConst(bands[last].Lo-at[last]))
		for i := last - 1; i >= 0; i-- {
			in := &ir.Binary{Op: ir.OpLt, L: p, R: ir.IndexConst(at[i+1]), T: lang.Bool}
			out = &ir.Select{C: in, A: ir.IndexAdd(p, ir.IndexConst(bands[i].Lo-at[i])), B: out, T: lang.I64}
		}
		return out
	}
}

// uniform reports whether the bands have one width at one stride.
func uniform(bands []Box1) (width, stride int64, ok bool) {
	width, stride = bands[0].Size(), bands[1].Lo-bands[0].Lo
	for i, b := range bands {
		if b.Size() != width || b.Lo != bands[0].Lo+int64(i)*stride {
			return 0, 0, false
		}
	}
	return width, stride, true
}

// starts is each band's position in the packing.
func starts(bands []Box1) []int64 {
	at := make([]int64, len(bands))
	for i := 1; i < len(bands); i++ {
		at[i] = at[i-1] + bands[i-1].Size()
	}
	return at
}

// Bands is a concrete region: per dimension, intervals in increasing
// order, neither overlapping nor adjacent (at least one, possibly one
// empty interval for a dimension read nowhere). A worker's input holds
// them packed.
type Bands [][]Box1

// Shape is the packed shape: per dimension, the bands' total size.
func (b Bands) Shape() []int64 {
	out := make([]int64, len(b))
	for d, bs := range b {
		for _, x := range bs {
			out[d] += x.Size()
		}
	}
	return out
}

// Size is the number of elements.
func (b Bands) Size() int64 {
	n := int64(1)
	for _, s := range b.Shape() {
		n *= s
	}
	return n
}

// Hull is the smallest box holding every band.
func (b Bands) Hull() Box {
	out := make(Box, len(b))
	for d, bs := range b {
		out[d] = Box1{Lo: bs[0].Lo, Hi: max(bs[len(bs)-1].Hi, bs[0].Lo-1)}
	}
	return out
}

// Placed is one box of a banded region with its position in the packing.
type Placed struct {
	Box Box
	At  []int64
}

// Boxes lists the region's boxes (one band per dimension, every
// combination), each with where it lies in the packing; empty boxes are
// left out.
func (b Bands) Boxes() []Placed {
	out := []Placed{{}}
	for _, bs := range b {
		at := starts(bs)
		var next []Placed
		for _, p := range out {
			for i, x := range bs {
				next = append(next, Placed{Box: append(slices.Clone(p.Box), x), At: append(slices.Clone(p.At), at[i])})
			}
		}
		out = next
	}
	kept := out[:0]
	for _, p := range out {
		if p.Box.Size() > 0 {
			kept = append(kept, p)
		}
	}
	return kept
}

// WholeBands is every element of shape, one band per dimension.
func WholeBands(shape []int64) Bands {
	out := make(Bands, len(shape))
	for d, n := range shape {
		out[d] = []Box1{{Lo: 0, Hi: n - 1}}
	}
	return out
}

// Concrete evaluates the region's bands with bind, clipped to shape, in
// order, overlapping or adjacent bands merged.
func (r Region) Concrete(bind func(string) (lang.Dim, bool), shape []int64) (Bands, error) {
	out := make(Bands, len(r.Bands))
	for d, set := range r.Bands {
		var bs []Box1
		for _, iv := range set {
			c := iv.Subst(bind)
			lo, ok1 := c.Lo.IsConst()
			hi, ok2 := c.Hi.IsConst()
			if !ok1 || !ok2 {
				return nil, fmt.Errorf("region %s of %s has unbound symbols", iv, r.Tensor.Name)
			}
			bs = append(bs, Box1{Lo: max(lo, 0), Hi: min(hi, shape[d]-1)})
		}
		out[d] = Normalise(bs)
	}
	return out, nil
}

// Normalise sorts intervals and merges the overlapping and adjacent ones,
// dropping empty ones; when all are empty it keeps one empty interval at
// the first's start.
func Normalise(bs []Box1) []Box1 {
	var kept []Box1
	for _, b := range bs {
		if b.Size() > 0 {
			kept = append(kept, b)
		}
	}
	if len(kept) == 0 {
		return []Box1{{Lo: bs[0].Lo, Hi: bs[0].Lo - 1}}
	}
	slices.SortFunc(kept, func(a, b Box1) int { return cmp.Compare(a.Lo, b.Lo) })
	out := kept[:1]
	for _, b := range kept[1:] {
		if last := &out[len(out)-1]; b.Lo <= last.Hi+1 {
			last.Hi = max(last.Hi, b.Hi)
		} else {
			out = append(out, b)
		}
	}
	return out
}
