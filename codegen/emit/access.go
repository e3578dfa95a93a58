package emit

import (
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"tofuc/codegen/kernel"
	"tofuc/lang"
	tir "tofuc/lang/ir"
)

// access lowers a read: a folded constant, a stage's value, a recomputed
// local, or an element of an argument buffer. Dimensions that may leave
// the tensor are checked; out of range the access yields its default, or
// records an error and yields zero.
func (f *fn) access(a *tir.Access) value.Value {
	src, ok := f.k.Source(a.T)
	if !ok {
		fail("tensor %s is not bound", a.T.Name)
	}
	switch {
	case src.Const != nil && src.Const.T.IsFloat():
		// A folded constant tensor holds its dtype's values, as the
		// interpreter stores them: 1e39 in an f32 tensor is +inf.
		return f.float(a.T.DType.RoundFloat(src.Const.Float), src.Const.T)
	case src.Const != nil:
		return f.expr(src.Const)
	case src.Stage >= 0:
		return f.stages[src.Stage]
	}
	idx := make([]value.Value, len(a.Index))
	for d, x := range a.Index {
		idx[d] = f.exprTo(x, lang.I64)
	}
	var shape []int64
	if src.Local != nil {
		shape = make([]int64, len(src.Local.Vars))
		for i, v := range src.Local.Vars {
			shape[i] = extent(v)
		}
	} else {
		shape = f.k.Args[src.Arg].Shape
	}
	read := func() value.Value {
		if src.Local != nil {
			return f.recompute(src.Local, idx)
		}
		return f.load(f.bufs[src.Arg], f.flatOffset(a.Index, idx, shape), a.T.DType)
	}
	if f.unchecked[a] {
		return read()
	}
	checked, site := f.k.Checked(a)
	dimsIn := f.dimsInRange(checked, idx, shape)
	inRange := f.all(dimsIn)
	if inRange == nil {
		return read()
	}
	if f.selectable(a, src, shape) {
		// Branch-free, so that the loop around it can be vectorised: the
		// element at the index with each checked dimension that is out of
		// range moved to 0 (in range, the tensor being nonempty), then
		// the read's default where the index is out of range.
		for d, ok := range dimsIn {
			if ok != nil {
				idx[d] = f.b.NewSelect(ok, idx[d], i64(0))
			}
		}
		return f.b.NewSelect(inRange, read(), f.exprTo(a.Default, a.T.DType))
	}
	return f.branch(inRange, read, func() value.Value {
		if a.Default != nil {
			return f.exprTo(a.Default, a.T.DType)
		}
		f.reportOutOfRange(site, checked, idx, shape)
		return f.zero(a.T.DType)
	})
}

// selectable reports whether a checked read is lowered without a branch
// (host flavour): it has a constant default and reads a nonempty buffer.
func (f *fn) selectable(a *tir.Access, src kernel.Source, shape []int64) bool {
	if f.m.Flavour != Host || src.Local != nil {
		return false
	}
	if _, isConst := a.Default.(*tir.Const); !isConst {
		return false
	}
	for _, n := range shape {
		if n <= 0 {
			return false
		}
	}
	return true
}

// inRange is whether the checked dimensions of idx lie in shape, or nil
// when none is checked.
func (f *fn) inRange(checked []bool, idx []value.Value, shape []int64) value.Value {
	return f.all(f.dimsInRange(checked, idx, shape))
}

// all is the conjunction of the conditions that are not nil (nil when
// all are).
func (f *fn) all(conds []value.Value) value.Value {
	var in value.Value
	for _, c := range conds {
		switch {
		case c == nil:
		case in == nil:
			in = c
		default:
			in = f.b.NewAnd(in, c)
		}
	}
	return in
}

// dimsInRange is, per checked dimension, whether idx lies in shape there
// (nil for a dimension not checked).
func (f *fn) dimsInRange(checked []bool, idx []value.Value, shape []int64) []value.Value {
	oks := make([]value.Value, len(checked))
	for d, c := range checked {
		if c {
			oks[d] = f.b.NewICmp(enum.IPredULT, idx[d], i64(shape[d])) // negative is large
		}
	}
	return oks
}

// flatIndex is the row-major offset of idx in a tensor of shape.
func flatIndex(f *fn, idx []value.Value, shape []int64) value.Value {
	var off value.Value = i64(0)
	stride := int64(1)
	for d := len(idx) - 1; d >= 0; d-- {
		var term value.Value = idx[d]
		if stride != 1 {
			term = f.b.NewMul(idx[d], i64(stride))
		}
		if d == len(idx)-1 {
			off = term
		} else {
			off = f.b.NewAdd(off, term)
		}
		stride *= shape[d]
	}
	return off
}

// recompute evaluates local d at idx (a local the schedule recomputes
// where it is read), rounded to its dtype as a stored local would be.
func (f *fn) recompute(d *tir.Def, idx []value.Value) value.Value {
	if v, ok := f.rowVals[d]; ok {
		return v // a row local, at the row's key (schedule.Rows)
	}
	if buf, ok := f.rowBufs[d]; ok {
		return f.load(buf, f.rowBufferOffset(d, idx), d.Tensor.DType)
	}
	saved := make([]value.Value, len(d.Vars))
	for i, v := range d.Vars {
		saved[i] = f.vars[v]
		f.vars[v] = idx[i]
	}
	x := f.convert(f.expr(d.Body), d.Body.Type(), d.Tensor.DType, true)
	for i, v := range d.Vars {
		if saved[i] == nil {
			delete(f.vars, v)
		} else {
			f.vars[v] = saved[i]
		}
	}
	return x
}

// reportOutOfRange records site, the first failing dimension and its
// index in the status words (plan.StatusWords: the site plus one, the
// dimension, the index), unless an earlier error is there.
func (f *fn) reportOutOfRange(site int, checked []bool, idx []value.Value, shape []int64) {
	var dim, index value.Value = i64(0), i64(0)
	for d := len(checked) - 1; d >= 0; d-- {
		if !checked[d] {
			continue
		}
		bad := f.b.NewICmp(enum.IPredUGE, idx[d], i64(shape[d]))
		dim = f.b.NewSelect(bad, i64(int64(d)), dim)
		index = f.b.NewSelect(bad, idx[d], index)
	}
	pair := f.b.NewCmpXchg(f.status, i64(0), i64(int64(site)+1), enum.AtomicOrderingMonotonic, enum.AtomicOrderingMonotonic)
	won := f.b.NewExtractValue(pair, 1)
	f.ifThen(won, func() {
		f.b.NewStore(dim, f.b.NewGetElementPtr(types.I64, f.status, i64(1)))
		f.b.NewStore(index, f.b.NewGetElementPtr(types.I64, f.status, i64(2)))
	})
}

// zero is 0 in the domain of dt.
func (f *fn) zero(dt lang.DType) value.Value {
	if dt.IsFloat() {
		return f.float(0, dt)
	}
	return i64(0)
}
