package interp

import (
	"tofuc/lang"
	"tofuc/lang/ir"
)

// affine is an index expression c + Σ coefs[k]·var[slots[k]]: an
// ir.Affine (the one affine-index analysis, lang/ir) with its shape
// symbols evaluated and its variables mapped to frame slots.
type affine struct {
	c     int64
	slots []int
	coefs []int64
}

// affineOf recognises an affine index expression (ir.AffineOf) whose
// variables are in scope and whose constant is known.
func (c *compiler) affineOf(e ir.Expr) (ir.Affine, bool) {
	a, ok := ir.AffineOf(e, c.syms)
	if !ok {
		return ir.Affine{}, false
	}
	if _, ok := a.Const.IsConst(); !ok {
		return ir.Affine{}, false
	}
	for _, t := range a.Terms {
		if s, ok := c.slots[t.Var]; !ok || !c.inScope[s] {
			return ir.Affine{}, false
		}
	}
	return a, true
}

// affine is affineOf in slot form.
func (c *compiler) affine(e ir.Expr) (affine, bool) {
	a, ok := c.affineOf(e)
	if !ok {
		return affine{}, false
	}
	return c.slotted(a), true
}

// slotted maps an affine expression from affineOf (or a sum of them) to
// slots.
func (c *compiler) slotted(a ir.Affine) affine {
	k, _ := a.Const.IsConst()
	out := affine{c: k}
	for _, t := range a.Terms {
		out.slots = append(out.slots, c.slots[t.Var])
		out.coefs = append(out.coefs, t.Coef)
	}
	return out
}

// inRange reports whether a stays in [0, n) over its variables' extents.
func (c *compiler) inRange(a ir.Affine, n int64) bool {
	lo, hi, ok := a.Bounds(func(v *ir.Var) (int64, bool) { return c.ext[c.slots[v]], true })
	return ok && lo >= 0 && hi < n
}

func (a affine) eval() iexpr {
	c := a.c
	switch len(a.slots) {
	case 0:
		return func(*frame) int64 { return c }
	case 1:
		s0, c0 := a.slots[0], a.coefs[0]
		if c0 == 1 {
			return func(f *frame) int64 { return c + f.v[s0] }
		}
		return func(f *frame) int64 { return c + c0*f.v[s0] }
	case 2:
		s0, c0, s1, c1 := a.slots[0], a.coefs[0], a.slots[1], a.coefs[1]
		return func(f *frame) int64 { return c + c0*f.v[s0] + c1*f.v[s1] }
	case 3:
		s0, c0, s1, c1, s2, c2 := a.slots[0], a.coefs[0], a.slots[1], a.coefs[1], a.slots[2], a.coefs[2]
		return func(f *frame) int64 { return c + c0*f.v[s0] + c1*f.v[s1] + c2*f.v[s2] }
	case 4:
		s0, c0, s1, c1, s2, c2, s3, c3 := a.slots[0], a.coefs[0], a.slots[1], a.coefs[1], a.slots[2], a.coefs[2], a.slots[3], a.coefs[3]
		return func(f *frame) int64 { return c + c0*f.v[s0] + c1*f.v[s1] + c2*f.v[s2] + c3*f.v[s3] }
	}
	slots, coefs := a.slots, a.coefs
	return func(f *frame) int64 {
		v := c
		for i, s := range slots {
			v += coefs[i] * f.v[s]
		}
		return v
	}
}

// checkedDim is a dimension of an access whose index may fall out of range.
type checkedDim struct {
	index  iexpr
	extent int64
	stride int64
	dim    int
}

// outOfRange builds the error of an access without a default.
func outOfRange(e *ir.Access, shape []int, d checkedDim, idx int64) error {
	return lang.Errorf(e.Pos, "index %d out of range [0, %d) in dimension %d of tensor %s (shape %v)", idx, d.extent, d.dim, e.T.Name, shape)
}

func (c *compiler) access(e *ir.Access) (code, error) {
	t, err := c.tensor(e.T, e.Pos)
	if err != nil {
		return code{}, err
	}
	if len(e.Index) != len(t.Shape) {
		return code{}, lang.Errorf(e.Pos, "%d indices for tensor %s of rank %d", len(e.Index), e.T.Name, len(t.Shape))
	}
	if t.DType != e.T.DType {
		return code{}, lang.Errorf(e.Pos, "tensor %s is %s, the access expects %s", e.T.Name, t.DType, e.T.DType)
	}
	strides := t.Strides()
	folded := ir.Affine{Const: lang.Const(0)}
	var checked []checkedDim
	for d, x := range e.Index {
		st := int64(strides[d])
		ext := int64(t.Shape[d])
		if a, ok := c.affineOf(x); ok {
			if c.inRange(a, ext) {
				folded = folded.Add(a.Scale(st))
				continue
			}
			checked = append(checked, checkedDim{index: c.slotted(a).eval(), extent: ext, stride: st, dim: d})
			continue
		}
		ix, err := c.compile(x)
		if err != nil {
			return code{}, err
		}
		checked = append(checked, checkedDim{index: convert(ix, x.Type(), lang.I64, false).i, extent: ext, stride: st, dim: d})
	}
	var def code
	if e.Default != nil {
		def, err = c.compileTo(e.Default, t.DType)
		if err != nil {
			return code{}, err
		}
	}
	flat := c.slotted(folded)
	shape := t.Shape
	oob := func(d checkedDim, idx int64) error { return outOfRange(e, shape, d, idx) }
	if t.DType.IsFloat() {
		return code{f: load(t.F, flat, checked, def.f, oob)}, nil
	}
	return code{i: load(t.I, flat, checked, def.i, oob)}, nil
}

// load builds the closure reading data at the offset given by flat plus the
// checked dimensions.
func load[T float64 | int64](data []T, flat affine, checked []checkedDim, def func(*frame) T, oob func(checkedDim, int64) error) func(*frame) T {
	if len(checked) == 0 {
		b := flat.c
		switch len(flat.slots) {
		case 0:
			return func(*frame) T { return data[b] }
		case 1:
			s0, c0 := flat.slots[0], flat.coefs[0]
			return func(f *frame) T { return data[b+c0*f.v[s0]] }
		case 2:
			s0, c0, s1, c1 := flat.slots[0], flat.coefs[0], flat.slots[1], flat.coefs[1]
			return func(f *frame) T { return data[b+c0*f.v[s0]+c1*f.v[s1]] }
		case 3:
			s0, c0, s1, c1, s2, c2 := flat.slots[0], flat.coefs[0], flat.slots[1], flat.coefs[1], flat.slots[2], flat.coefs[2]
			return func(f *frame) T { return data[b+c0*f.v[s0]+c1*f.v[s1]+c2*f.v[s2]] }
		case 4:
			s0, c0, s1, c1, s2, c2, s3, c3 := flat.slots[0], flat.coefs[0], flat.slots[1], flat.coefs[1], flat.slots[2], flat.coefs[2], flat.slots[3], flat.coefs[3]
			return func(f *frame) T { return data[b+c0*f.v[s0]+c1*f.v[s1]+c2*f.v[s2]+c3*f.v[s3]] }
		}
		off := flat.eval()
		return func(f *frame) T { return data[off(f)] }
	}
	off := flat.eval()
	if len(checked) == 1 {
		d := checked[0]
		return func(f *frame) T {
			i := d.index(f)
			if i < 0 || i >= d.extent {
				if def == nil {
					fail(oob(d, i))
				}
				return def(f)
			}
			return data[off(f)+i*d.stride]
		}
	}
	return func(f *frame) T {
		o := off(f)
		for _, d := range checked {
			i := d.index(f)
			if i < 0 || i >= d.extent {
				if def == nil {
					fail(oob(d, i))
				}
				return def(f)
			}
			o += i * d.stride
		}
		return data[o]
	}
}
