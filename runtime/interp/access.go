package interp

import (
	"tofuc/lang"
	"tofuc/lang/ir"
)

// affine is an index expression c + Σ coefs[k]·var[slots[k]].
type affine struct {
	c     int64
	slots []int
	coefs []int64
}

// affine recognises an i64 index expression made of VarRef, integer Const,
// Size, +, -, unary - and * by a constant.
func (c *compiler) affine(e ir.Expr) (affine, bool) {
	switch e := e.(type) {
	case *ir.Const:
		if e.T.IsFloat() {
			return affine{}, false
		}
		return affine{c: e.T.WrapInt(e.Int)}, true
	case *ir.Size:
		n, err := c.dim(e.D, lang.Pos{})
		if err != nil {
			return affine{}, false
		}
		return affine{c: n}, true
	case *ir.VarRef:
		s, ok := c.slots[e.V]
		if !ok || !c.inScope[s] {
			return affine{}, false
		}
		return affine{slots: []int{s}, coefs: []int64{1}}, true
	case *ir.Unary:
		if e.Op != "-" || e.T != lang.I64 {
			return affine{}, false
		}
		x, ok := c.affine(e.X)
		if !ok {
			return affine{}, false
		}
		return x.scale(-1), true
	case *ir.Binary:
		if e.T != lang.I64 || e.L.Type().IsFloat() || e.R.Type().IsFloat() {
			return affine{}, false
		}
		l, ok := c.affine(e.L)
		if !ok {
			return affine{}, false
		}
		r, ok := c.affine(e.R)
		if !ok {
			return affine{}, false
		}
		switch e.Op {
		case ir.OpAdd:
			return l.add(r), true
		case ir.OpSub:
			return l.add(r.scale(-1)), true
		case ir.OpMul:
			if len(l.slots) == 0 {
				return r.scale(l.c), true
			}
			if len(r.slots) == 0 {
				return l.scale(r.c), true
			}
		}
	}
	return affine{}, false
}

func (a affine) scale(k int64) affine {
	out := affine{c: a.c * k}
	for i, s := range a.slots {
		out = out.add(affine{slots: []int{s}, coefs: []int64{a.coefs[i] * k}})
	}
	return out
}

// add returns a + b with the terms of equal slots merged and zero terms
// dropped.
func (a affine) add(b affine) affine {
	out := affine{c: a.c + b.c}
	for _, x := range []affine{a, b} {
	terms:
		for i, s := range x.slots {
			for j, t := range out.slots {
				if t == s {
					out.coefs[j] += x.coefs[i]
					continue terms
				}
			}
			out.slots = append(out.slots, s)
			out.coefs = append(out.coefs, x.coefs[i])
		}
	}
	k := 0
	for i := range out.slots {
		if out.coefs[i] != 0 {
			out.slots[k], out.coefs[k] = out.slots[i], out.coefs[i]
			k++
		}
	}
	out.slots, out.coefs = out.slots[:k], out.coefs[:k]
	return out
}

// bounds returns the smallest and largest value of a over the variables'
// ranges; ok is false when a variable has an empty range.
func (a affine) bounds(ext []int64) (lo, hi int64, ok bool) {
	lo, hi = a.c, a.c
	for i, s := range a.slots {
		if ext[s] <= 0 {
			return 0, 0, false
		}
		v := a.coefs[i] * (ext[s] - 1)
		if v < 0 {
			lo += v
		} else {
			hi += v
		}
	}
	return lo, hi, true
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
	flat := affine{}
	var checked []checkedDim
	for d, x := range e.Index {
		st := int64(strides[d])
		ext := int64(t.Shape[d])
		if a, ok := c.affine(x); ok {
			if lo, hi, ok := a.bounds(c.ext); ok && lo >= 0 && hi < ext {
				flat = flat.add(a.scale(st))
				continue
			}
			checked = append(checked, checkedDim{index: a.eval(), extent: ext, stride: st, dim: d})
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
