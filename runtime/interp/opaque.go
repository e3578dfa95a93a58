package interp

import (
	"encoding/binary"
	"sync"

	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/runtime/opaque"
	"tofuc/runtime/tensor"
)

// OpaqueFunc computes an opaque function's result (see opaque.Func).
type OpaqueFunc = opaque.Func

// RegisterOpaque makes fn the implementation of the opaque function name,
// replacing any earlier one (including a built-in); see opaque.Register.
func RegisterOpaque(name string, fn func(args []*tensor.Tensor) (*tensor.Tensor, error)) {
	opaque.Register(name, fn)
}

func lookupOpaque(name string) OpaqueFunc { return opaque.Lookup(name) }

// opaqueEntry is one cached result.
type opaqueEntry struct {
	once sync.Once
	t    *tensor.Tensor
	err  error
}

type opaqueView struct {
	t     *tensor.Tensor
	name  string
	fixed []iexpr // per dimension; nil for a dimension passed whole
}

func (c *compiler) opaque(e *ir.Opaque) (code, error) {
	fn := lookupOpaque(e.Fn)
	if fn == nil {
		return code{}, lang.Errorf(e.Pos, "no implementation of the opaque function %s is registered", e.Fn)
	}
	views := make([]opaqueView, len(e.Args))
	nfixed := 0
	for i, v := range e.Args {
		t, err := c.tensor(v.T, e.Pos)
		if err != nil {
			return code{}, err
		}
		views[i] = opaqueView{t: t, name: v.T.Name, fixed: make([]iexpr, len(t.Shape))}
		if len(v.Index) == 0 {
			continue
		}
		if len(v.Index) != len(t.Shape) {
			return code{}, lang.Errorf(e.Pos, "view of tensor %s of rank %d has %d index entries", v.T.Name, len(t.Shape), len(v.Index))
		}
		for d, x := range v.Index {
			if x == nil {
				continue
			}
			ix, err := c.compile(x)
			if err != nil {
				return code{}, err
			}
			views[i].fixed[d] = convert(ix, x.Type(), lang.I64, false).i
			nfixed++
		}
	}
	shape := make([]int, len(e.Shape))
	for i, d := range e.Shape {
		n, err := c.dim(d, e.Pos)
		if err != nil {
			return code{}, err
		}
		shape[i] = int(n)
	}
	if len(e.Index) != len(shape) {
		return code{}, lang.Errorf(e.Pos, "%d indices into the %d-dimensional result of %s", len(e.Index), len(shape), e.Fn)
	}
	index := make([]iexpr, len(e.Index))
	for i, x := range e.Index {
		ix, err := c.compile(x)
		if err != nil {
			return code{}, err
		}
		index[i] = convert(ix, x.Type(), lang.I64, false).i
	}
	var mu sync.Mutex
	cache := map[string]*opaqueEntry{}
	result := func(f *frame) *tensor.Tensor {
		key := make([]byte, 0, 8*nfixed)
		vals := make([][]int64, len(views))
		for i, v := range views {
			vals[i] = make([]int64, len(v.fixed))
			for d, fx := range v.fixed {
				if fx == nil {
					continue
				}
				x := fx(f)
				if x < 0 || x >= int64(v.t.Shape[d]) {
					fail(lang.Errorf(e.Pos, "%s: index %d out of range [0, %d) in dimension %d of tensor %s", e.Fn, x, v.t.Shape[d], d, v.name))
				}
				vals[i][d] = x
				key = binary.LittleEndian.AppendUint64(key, uint64(x))
			}
		}
		mu.Lock()
		ent := cache[string(key)]
		if ent == nil {
			ent = &opaqueEntry{}
			cache[string(key)] = ent
		}
		mu.Unlock()
		ent.once.Do(func() { ent.t, ent.err = callOpaque(e, fn, views, vals, shape) })
		if ent.err != nil {
			fail(ent.err)
		}
		return ent.t
	}
	read := func(f *frame) (*tensor.Tensor, int) {
		r := result(f)
		off := 0
		for d, ix := range index {
			x := ix(f)
			if x < 0 || x >= int64(shape[d]) {
				fail(lang.Errorf(e.Pos, "index %d out of range [0, %d) in dimension %d of the result of %s", x, shape[d], d, e.Fn))
			}
			off = off*shape[d] + int(x)
		}
		return r, off
	}
	var out code
	out.f = func(f *frame) float64 {
		r, off := read(f)
		return r.Flat(off)
	}
	out.i = func(f *frame) int64 {
		r, off := read(f)
		if r.DType.IsFloat() {
			return tensor.FloatToInt(e.T, r.F[off])
		}
		return e.T.WrapInt(r.I[off])
	}
	if e.T.IsFloat() {
		out.i = nil
	} else {
		out.f = nil
	}
	return out, nil
}

// callOpaque materialises the views and calls fn (opaque.Call).
func callOpaque(e *ir.Opaque, fn OpaqueFunc, views []opaqueView, vals [][]int64, shape []int) (*tensor.Tensor, error) {
	args := make([]*tensor.Tensor, len(views))
	for i, v := range views {
		args[i] = materialise(v.t, v.fixed, vals[i])
	}
	res, err := opaque.Call(e.Fn, fn, args, shape)
	if err != nil {
		return nil, lang.Errorf(e.Pos, "%v", err)
	}
	return res, nil
}

// materialise copies the view of t with the dimensions where fixed is not
// nil set to vals.
func materialise(t *tensor.Tensor, fixed []iexpr, vals []int64) *tensor.Tensor {
	var shape []int
	for d, fx := range fixed {
		if fx == nil {
			shape = append(shape, t.Shape[d])
		}
	}
	out := tensor.New(t.DType, shape)
	strides := t.Strides()
	idx := make([]int, len(t.Shape))
	for d := range fixed {
		if fixed[d] != nil {
			idx[d] = int(vals[d])
		}
	}
	n := out.Len()
	for k := 0; k < n; k++ {
		off := 0
		for d := range idx {
			off += idx[d] * strides[d]
		}
		if t.DType.IsFloat() {
			out.F[k] = t.F[off]
		} else {
			out.I[k] = t.I[off]
		}
		for d := len(idx) - 1; d >= 0; d-- { // next index of the free dims
			if fixed[d] != nil {
				continue
			}
			idx[d]++
			if idx[d] < t.Shape[d] {
				break
			}
			idx[d] = 0
		}
	}
	return out
}
