package kernel

import (
	"slices"

	"tofuc/lang"
	"tofuc/lang/ir"
)

// SumIn says that a kernel reads the value of its first stage's sum
// Reduce from argument Arg (f32, of the kernel's output shape, at the
// output index) instead of computing it: the epilogue of a library's
// matrix product (ReadSum).
type SumIn struct {
	Reduce *ir.Reduce
	Arg    int
}

// ReadSum returns the epilogue of k's sum (its only reduction: a GEMM
// or a convolution) computed by a library into the buffer key (f32, of
// k's output shape): k, reading its sum there instead of computing it.
func (k *Kernel) ReadSum(key any) *Kernel {
	e := *k
	e.Label = k.Label + " (epilogue)"
	e.Kind = Elementwise
	e.GEMM, e.Reductions, e.ReduceLen = nil, nil, 0
	e.Args = slices.Clone(k.Args)
	e.argBeforeOutput(Arg{Key: key, DType: lang.F32, Shape: k.Shape})
	e.SumIn = &SumIn{Reduce: k.Reductions[0], Arg: len(e.Args) - 2}
	return &e
}

// SumOnly reports whether k's output is its only reduction itself, in
// f32: a library's product or convolution can write it with no
// epilogue.
func (k *Kernel) SumOnly() bool {
	return len(k.Stages) == 1 && len(k.Reductions) == 1 && k.Stages[0].Body == ir.Expr(k.Reductions[0]) && k.Out().DType == lang.F32
}

// Strided is a kernel's GEMM as a strided, batched product of matrices
// in its argument buffers (a BLAS call): for every index b of Batch,
// C[b] = A[b]·B[b], M×K by K×N, with C laid out as the kernel's output
// (row-major over its variables).
type Strided struct {
	M, N, K int64
	Batch   []int64
	A, B, C StridedMatrix
}

// StridedMatrix is where an operand lies in its argument (Arg; -1 for
// the result), in elements.
type StridedMatrix struct {
	Arg      int
	Offset   int64
	Row, Col int64
	Batch    []int64
}

// StridedGEMM describes k's GEMM as a strided product when it is one:
// an f32 sum of the product of two reads of f32 arguments, at affine
// indices always in range, whose row, column and sum variables each
// merge into one dimension of equal stride steps (the row and column
// variables that do not merge become batch dimensions). Kernels with
// chained, packed or opaque parts are none.
func (k *Kernel) StridedGEMM() (*Strided, bool) {
	g := k.GEMM
	if g == nil || g.Sum.T != lang.F32 || k.PackOnly || k.GPUOnly || k.Before != nil || k.Rows != nil || len(k.Opaques) > 0 || g.PackedA != nil || g.SharedB != nil {
		return nil, false
	}
	a, okA := k.stridedRead(g.A)
	b, okB := k.stridedRead(g.B)
	if !okA || !okB {
		return nil, false
	}
	c := strides{offset: 0, of: map[*ir.Var]int64{}}
	step := int64(1)
	for i := len(k.Vars) - 1; i >= 0; i-- {
		c.of[k.Vars[i]] = step
		step *= k.Shape[i]
	}
	s := &Strided{A: StridedMatrix{Arg: a.arg, Offset: a.offset}, B: StridedMatrix{Arg: b.arg, Offset: b.offset}, C: StridedMatrix{Arg: -1}}
	rows, cols, batch := k.sides(a, b)
	var ok bool
	var extraRows, extraCols []*ir.Var
	if s.M, s.A.Row, s.C.Row, extraRows, ok = merge(rows, a, c); !ok {
		return nil, false
	}
	if s.N, s.B.Col, s.C.Col, extraCols, ok = merge(cols, b, c); !ok {
		return nil, false
	}
	var rest []*ir.Var
	if s.K, s.A.Col, s.B.Row, rest, ok = merge(g.K, a, b); !ok || len(rest) > 0 {
		return nil, false // a sum variable that does not merge is no batch
	}
	for _, v := range slices.Concat(batch, extraRows, extraCols) {
		if n := extent(v); n > 1 {
			s.Batch = append(s.Batch, n)
			s.A.Batch, s.B.Batch, s.C.Batch = append(s.A.Batch, a.of[v]), append(s.B.Batch, b.of[v]), append(s.C.Batch, c.of[v])
		}
	}
	return s, true
}

// sides sorts the output variables into the rows (read by A only), the
// columns (by B only) and the batch (by both or neither) by the strides
// of the reads a and b. A variable the GEMM's factors both name can
// still be read by one only, its step in the other zero: a broadcast
// operand's batch (x of [128, 1, 512] times a weight broadcast over its
// 128) is the product's rows.
func (k *Kernel) sides(a, b strides) (rows, cols, batch []*ir.Var) {
	for _, v := range k.Vars {
		switch inA, inB := a.of[v] != 0, b.of[v] != 0; {
		case inA && !inB:
			rows = append(rows, v)
		case inB && !inA:
			cols = append(cols, v)
		default:
			batch = append(batch, v)
		}
	}
	return rows, cols, batch
}

// strides are a read's element offset and each variable's step in it.
type strides struct {
	arg    int
	offset int64
	of     map[*ir.Var]int64
}

// stridedRead recognises factor as a read of an f32 argument at affine
// indices with numeric constants, never out of range, directly or
// through recomputed locals that are each one such read (a broadcast
// view: matmul_broadcast's operands).
func (k *Kernel) stridedRead(factor ir.Expr) (strides, bool) {
	a, ok := factor.(*ir.Access)
	if !ok {
		return strides{}, false
	}
	arg, index, ok := k.argRead(a)
	if !ok {
		return strides{}, false
	}
	shape := k.Args[arg].Shape
	r := strides{arg: arg, of: map[*ir.Var]int64{}}
	step := int64(1)
	for d := len(index) - 1; d >= 0; d-- {
		c, numeric := index[d].Const.IsConst()
		if !numeric {
			return strides{}, false
		}
		r.offset += c * step
		for _, t := range index[d].Terms {
			r.of[t.Var] += t.Coef * step
		}
		step *= shape[d]
	}
	return r, r.offset >= 0
}

// argRead follows read a, in the kernel's variables, to the f32
// argument it reads, through recomputed locals whose body is one read,
// and returns the argument and the read's indices there; every read on
// the way is of f32 at affine indices that are never out of range.
func (k *Kernel) argRead(a *ir.Access) (arg int, index []ir.Affine, ok bool) {
	index = make([]ir.Affine, len(a.Index))
	for d, x := range a.Index {
		if index[d], ok = ir.AffineOf(x, nil); !ok {
			return 0, nil, false
		}
	}
	for {
		checked, analysed := k.checked[a]
		src, found := k.Source(a.T)
		if !found || !analysed || a.T.DType != lang.F32 || slices.Contains(checked, true) {
			return 0, nil, false
		}
		if src.Arg >= 0 {
			return src.Arg, index, true
		}
		inner, isRead := ir.Expr(nil), false
		if src.Local != nil {
			inner = src.Local.Body
			_, isRead = inner.(*ir.Access)
		}
		if !isRead {
			return 0, nil, false
		}
		at := map[*ir.Var]ir.Affine{}
		for i, v := range src.Local.Vars {
			at[v] = index[i]
		}
		a = inner.(*ir.Access)
		if index, ok = substitute(a.Index, at); !ok {
			return 0, nil, false
		}
	}
}

// substitute is the affine indices xs with each variable replaced by
// its affine value in at; ok is false where an index is not affine or
// reads another variable.
func substitute(xs []ir.Expr, at map[*ir.Var]ir.Affine) ([]ir.Affine, bool) {
	out := make([]ir.Affine, len(xs))
	for d, x := range xs {
		af, ok := ir.AffineOf(x, nil)
		if !ok {
			return nil, false
		}
		out[d] = ir.Affine{Const: af.Const}
		for _, t := range af.Terms {
			v, bound := at[t.Var]
			if !bound {
				return nil, false
			}
			out[d] = out[d].Add(v.Scale(t.Coef))
		}
	}
	return out, true
}

// merge folds vars (outermost first) into one dimension, innermost
// first, while each next variable's step is the extent so far times the
// innermost's step in both reads x and y; it returns the extent, the two
// steps, and the variables left over (outermost first). Variables of
// extent one are dropped.
func merge(vars []*ir.Var, x, y strides) (n, sx, sy int64, rest []*ir.Var, ok bool) {
	n = 1
	i := len(vars) - 1
	for ; i >= 0; i-- {
		v := vars[i]
		e := extent(v)
		if e <= 0 {
			return 0, 0, 0, nil, false
		}
		if e == 1 {
			continue
		}
		switch {
		case n == 1:
			sx, sy = x.of[v], y.of[v]
		case x.of[v] != n*sx || y.of[v] != n*sy:
			rest = slices.DeleteFunc(slices.Clone(vars[:i+1]), func(v *ir.Var) bool { return extent(v) == 1 })
			return n, sx, sy, rest, true
		}
		n *= e
	}
	return n, sx, sy, nil, true
}

// extent is a variable's constant extent, or -1.
func extent(v *ir.Var) int64 {
	n, ok := v.Extent.IsConst()
	if !ok {
		return -1
	}
	return n
}
