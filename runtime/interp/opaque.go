package interp

import (
	"encoding/binary"
	"fmt"
	"math"
	"runtime/debug"
	"sync"

	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/runtime/tensor"
)

// OpaqueFunc computes an opaque function's result from its argument views.
// It must not modify its arguments and must be safe to call concurrently.
type OpaqueFunc func(args []*tensor.Tensor) (*tensor.Tensor, error)

var (
	opaqueMu    sync.RWMutex
	opaqueFuncs = map[string]OpaqueFunc{
		"cholesky": cholesky,
		"inverse":  inverse,
	}
)

// RegisterOpaque makes fn the implementation of the opaque function name,
// replacing any earlier one (including a built-in).
func RegisterOpaque(name string, fn func(args []*tensor.Tensor) (*tensor.Tensor, error)) {
	opaqueMu.Lock()
	defer opaqueMu.Unlock()
	opaqueFuncs[name] = fn
}

func lookupOpaque(name string) OpaqueFunc {
	opaqueMu.RLock()
	defer opaqueMu.RUnlock()
	return opaqueFuncs[name]
}

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

// callOpaque materialises the views, calls fn and checks its result.
func callOpaque(e *ir.Opaque, fn OpaqueFunc, views []opaqueView, vals [][]int64, shape []int) (res *tensor.Tensor, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = lang.Errorf(e.Pos, "opaque function %s panicked: %v\n%s", e.Fn, r, debug.Stack())
		}
	}()
	args := make([]*tensor.Tensor, len(views))
	for i, v := range views {
		args[i] = materialise(v.t, v.fixed, vals[i])
	}
	res, err = fn(args)
	if err != nil {
		return nil, lang.Errorf(e.Pos, "%s: %v", e.Fn, err)
	}
	if res == nil {
		return nil, lang.Errorf(e.Pos, "%s returned no tensor", e.Fn)
	}
	ok := len(res.Shape) == len(shape)
	for i := 0; ok && i < len(shape); i++ {
		ok = res.Shape[i] == shape[i]
	}
	if !ok {
		return nil, lang.Errorf(e.Pos, "%s returned a tensor of shape %v, want %v", e.Fn, res.Shape, shape)
	}
	n := tensor.NumElements(shape)
	if res.DType.Size() == 0 || res.DType.IsFloat() && len(res.F) != n || !res.DType.IsFloat() && len(res.I) != n {
		return nil, lang.Errorf(e.Pos, "%s returned a malformed %s tensor", e.Fn, res.DType)
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

// matrix returns the single square rank-2 argument as float64 rows.
func matrix(name string, args []*tensor.Tensor) (int, []float64, error) {
	if len(args) != 1 {
		return 0, nil, fmt.Errorf("%s takes one matrix, got %d arguments", name, len(args))
	}
	a := args[0]
	if len(a.Shape) != 2 || a.Shape[0] != a.Shape[1] {
		return 0, nil, fmt.Errorf("%s needs a square matrix, got shape %v", name, a.Shape)
	}
	m := make([]float64, a.Len())
	for i := range m {
		m[i] = a.Flat(i)
	}
	return a.Shape[0], m, nil
}

// cholesky returns the lower-triangular L with A = L·Lᵀ, reading the lower
// triangle of A.
func cholesky(args []*tensor.Tensor) (*tensor.Tensor, error) {
	n, a, err := matrix("cholesky", args)
	if err != nil {
		return nil, err
	}
	l := tensor.New(lang.F64, []int{n, n})
	L := l.F
	for j := 0; j < n; j++ {
		s := a[j*n+j]
		for k := 0; k < j; k++ {
			s -= L[j*n+k] * L[j*n+k]
		}
		if !(s > 0) || math.IsInf(s, 0) {
			return nil, fmt.Errorf("matrix is not positive definite (pivot %d is %g)", j, s)
		}
		d := math.Sqrt(s)
		L[j*n+j] = d
		for i := j + 1; i < n; i++ {
			s := a[i*n+j]
			for k := 0; k < j; k++ {
				s -= L[i*n+k] * L[j*n+k]
			}
			L[i*n+j] = s / d
		}
	}
	return l, nil
}

// inverse inverts a square matrix by Gauss-Jordan elimination with partial
// pivoting.
func inverse(args []*tensor.Tensor) (*tensor.Tensor, error) {
	n, a, err := matrix("inverse", args)
	if err != nil {
		return nil, err
	}
	inv := tensor.New(lang.F64, []int{n, n})
	b := inv.F
	for i := 0; i < n; i++ {
		b[i*n+i] = 1
	}
	for col := 0; col < n; col++ {
		p := col
		for r := col + 1; r < n; r++ {
			if math.Abs(a[r*n+col]) > math.Abs(a[p*n+col]) {
				p = r
			}
		}
		pv := a[p*n+col]
		if pv == 0 || math.IsNaN(pv) {
			return nil, fmt.Errorf("matrix is singular (no pivot in column %d)", col)
		}
		if p != col {
			for k := 0; k < n; k++ {
				a[p*n+k], a[col*n+k] = a[col*n+k], a[p*n+k]
				b[p*n+k], b[col*n+k] = b[col*n+k], b[p*n+k]
			}
		}
		for k := 0; k < n; k++ {
			a[col*n+k] /= pv
			b[col*n+k] /= pv
		}
		for r := 0; r < n; r++ {
			if r == col {
				continue
			}
			m := a[r*n+col]
			if m == 0 {
				continue
			}
			for k := 0; k < n; k++ {
				a[r*n+k] -= m * a[col*n+k]
				b[r*n+k] -= m * b[col*n+k]
			}
		}
	}
	return inv, nil
}
