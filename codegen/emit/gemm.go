package emit

import (
	"fmt"
	"math"

	"github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"tofuc/codegen/blocking"
	"tofuc/codegen/kernel"
	"tofuc/lang"
	tir "tofuc/lang/ir"
)

// The host flavour of a contraction (kernel.GEMM) is a packed,
// cache-blocked matrix product with a register-blocked, vectorised
// micro-kernel, GotoBLAS's structure:
//
//	task (batch b, rows [r0, r0+rows), columns [jc, jc+nc)):
//	  for each block of KC values of k:
//	    pack B[k, jc:jc+nc] into Bp          (evaluating B's lambda: im2col for free;
//	                                          or, where B is shared, the kernel's first
//	                                          items have packed all of it, see blocking.Split)
//	    for each block of MC rows:
//	      pack A[rows, k] into Ap            (unless packed with the weights)
//	      for each panel of NR columns:      (the panel of Bp stays in L1)
//	        for each strip of MR rows:
//	          C[strip, panel] (= in the first block, else +=) Ap[strip] · Bp[panel]
//	  epilogue: each element's stages with the sum replaced by C, stored
//
// Its sizes (the register tile MR × NR, the blocks KC and MC, how the
// work is split into tasks, whether C's sums are f32 or double) are
// codegen/blocking's decisions (blocking.Shape), which the builder and
// the calibration read too.

// coldAhead is the number of depth values a cold micro-kernel
// prefetches its strip and panel ahead (microKernel).
const coldAhead = 32

// colChunk returns the first column and the column count of chunk c:
// quanta [quanta·c/chunks, quanta·(c+1)/chunks), the last cut at cols.
func (f *fn) colChunk(s blocking.Shape, c value.Value) (jc, nc value.Value) {
	quantum := func(c value.Value) value.Value {
		q := f.b.NewUDiv(f.b.NewMul(c, i64(s.Quanta)), i64(s.ColChunks))
		return f.smin(f.b.NewMul(q, i64(blocking.ColQuantum)), i64(s.Cols))
	}
	jc = quantum(c)
	return jc, f.b.NewSub(quantum(f.b.NewAdd(c, i64(1))), jc)
}

// rowChunk returns the first row and the row count of chunk r: strips
// [strips·r/chunks, strips·(r+1)/chunks), the last cut at rows.
func (f *fn) rowChunk(s blocking.Shape, r value.Value) (r0, rows value.Value) {
	strip := func(r value.Value) value.Value {
		q := f.b.NewUDiv(f.b.NewMul(r, i64(s.Strips)), i64(s.RowChunks))
		return f.smin(f.b.NewMul(q, i64(s.MR)), i64(s.Rows))
	}
	r0 = strip(r)
	return r0, f.b.NewSub(strip(f.b.NewAdd(r, i64(1))), r0)
}

// packStrips packs strips [begin, end) of A for a PackOnly kernel, strip
// after strip: Apk[(strip·depth + k)·MR + i], so that a block of depth
// starting at pc of the strip at row ir begins at ir·depth + pc·MR.
func (f *fn) packStrips(begin, end value.Value) {
	g := f.k.GEMM
	s := blocking.NewShape(g)
	out := f.bufs[len(f.bufs)-1]
	f.unflatten(i64(0), g.Batch, extents(g.Batch))
	f.loop(begin, end, i64(1), func(strip value.Value) {
		ir := f.b.NewMul(strip, i64(s.MR))
		ap := f.b.NewGetElementPtr(types.Float, out, f.b.NewMul(ir, i64(s.Depth)))
		f.packA(g, s, ap, i64(0), i64(s.Depth), ir)
	})
}

// gemmHost lowers a contraction kernel's host flavour: items [begin,
// end) of its host range, each packing a block of a shared B or a task.
func (f *fn) gemmHost(begin, end value.Value) {
	g := f.k.GEMM
	s := blocking.NewShape(g)
	t, free := f.newGemmTask(g, s, s.Rows1, s.Cols1)
	f.loop(begin, end, i64(1), func(item value.Value) {
		if !s.Shared {
			f.gemmTask(t, item)
			return
		}
		f.ifElse(f.b.NewICmp(enum.IPredULT, item, i64(s.PackItems)), func() {
			f.packShared(t.shared, s, item)
		}, func() {
			f.gemmTask(t, f.b.NewSub(item, i64(s.PackItems)))
		})
	})
	free()
}

// newGemmTask allocates the buffers of tasks of at most rows × cols of
// a contraction's output, and returns what frees them.
func (f *fn) newGemmTask(g *kernel.GEMM, s blocking.Shape, rows, cols int64) (*gemmTask, func()) {
	ncPad := blocking.CeilDiv(cols, s.NR) * s.NR
	rowsPad := blocking.CeilDiv(rows, s.MR) * s.MR
	floats := func(n int64) value.Value { return f.scratch(4*n, types.Float) }
	// C's rows are a line longer than its panels: rows a power of two
	// apart (512 columns of doubles are 4 KiB) would put a tile's rows
	// in the same sets of L1, evicting the panel of B.
	sumType := sumTypeOf(s)
	t := &gemmTask{g: g, s: s, sumType: sumType, ldc: ncPad + CacheLine/sumSize(sumType)}
	for i, a := range f.k.Args {
		switch {
		case g.PackedA != nil && a.Key == g.PackedA:
			t.packed = f.bufs[i] // A packed with the weights
		case g.SharedB != nil && a.Key == g.SharedB:
			t.shared = f.bufs[i] // B packed for all tasks
		}
	}
	if !s.Shared {
		t.bp = floats(blocking.KC * ncPad)
	}
	t.ap = floats(blocking.KC * (blocking.MC + s.MR))
	t.cs = f.scratch(sumSize(sumType)*rowsPad*t.ldc, sumType)
	if s.Narrow() {
		t.micro = f.m.narrowKernel(s)
		t.cold = t.micro
	} else {
		t.micro, t.cold = f.m.microKernel(s, false), f.m.microKernel(s, true)
	}
	// The block of B at depth pc of the columns from jc: where tasks
	// share B, in the panels of its batch index (t.shared), else packed
	// into bp here; panelLen is the distance between its panels.
	t.blockB = func(pc, kc, jc, nc, ncPanels value.Value) (block, panelLen value.Value) {
		if !s.Shared {
			f.packB(g, s, t.bp, f.b.NewMul(kc, i64(s.NR)), pc, kc, jc, nc, ncPanels)
			return t.bp, f.b.NewMul(kc, i64(s.NR))
		}
		return f.sharedBlock(t.shared, s, pc, jc), i64(s.Depth * s.NR)
	}
	return t, func() {
		for _, p := range []value.Value{t.cs, t.bp, t.ap} {
			if p != nil {
				f.freeScratch(p)
			}
		}
	}
}

// gemmTask is what a contraction's tasks share: its buffers (the packed
// A of the weights or nil, Ap and Bp for a task's packing, C for its
// sums (sumTypeOf) with rows ldc apart) and how a task finds a block of B.
type gemmTask struct {
	g                      *kernel.GEMM
	s                      blocking.Shape
	micro, cold            *ir.Func // cold: for a strip or a panel met first (microKernel)
	packed, shared, ap, bp value.Value
	cs                     value.Value
	sumType                types.Type
	ldc                    int64
	blockB                 func(pc, kc, jc, nc, ncPanels value.Value) (block, panelLen value.Value)
}

// gemmTask lowers task number task: a batch index, a block of rows and a
// block of columns (gemmBlock).
func (f *fn) gemmTask(t *gemmTask, task value.Value) {
	g, s := t.g, t.s
	per := s.RowChunks * s.ColChunks
	rest := f.b.NewURem(task, i64(per))
	f.unflatten(f.b.NewUDiv(task, i64(per)), g.Batch, extents(g.Batch))
	r0, rows := f.rowChunk(s, f.b.NewUDiv(rest, i64(s.ColChunks)))
	jc, nc := f.colChunk(s, f.b.NewURem(rest, i64(s.ColChunks)))
	f.gemmBlock(t, r0, rows, jc, nc)
}

// gemmBlock lowers the block of rows from r0 and columns from jc of the
// bound batch index, through the blocks of the depth, then its epilogue.
func (f *fn) gemmBlock(t *gemmTask, r0, rows, jc, nc value.Value) {
	g, s := t.g, t.s
	rowsEnd := f.b.NewAdd(r0, rows)
	// The micro-kernel runs over the chunk's panels only, not the
	// widest chunk's.
	ncPanels := f.panelsOf(s, nc)
	if s.Depth == 0 { // no block of the depth stores C
		f.loop(i64(0), f.b.NewMul(rows, i64(t.ldc)), i64(1), func(i value.Value) {
			f.b.NewStore(constant.NewFloat(t.sumType.(*types.FloatType), 0), f.b.NewGetElementPtr(t.sumType, t.cs, i))
		})
	}
	f.loop(i64(0), i64(s.Depth), i64(blocking.KC), func(pc value.Value) {
		kc := f.smin(i64(blocking.KC), f.b.NewSub(i64(s.Depth), pc))
		first := f.b.NewICmp(enum.IPredEQ, pc, i64(0))
		bBlock, panelLen := t.blockB(pc, kc, jc, nc, ncPanels)
		f.loop(r0, rowsEnd, i64(blocking.MC), func(ic value.Value) {
			icEnd := f.smin(f.b.NewAdd(ic, i64(blocking.MC)), rowsEnd)
			// The strip at row ir of the block: packed with the
			// weights, or packed here for the block.
			strip := func(ir value.Value) value.Value {
				if t.packed != nil {
					return f.b.NewGetElementPtr(types.Float, t.packed, f.b.NewAdd(f.b.NewMul(ir, i64(s.Depth)), f.b.NewMul(pc, i64(s.MR))))
				}
				return f.b.NewGetElementPtr(types.Float, t.ap, f.b.NewMul(f.b.NewSub(ir, ic), kc))
			}
			if t.packed == nil {
				f.loop(ic, icEnd, i64(s.MR), func(ir value.Value) { f.packA(g, s, strip(ir), pc, kc, ir) })
			}
			f.loop(i64(0), ncPanels, i64(s.NR), func(jr value.Value) {
				bPanel := f.b.NewGetElementPtr(types.Float, bBlock, f.b.NewMul(f.b.NewUDiv(jr, i64(s.NR)), panelLen))
				f.loop(ic, icEnd, i64(s.MR), func(ir value.Value) {
					row := f.b.NewMul(f.b.NewSub(ir, r0), i64(t.ldc))
					cTile := f.b.NewGetElementPtr(t.sumType, t.cs, f.b.NewAdd(row, jr))
					// A strip meets the panel first (ir = ic), or
					// the panel meets a strip of the weights first
					// (jr = 0; a strip packed for this block is near).
					var cold value.Value = f.b.NewICmp(enum.IPredEQ, ir, ic)
					if t.packed != nil {
						cold = f.b.NewOr(cold, f.b.NewICmp(enum.IPredEQ, jr, i64(0)))
					}
					micro := f.b.NewSelect(cold, t.cold, t.micro)
					f.b.NewCall(micro, strip(ir), bPanel, cTile, kc, i64(t.ldc), first)
				})
			})
		})
	})
	f.gemmEpilogue(t, r0, rows, jc, nc)
}

// panelsOf is nc columns rounded up to whole panels.
func (f *fn) panelsOf(s blocking.Shape, nc value.Value) value.Value {
	return f.b.NewMul(f.b.NewUDiv(f.b.NewAdd(nc, i64(s.NR-1)), i64(s.NR)), i64(s.NR))
}

// sharedBlock is where the block at depth pc of the columns from jc (a
// multiple of NR) begins in the shared B of the bound batch index.
func (f *fn) sharedBlock(shared value.Value, s blocking.Shape, pc, jc value.Value) value.Value {
	colsPad := blocking.CeilDiv(s.Cols, s.NR) * s.NR
	batch := flatIndex(f, f.varValues(f.k.GEMM.Batch), extents(f.k.GEMM.Batch))
	var off value.Value = f.b.NewMul(batch, i64(s.Depth*colsPad))
	off = f.b.NewAdd(off, f.b.NewMul(f.b.NewUDiv(jc, i64(s.NR)), i64(s.Depth*s.NR)))
	off = f.b.NewAdd(off, f.b.NewMul(pc, i64(s.NR)))
	return f.b.NewGetElementPtr(types.Float, shared, off)
}

// packShared lowers pack item item: the block of depth and the chunk of
// columns of one batch index of B, packed into the shared B.
func (f *fn) packShared(shared value.Value, s blocking.Shape, item value.Value) {
	g := f.k.GEMM
	blocks := blocking.CeilDiv(s.Depth, blocking.KC)
	f.unflatten(f.b.NewUDiv(item, i64(blocks*s.ColChunks)), g.Batch, extents(g.Batch))
	rest := f.b.NewURem(item, i64(blocks*s.ColChunks))
	pc := f.b.NewMul(f.b.NewUDiv(rest, i64(s.ColChunks)), i64(blocking.KC))
	kc := f.smin(i64(blocking.KC), f.b.NewSub(i64(s.Depth), pc))
	jc, nc := f.colChunk(s, f.b.NewURem(rest, i64(s.ColChunks)))
	ncPanels := f.panelsOf(s, nc)
	f.packB(g, s, f.sharedBlock(shared, s, pc, jc), i64(s.Depth*s.NR), pc, kc, jc, nc, ncPanels)
}

// packB stores B[k, jc+j] for k in [pc, pc+kc), j in [0, ncPanels)
// (zero past nc) as Bp[(j/NR)·panelLen + (k-pc)·NR + j%NR] (panels of NR
// columns, panelLen apart), in f32, reading B along its contiguous
// direction.
func (f *fn) packB(g *kernel.GEMM, s blocking.Shape, bp, panelLen, pc, kc, jc, nc, ncPanels value.Value) {
	// Bp is a sequence of panels of NR columns, each kc × NR floats, so
	// that the micro-kernel reads one contiguous panel (L1-resident)
	// rather than NR columns of rows of C apart.
	at := func(ks, j value.Value) value.Value {
		panel := f.b.NewMul(f.b.NewUDiv(j, i64(s.NR)), panelLen)
		return f.b.NewGetElementPtr(types.Float, bp, f.b.NewAdd(panel, f.b.NewAdd(f.b.NewMul(ks, i64(s.NR)), f.b.NewURem(j, i64(s.NR)))))
	}
	store := func(ks, j value.Value) {
		f.b.NewStore(f.factorF32(g.B), at(ks, j))
	}
	if f.contiguousAlong(g.B, g.K) {
		f.forRange(jc, nc, g.Cols, func(j value.Value) {
			f.forRange(pc, kc, g.K, func(ks value.Value) { store(ks, j) })
		})
	} else {
		// A row of the panels at a time (one depth value), in runs of
		// B's innermost column variable that may span panels: the run's
		// indices and in-range part are computed once per run, and the
		// copies within a panel are contiguous, which the vectoriser
		// turns into vector copies where B is contiguous.
		f.loop(i64(0), kc, i64(1), func(ks value.Value) {
			f.unflatten(f.b.NewAdd(pc, ks), g.K, extents(g.K))
			row := panelRow{base: f.b.NewGetElementPtr(types.Float, bp, f.b.NewMul(ks, i64(s.NR))), panelLen: panelLen, nr: s.NR}
			if len(g.Cols) == 0 {
				f.segments(row, i64(0), i64(0), nc, func(dst, _, n value.Value) {
					f.vectorLoop(i64(0), n, func(v value.Value) {
						f.b.NewStore(f.factorF32(g.B), f.b.NewGetElementPtr(types.Float, dst, v))
					})
				})
				return
			}
			f.forRuns(jc, nc, g.Cols, func(t, run value.Value) {
				f.packRun(g.B, g.Cols[len(g.Cols)-1], row, t, run)
			})
		})
	}
	// Columns past nc are zero.
	f.loop(i64(0), kc, i64(1), func(ks value.Value) {
		f.loop(nc, ncPanels, i64(1), func(j value.Value) {
			f.b.NewStore(constant.NewFloat(types.Float, 0), at(ks, j))
		})
	})
}

// packA stores A[ir+i, k] for k in [pc, pc+kc), i in [0, MR) (zero past
// the rows) as Ap[(k-pc)·MR + i], in f32.
func (f *fn) packA(g *kernel.GEMM, s blocking.Shape, ap, pc, kc, ir value.Value) {
	rows := f.smin(i64(s.MR), f.b.NewSub(i64(s.Rows), ir))
	store := func(ks, i value.Value) {
		f.b.NewStore(f.factorF32(g.A), f.b.NewGetElementPtr(types.Float, ap, f.b.NewAdd(f.b.NewMul(ks, i64(s.MR)), i)))
	}
	// The depth outermost even where A is contiguous along it: a strip's
	// MR rows are then MR streams read side by side, whose cache misses
	// overlap, and the stores are contiguous (measured faster than a
	// row at a time).
	general := func() {
		f.loop(i64(0), kc, i64(1), func(ks value.Value) {
			f.unflatten(f.b.NewAdd(pc, ks), g.K, extents(g.K))
			f.forRange(ir, rows, g.Rows, func(i value.Value) { store(ks, i) })
		})
	}
	if len(g.Rows) != 1 || len(g.K) != 1 {
		general()
	} else {
		full := f.b.NewICmp(enum.IPredEQ, rows, i64(s.MR))
		f.ifElse(full, func() { f.packFullStrip(g, s, ap, pc, kc, ir) }, general)
	}
	// Rows past the last are zero.
	f.loop(i64(0), kc, i64(1), func(ks value.Value) {
		f.loop(rows, i64(s.MR), i64(1), func(i value.Value) {
			f.b.NewStore(constant.NewFloat(types.Float, 0), f.b.NewGetElementPtr(types.Float, ap, f.b.NewAdd(f.b.NewMul(ks, i64(s.MR)), i)))
		})
	})
}

// packFullStrip packs a strip of MR rows of A (one row and one depth
// variable) for k in [pc, pc+kc), as packA does. Where A is one f32
// read contiguous along the depth and never out of range, and MR is a
// power of two, each VL values of the depth are MR vector loads, one
// per row, transposed by interleaving (transposeRows); otherwise, and
// for the depth's last kc mod VL values, element by element with the
// rows unrolled.
func (f *fn) packFullStrip(g *kernel.GEMM, s blocking.Shape, ap, pc, kc, ir value.Value) {
	rowVar, kVar := g.Rows[0], g.K[0]
	scalar := func(from value.Value) {
		f.loop(from, kc, i64(1), func(ks value.Value) {
			f.vars[kVar] = f.b.NewAdd(pc, ks)
			for i := range s.MR {
				f.vars[rowVar] = f.b.NewAdd(ir, i64(i))
				f.b.NewStore(f.factorF32(g.A), f.b.NewGetElementPtr(types.Float, ap, f.b.NewAdd(f.b.NewMul(ks, i64(s.MR)), i64(i))))
			}
		})
	}
	f.vars[rowVar], f.vars[kVar] = ir, pc
	first, rowStep, ok := f.rowsAlongDepth(g.A, rowVar, kVar)
	if !ok || s.MR&(s.MR-1) != 0 {
		scalar(i64(0))
		return
	}
	arg := first.arg
	vec := types.NewVector(uint64(s.VL), types.Float)
	whole := f.b.NewMul(f.b.NewUDiv(kc, i64(s.VL)), i64(s.VL))
	f.loop(i64(0), whole, i64(s.VL), func(ks value.Value) {
		rows := make([]value.Value, s.MR)
		for i := range rows {
			at := f.b.NewAdd(first.flat, f.b.NewAdd(f.b.NewMul(i64(int64(i)), i64(rowStep)), ks))
			l := f.b.NewLoad(vec, f.b.NewBitCast(f.b.NewGetElementPtr(types.Float, f.bufs[arg], at), types.NewPointer(vec)))
			l.Align = 4
			rows[i] = l
		}
		for t, v := range f.transposeRows(rows) {
			at := f.b.NewAdd(f.b.NewMul(ks, i64(s.MR)), i64(int64(t)*s.VL))
			st := f.b.NewStore(v, f.b.NewBitCast(f.b.NewGetElementPtr(types.Float, ap, at), types.NewPointer(vec)))
			st.Align = 4
		}
	})
	scalar(whole)
}

// flatRead is a read of argument arg at flat element index flat.
type flatRead struct {
	arg  int
	flat value.Value
}

// rowsAlongDepth recognises factor as one f32 read that is never out of
// range, contiguous along kVar (flat step 1) and affine in rowVar: its
// flat index at the bound variables and the flat step of a row.
func (f *fn) rowsAlongDepth(factor tir.Expr, rowVar, kVar *tir.Var) (first flatRead, rowStep int64, ok bool) {
	a, arg, kSteps, ok := f.affineRead(factor, kVar)
	if !ok {
		return flatRead{}, 0, false
	}
	_, _, rowSteps, ok := f.affineRead(factor, rowVar)
	checked, _ := f.k.Checked(a)
	for _, c := range checked {
		ok = ok && !c
	}
	shape := f.k.Args[arg].Shape
	if !ok || flatStep(kSteps, shape) != 1 {
		return flatRead{}, 0, false
	}
	idx := make([]value.Value, len(a.Index))
	for d, x := range a.Index {
		idx[d] = f.exprTo(x, lang.I64)
	}
	return flatRead{arg: arg, flat: flatIndex(f, idx, shape)}, flatStep(rowSteps, shape), true
}

// flatStep is the step of a row-major flat index when each index d
// advances by steps[d].
func flatStep(steps, shape []int64) int64 {
	step, stride := int64(0), int64(1)
	for d := len(shape) - 1; d >= 0; d-- {
		step += steps[d] * stride
		stride *= shape[d]
	}
	return step
}

// transposeRows interleaves n vectors (n a power of two) of VL lanes:
// the result, read as n·VL consecutive values, holds element k of row
// i at k·n + i. Interleaving rows i and i + n/2, then the results
// likewise, log2(n) times, puts the rows in order (each step is one
// two-source shuffle per output vector).
func (f *fn) transposeRows(rows []value.Value) []value.Value {
	if len(rows) == 1 {
		return rows
	}
	var even, odd []value.Value
	for i, r := range rows {
		if i%2 == 0 {
			even = append(even, r)
		} else {
			odd = append(odd, r)
		}
	}
	// Element m of the even rows' sequence is value 2m of the result,
	// element m of the odd rows' is value 2m + 1.
	return f.interleave(f.transposeRows(even), f.transposeRows(odd))
}

// interleave returns the values p[0], q[0], p[1], q[1], … of two
// sequences of vectors of equal length, as vectors of the same width.
func (f *fn) interleave(p, q []value.Value) []value.Value {
	vl := int64(p[0].Type().(*types.VectorType).Len)
	out := make([]value.Value, 0, 2*len(p))
	for t := range int64(2 * len(p)) {
		mask := make([]constant.Constant, vl)
		for e := range vl {
			from := t%2*vl/2 + e/2
			if e%2 == 1 {
				from += vl // from q
			}
			mask[e] = i32(from)
		}
		out = append(out, f.b.NewShuffleVector(p[t/2], q[t/2], constant.NewVector(types.NewVector(uint64(vl), types.I32), mask...)))
	}
	return out
}

// forRange visits the flat indices [start, start+count) of the row-major
// index space of vars, binding vars at each and calling body with the
// offset from start. The innermost variable advances in a counted loop of
// its own (one division per run of it, not per index), which the
// vectoriser can turn into vector code.
func (f *fn) forRange(start, count value.Value, vars []*tir.Var, body func(t value.Value)) {
	if len(vars) == 0 {
		f.vectorLoop(i64(0), count, body)
		return
	}
	inner := vars[len(vars)-1]
	f.forRuns(start, count, vars, func(t, run value.Value) {
		z0 := f.vars[inner]
		f.vectorLoop(i64(0), run, func(u value.Value) {
			f.vars[inner] = f.b.NewAdd(z0, u)
			body(f.b.NewAdd(t, u))
		})
	})
}

// forRuns visits the flat indices [start, start+count) of the row-major
// index space of vars (at least one) in runs of the innermost variable:
// body(t, run) with vars bound at the run's first index, t its offset
// from start and run its length.
func (f *fn) forRuns(start, count value.Value, vars []*tir.Var, body func(t, run value.Value)) {
	inner := vars[len(vars)-1]
	pre := f.b
	head, seg, exit := f.f.NewBlock(""), f.f.NewBlock(""), f.f.NewBlock("")
	pre.NewBr(head)
	t := head.NewPhi(ir.NewIncoming(i64(0), pre))
	head.NewCondBr(head.NewICmp(enum.IPredSLT, t, count), seg, exit)
	f.b = seg
	f.unflatten(f.b.NewAdd(start, t), vars, extents(vars))
	run := f.smin(f.b.NewSub(i64(extent(inner)), f.vars[inner]), f.b.NewSub(count, t))
	body(t, run)
	next := f.b.NewAdd(t, run)
	f.b.NewBr(head)
	t.Incs = append(t.Incs, ir.NewIncoming(next, f.b))
	f.b = exit
}

// panelRow is one depth value's row of packed B: column j of the task
// at Bp[(j/NR)·panelLen + j%NR] from base.
type panelRow struct {
	base, panelLen value.Value
	nr             int64
}

// segments calls body for the columns j0+u, u in [lo, hi), in pieces
// that stay within a panel: dst is where column j0+u0 goes, and the n
// columns from it are contiguous.
func (f *fn) segments(p panelRow, j0, lo, hi value.Value, body func(dst, u0, n value.Value)) {
	pre := f.b
	head, seg, exit := f.f.NewBlock(""), f.f.NewBlock(""), f.f.NewBlock("")
	pre.NewBr(head)
	u := head.NewPhi(ir.NewIncoming(lo, pre))
	head.NewCondBr(head.NewICmp(enum.IPredSLT, u, hi), seg, exit)
	f.b = seg
	j := f.b.NewAdd(j0, u)
	within := f.b.NewURem(j, i64(p.nr))
	n := f.smin(f.b.NewSub(hi, u), f.b.NewSub(i64(p.nr), within))
	panel := f.b.NewMul(f.b.NewUDiv(j, i64(p.nr)), p.panelLen)
	body(f.b.NewGetElementPtr(types.Float, p.base, f.b.NewAdd(panel, within)), u, n)
	next := f.b.NewAdd(u, n)
	f.b.NewBr(head)
	u.Incs = append(u.Incs, ir.NewIncoming(next, f.b))
	f.b = exit
}

// packRun stores run values of factor at the columns t, t+1, … of row,
// the variable inner advancing from its bound value. A factor that is
// one f32 read, affine in inner with a coefficient of at least zero in
// every checked index and zero out of range, is copied in three parts:
// zeros before the part of the run where every index is in range,
// unchecked loads within it (a vector copy where the read is
// contiguous), zeros after; rather than an index check per element (a
// convolution's padding).
func (f *fn) packRun(factor tir.Expr, inner *tir.Var, row panelRow, t, run value.Value) {
	z0 := f.vars[inner]
	fill := func(lo, hi value.Value, elem func(u value.Value) value.Value) {
		f.segments(row, t, lo, hi, func(dst, u0, n value.Value) {
			f.vectorLoop(i64(0), n, func(v value.Value) {
				f.b.NewStore(elem(f.b.NewAdd(u0, v)), f.b.NewGetElementPtr(types.Float, dst, v))
			})
		})
	}
	a, arg, steps, ok := f.affineRead(factor, inner)
	if !ok {
		fill(i64(0), run, func(u value.Value) value.Value {
			f.vars[inner] = f.b.NewAdd(z0, u)
			return f.factorF32(factor)
		})
		return
	}
	shape := f.k.Args[arg].Shape
	idx := make([]value.Value, len(a.Index))
	for d, x := range a.Index {
		idx[d] = f.exprTo(x, lang.I64) // at the run's first value
	}
	checked, _ := f.k.Checked(a)
	var lo, hi value.Value = i64(0), run
	for d, c := range checked {
		switch {
		case !c:
		case steps[d] == 0:
			in := f.b.NewICmp(enum.IPredULT, idx[d], i64(shape[d]))
			hi = f.b.NewSelect(in, hi, i64(0))
		default:
			lo = f.smax(lo, f.ceilPos(f.b.NewSub(i64(0), idx[d]), steps[d]))
			hi = f.smin(hi, f.ceilPos(f.b.NewSub(i64(shape[d]), idx[d]), steps[d]))
		}
	}
	lo = f.smin(lo, run)
	hi = f.smax(hi, lo)
	flat0 := flatIndex(f, idx, shape)
	step := flatStep(steps, shape)
	if step == 1 && blocking.HostLanes() >= 8 {
		// Contiguous: whole vectors, the last of each piece masked (a
		// convolution's rows are often shorter than a vector). With
		// AVX or AVX-512, whose masked loads and stores are
		// instructions; elsewhere LLVM would test each lane.
		src := f.b.NewGetElementPtr(types.Float, f.bufs[arg], flat0)
		vectors := func(lo, hi value.Value, from value.Value) {
			f.segments(row, t, lo, hi, func(dst, u0, n value.Value) {
				var at value.Value
				if from != nil {
					at = f.b.NewGetElementPtr(types.Float, from, u0)
				}
				f.maskedRun(dst, at, n)
			})
		}
		vectors(i64(0), lo, nil)
		vectors(lo, hi, src)
		vectors(hi, run, nil)
		return
	}
	zero := func(value.Value) value.Value { return constant.NewFloat(types.Float, 0) }
	fill(i64(0), lo, zero)
	fill(lo, hi, func(u value.Value) value.Value {
		return f.b.NewLoad(types.Float, f.b.NewGetElementPtr(types.Float, f.bufs[arg], f.b.NewAdd(flat0, f.b.NewMul(u, i64(step)))))
	})
	fill(hi, run, zero)
}

// maskedRun copies n floats from src to dst (zeros where src is nil) a
// vector of the host's lanes at a time, the last one masked: no element
// past either run is read or written.
func (f *fn) maskedRun(dst, src, n value.Value) {
	vl := blocking.HostLanes()
	vec := types.NewVector(uint64(vl), types.Float)
	mask := types.NewVector(uint64(vl), types.I1)
	name := fmt.Sprintf("v%df32.p0v%df32", vl, vl)
	load := f.m.declare("llvm.masked.load."+name, vec, types.NewPointer(vec), types.I32, mask, vec)
	store := f.m.declare("llvm.masked.store."+name, types.Void, vec, types.NewPointer(vec), types.I32, mask)
	lanes := make([]constant.Constant, vl)
	for i := range lanes {
		lanes[i] = i64(int64(i))
	}
	iota := constant.NewVector(types.NewVector(uint64(vl), types.I64), lanes...)
	zeros := constant.NewZeroInitializer(vec)
	f.loop(i64(0), n, i64(vl), func(v value.Value) {
		left := f.b.NewSub(n, v)
		splat := f.b.NewShuffleVector(f.b.NewInsertElement(constant.NewUndef(iota.Typ), left, i32(0)), constant.NewUndef(iota.Typ),
			constant.NewZeroInitializer(types.NewVector(uint64(vl), types.I32)))
		on := f.b.NewICmp(enum.IPredSLT, iota, splat)
		var val value.Value = zeros
		if src != nil {
			val = f.b.NewCall(load, f.b.NewBitCast(f.b.NewGetElementPtr(types.Float, src, v), types.NewPointer(vec)), i32(4), on, zeros)
		}
		f.b.NewCall(store, val, f.b.NewBitCast(f.b.NewGetElementPtr(types.Float, dst, v), types.NewPointer(vec)), i32(4), on)
	})
}

// affineRead recognises factor as one read of an f32 argument whose
// indices are affine, with inner's coefficient in each (steps) at least
// zero where the index is checked, and that reads zero out of range (or
// is never out of range).
func (f *fn) affineRead(factor tir.Expr, inner *tir.Var) (a *tir.Access, arg int, steps []int64, ok bool) {
	a, isAccess := factor.(*tir.Access)
	if !isAccess || a.T.DType != lang.F32 {
		return nil, 0, nil, false
	}
	src, found := f.k.Source(a.T)
	if !found || src.Arg < 0 || !zeroDefault(a.Default) {
		return nil, 0, nil, false
	}
	checked, _ := f.k.Checked(a)
	steps = make([]int64, len(a.Index))
	for d, x := range a.Index {
		af, affine := tir.AffineOf(x, nil)
		if !affine {
			return nil, 0, nil, false
		}
		for _, term := range af.Terms {
			if term.Var == inner {
				steps[d] = term.Coef
			}
		}
		if checked != nil && checked[d] && (steps[d] < 0 || a.Default == nil) {
			return nil, 0, nil, false
		}
	}
	return a, src.Arg, steps, true
}

// contiguousAlong reports whether the first tensor a factor reads is
// contiguous along the sum's variables: its last index reads only them
// (a weight w[o, c, ky, kx] over k = (c, ky, kx)), so that packing should
// walk k innermost; otherwise the factor's own side is innermost.
func (f *fn) contiguousAlong(factor tir.Expr, k []*tir.Var) bool {
	inK := map[*tir.Var]bool{}
	for _, v := range k {
		inK[v] = true
	}
	var last tir.Expr
	tir.Walk(factor, func(e tir.Expr) bool {
		if a, ok := e.(*tir.Access); ok && last == nil && len(a.Index) > 0 {
			last = a.Index[len(a.Index)-1]
		}
		return last == nil
	})
	if last == nil {
		return false
	}
	onlyK, anyK := true, false
	tir.Walk(last, func(e tir.Expr) bool {
		if r, ok := e.(*tir.VarRef); ok {
			onlyK = onlyK && inK[r.V]
			anyK = anyK || inK[r.V]
		}
		return true
	})
	return onlyK && anyK
}

// factorF32 is a factor's value as an f32: a read of an f32 buffer is
// loaded as it is stored; anything else is computed in double and
// rounded.
func (f *fn) factorF32(e tir.Expr) value.Value {
	if a, ok := e.(*tir.Access); ok && a.T.DType == lang.F32 {
		if src, found := f.k.Source(a.T); found && src.Arg >= 0 && zeroDefault(a.Default) {
			return f.loadF32(a, src.Arg)
		}
	}
	return f.b.NewFPTrunc(f.exprTo(e, lang.F64), types.Float)
}

func zeroDefault(d tir.Expr) bool {
	if d == nil {
		return true
	}
	c, ok := d.(*tir.Const)
	return ok && c.T.IsFloat() && c.Float == 0 && !math.Signbit(c.Float)
}

// loadF32 reads an f32 buffer element as a float, 0 out of range when
// the access has its zero default, a recorded error without one.
func (f *fn) loadF32(a *tir.Access, arg int) value.Value {
	shape := f.k.Args[arg].Shape
	idx := make([]value.Value, len(a.Index))
	for d, x := range a.Index {
		idx[d] = f.exprTo(x, lang.I64)
	}
	read := func() value.Value {
		return f.b.NewLoad(types.Float, f.b.NewGetElementPtr(types.Float, f.bufs[arg], flatIndex(f, idx, shape)))
	}
	checked, site := f.k.Checked(a)
	inRange := f.inRange(checked, idx, shape)
	if inRange == nil {
		return read()
	}
	return f.branch(inRange, read, func() value.Value {
		if a.Default == nil {
			f.reportOutOfRange(site, checked, idx, shape)
		}
		return constant.NewFloat(types.Float, 0)
	})
}

// gemmEpilogue evaluates the stages of every element of the task's block
// (rows from r0, columns from jc) with the sum replaced by its accumulated
// value, and stores them.
func (f *fn) gemmEpilogue(t *gemmTask, r0, rows, jc, nc value.Value) {
	g := t.g
	element := func(i, j value.Value) {
		var c value.Value = f.b.NewLoad(t.sumType, f.b.NewGetElementPtr(t.sumType, t.cs, f.b.NewAdd(f.b.NewMul(i, i64(t.ldc)), j)))
		if t.sumType != types.Double {
			c = f.b.NewFPExt(c, types.Double)
		}
		f.hoisted = map[*tir.Reduce]value.Value{g.Sum: c}
		out := f.flatOffset(varRefs(f.k.Vars), f.varValues(f.k.Vars), f.k.Shape)
		f.store(f.bufs[len(f.bufs)-1], out, f.computeStages(), f.k.Out().DType)
	}
	// The columns that are also the output's last variables (a
	// convolution's oh, ow) run together: one run per value of the
	// columns before them, read and stored at their flat index
	// (flatCols), rather than a run per row of the image, most of it
	// scalar where rows are shorter than vectors.
	last := commonSuffix(g.Cols, f.k.Vars)
	if len(last) < 2 {
		f.forRange(r0, rows, g.Rows, func(i value.Value) {
			f.forRange(jc, nc, g.Cols, func(j value.Value) { element(i, j) })
		})
		f.hoisted = nil
		return
	}
	span := int64(1)
	for _, v := range last {
		span *= extent(v)
	}
	group := &tir.Var{Name: "cols", Extent: lang.Const(span)}
	runVars := append(append([]*tir.Var(nil), g.Cols[:len(g.Cols)-len(last)]...), group)
	kernelVars := f.kernelVars()
	f.forRange(r0, rows, g.Rows, func(i value.Value) {
		f.forRuns(jc, nc, runVars, func(t, run value.Value) {
			s0 := f.vars[group]
			f.vectorLoop(i64(0), run, func(u value.Value) {
				flat := f.b.NewAdd(s0, u)
				f.unflatten(flat, last, extents(last))
				f.flatCols = &flatCols{vars: last, index: flat, kernel: kernelVars}
				element(i, f.b.NewAdd(t, u))
				f.flatCols = nil
			})
		})
	})
	f.hoisted = nil
}

// commonSuffix is the longest list of variables that ends both a and b.
func commonSuffix(a, b []*tir.Var) []*tir.Var {
	n := 0
	for n < len(a) && n < len(b) && a[len(a)-1-n] == b[len(b)-1-n] {
		n++
	}
	return a[len(a)-n:]
}

// flatCols are variables that are the last indices of the element
// being computed, with their flat row-major index: a read or store whose
// last indices are exactly them, over dimensions of their extents, takes
// its flat index from it rather than from the variables (flatOffset).
type flatCols struct {
	vars   []*tir.Var
	index  value.Value
	kernel map[*tir.Var]*tir.Var // kernelVars
}

// flatOffset is the row-major offset of idx in shape, where idx's last
// indices are exprs; with flatCols, and exprs ending in references to
// exactly its variables over dimensions of their extents, from the flat
// index of those.
func (f *fn) flatOffset(exprs []tir.Expr, idx []value.Value, shape []int64) value.Value {
	fc := f.flatCols
	if fc == nil || len(exprs) < len(fc.vars) {
		return flatIndex(f, idx, shape)
	}
	lead := len(exprs) - len(fc.vars)
	inner := int64(1)
	for i, v := range fc.vars {
		r, ok := exprs[lead+i].(*tir.VarRef)
		if !ok || fc.kernel[r.V] != v || shape[lead+i] != extent(v) {
			return flatIndex(f, idx, shape)
		}
		inner *= shape[lead+i]
	}
	return f.b.NewAdd(f.b.NewMul(flatIndex(f, idx[:lead], shape[:lead]), i64(inner)), fc.index)
}

func varRefs(vars []*tir.Var) []tir.Expr {
	out := make([]tir.Expr, len(vars))
	for i, v := range vars {
		out[i] = &tir.VarRef{V: v}
	}
	return out
}

func (f *fn) varValues(vars []*tir.Var) []value.Value {
	out := make([]value.Value, len(vars))
	for i, v := range vars {
		out[i] = f.vars[v]
	}
	return out
}

func extents(vars []*tir.Var) []int64 {
	out := make([]int64, len(vars))
	for i, v := range vars {
		out[i] = extent(v)
	}
	return out
}

func (f *fn) smin(a, b value.Value) value.Value {
	return f.b.NewSelect(f.b.NewICmp(enum.IPredSLT, a, b), a, b)
}

func (f *fn) smax(a, b value.Value) value.Value {
	return f.b.NewSelect(f.b.NewICmp(enum.IPredSGT, a, b), a, b)
}

// ceilPos is ⌈x/s⌉ for x > 0, else 0 (s > 0): the first u ≥ 0 with
// s·u ≥ x.
func (f *fn) ceilPos(x value.Value, s int64) value.Value {
	q := f.b.NewSDiv(f.b.NewAdd(x, i64(s-1)), i64(s))
	return f.b.NewSelect(f.b.NewICmp(enum.IPredSGT, x, i64(0)), q, i64(0))
}

// narrowKernel returns the module's kernel for shape s's narrow
// contractions, with microKernel's signature and result: per pair of
// depth values, one vector of the strip (Ap[k·MR + i], both values) times
// the pair's value of B (Bp[k·NR + j]) broadcast over each half, per
// column; the halves are added at the end. The sum is the block's in
// another order, in f32 with fused multiply-adds, added to C in double.
func (m *Module) narrowKernel(s blocking.Shape) *ir.Func {
	fn, p, made := m.gemmKernel(fmt.Sprintf("tofuc.gemm.narrow%dx%d", s.MR, s.Cols), types.Double)
	if !made {
		return fn
	}
	ap, bp, cp, kc, ld, first := p.ap, p.bp, p.c, p.kc, p.ld, p.first
	vec := types.NewVector(uint64(s.VL), types.Float)
	half := types.NewVector(uint64(s.MR), types.Float)
	dhalf := types.NewVector(uint64(s.MR), types.Double)
	fma := m.declare(fmt.Sprintf("llvm.fma.v%df32", s.VL), vec, vec, vec, vec)
	fmaHalf := m.declare(fmt.Sprintf("llvm.fma.v%df32", s.MR), half, half, half, half)
	entry, head, body, tail := fn.NewBlock("entry"), fn.NewBlock("loop"), fn.NewBlock("body"), fn.NewBlock("tail")
	cols := s.Cols
	// pairs is kc rounded down to even: the loop's depth values.
	pairs := entry.NewAnd(kc, i64(-2))
	entry.NewBr(head)
	k := head.NewPhi(ir.NewIncoming(i64(0), entry))
	accs := make([]*ir.InstPhi, cols)
	for j := range accs {
		accs[j] = head.NewPhi(ir.NewIncoming(constant.NewZeroInitializer(vec), entry))
	}
	head.NewCondBr(head.NewICmp(enum.IPredSLT, k, pairs), body, tail)
	load := func(b *ir.Block, t types.Type, p value.Value) value.Value {
		l := b.NewLoad(t, b.NewBitCast(p, types.NewPointer(t)))
		l.Align = 4
		return l
	}
	bAt := func(b *ir.Block, k value.Value, j int64) value.Value {
		return b.NewLoad(types.Float, b.NewGetElementPtr(types.Float, bp, b.NewAdd(b.NewMul(k, i64(s.NR)), i64(j))))
	}
	// The first half of a vector takes lane 0 of x, the second lane 0 of y.
	halves := make([]constant.Constant, s.VL)
	for i := range halves {
		halves[i] = i32(0)
		if int64(i) >= s.MR {
			halves[i] = i32(s.VL)
		}
	}
	halfMask := constant.NewVector(types.NewVector(uint64(s.VL), types.I32), halves...)
	a := load(body, vec, body.NewGetElementPtr(types.Float, ap, body.NewMul(k, i64(s.MR))))
	// A streams from memory once: ask for it 2 KiB ahead (measured
	// better than 1 or 4).
	prefetch := m.declare("llvm.prefetch.p0i8", types.Void, types.I8Ptr, types.I32, types.I32, types.I32)
	ahead := body.NewGetElementPtr(types.Float, ap, body.NewAdd(body.NewMul(k, i64(s.MR)), i64(512)))
	body.NewCall(prefetch, body.NewBitCast(ahead, types.I8Ptr), i32(0), i32(3), i32(1))
	kn := body.NewAdd(k, i64(2))
	for j := range cols {
		b0 := body.NewInsertElement(constant.NewUndef(vec), bAt(body, k, j), i32(0))
		b1 := body.NewInsertElement(constant.NewUndef(vec), bAt(body, body.NewAdd(k, i64(1)), j), i32(0))
		next := body.NewCall(fma, a, body.NewShuffleVector(b0, b1, halfMask), accs[j])
		accs[j].Incs = append(accs[j].Incs, ir.NewIncoming(next, body))
	}
	k.Incs = append(k.Incs, ir.NewIncoming(kn, body))
	body.NewBr(head)
	// The halves added, then an odd last depth value.
	lo := make([]constant.Constant, s.MR)
	hi := make([]constant.Constant, s.MR)
	for i := range lo {
		lo[i], hi[i] = i32(int64(i)), i32(int64(i)+s.MR)
	}
	sums := make([]value.Value, cols)
	for j := range cols {
		sums[j] = tail.NewFAdd(tail.NewShuffleVector(accs[j], constant.NewUndef(vec), constant.NewVector(types.NewVector(uint64(s.MR), types.I32), lo...)),
			tail.NewShuffleVector(accs[j], constant.NewUndef(vec), constant.NewVector(types.NewVector(uint64(s.MR), types.I32), hi...)))
	}
	odd, last := fn.NewBlock("odd"), fn.NewBlock("last")
	tail.NewCondBr(tail.NewICmp(enum.IPredSLT, pairs, kc), odd, last)
	zeros := constant.NewZeroInitializer(types.NewVector(uint64(s.MR), types.I32))
	oddSums := make([]value.Value, cols)
	aOdd := load(odd, half, odd.NewGetElementPtr(types.Float, ap, odd.NewMul(pairs, i64(s.MR))))
	for j := range cols {
		b := odd.NewInsertElement(constant.NewUndef(half), bAt(odd, pairs, j), i32(0))
		oddSums[j] = odd.NewCall(fmaHalf, aOdd, odd.NewShuffleVector(b, constant.NewUndef(half), zeros), sums[j])
	}
	odd.NewBr(last)
	final := make([]value.Value, cols)
	for j := range cols {
		final[j] = last.NewPhi(ir.NewIncoming(sums[j], tail), ir.NewIncoming(oddSums[j], odd))
	}
	// Column j of the tile is C[i·ld + j] for the strip's rows i.
	store, add := fn.NewBlock("store"), fn.NewBlock("add")
	last.NewCondBr(first, store, add)
	for j := range cols {
		for _, b := range []*ir.Block{store, add} {
			wide := b.NewFPExt(final[j], dhalf)
			for i := range s.MR {
				p := b.NewGetElementPtr(types.Double, cp, b.NewAdd(b.NewMul(i64(i), ld), i64(j)))
				var x value.Value = b.NewExtractElement(wide, i32(i))
				if b == add {
					x = b.NewFAdd(b.NewLoad(types.Double, p), x)
				}
				b.NewStore(x, p)
			}
		}
	}
	store.NewRet(nil)
	add.NewRet(nil)
	return fn
}

// gemmParams are the parameters of a GEMM kernel (microKernel's
// signature): a strip of A, a panel of B, C's tile, the block's depth,
// C's row stride, and whether the block is the depth's first.
type gemmParams struct {
	ap, bp, c, kc, ld, first *ir.Param
}

// gemmKernel returns the module's GEMM kernel called name, and made
// true with its parameters when it is new (its body still to write).
func (m *Module) gemmKernel(name string, sum types.Type) (fn *ir.Func, p gemmParams, made bool) {
	if d, ok := m.decls[name]; ok {
		return d, p, false
	}
	fp := types.NewPointer(types.Float)
	p = gemmParams{ap: ir.NewParam("ap", fp), bp: ir.NewParam("bp", fp), c: ir.NewParam("c", types.NewPointer(sum)),
		kc: ir.NewParam("kc", types.I64), ld: ir.NewParam("ld", types.I64), first: ir.NewParam("first", types.I1)}
	fn = m.M.NewFunc(name, types.Void, p.ap, p.bp, p.c, p.kc, p.ld, p.first)
	fn.Linkage = enum.LinkageInternal
	fn.FuncAttrs = append(fn.FuncAttrs, enum.FuncAttrNoUnwind)
	m.decls[name] = fn
	return fn, p, true
}

// microKernel returns the module's micro-kernel for shape s:
// void (float* ap, float* bp, S* c, i64 kc, i64 ld, i1 first)
// computes C[i, j] (=, where first, else +=) Σ_k Ap[k·MR + i] · Bp[k·NR + j] for i < MR, j < NR (one
// packed panel of B), C with row stride ld, summing in f32 in MR × 2 vector registers from zero and
// adding the block's sums to C of type S = sumTypeOf(s) (widened to
// double where S is).
//
// The cold kernel is for a panel's first strip and, where A is packed
// with the weights, for the strips of a block's first panel, which bring
// the panel into L1 and the strip into L2 from further out (a
// convolution's weights packed once, a shared B):
// it prefetches both coldAhead values of the depth ahead of its loads,
// beyond what the hardware's prefetchers follow. The other calls find
// both near and have no prefetches to issue (measured in docs/codegen.md,
// "Cold calls").
func (m *Module) microKernel(s blocking.Shape, cold bool) *ir.Func {
	sumType := sumTypeOf(s)
	name := fmt.Sprintf("tofuc.gemm.micro%dx%d.%s", s.MR, s.NR, sumType.LLString())
	if cold {
		name += ".cold"
	}
	kfn, p, made := m.gemmKernel(name, sumType)
	if !made {
		return kfn
	}
	ap, bp, cp, kc, ld, first := p.ap, p.bp, p.c, p.kc, p.ld, p.first
	vec := types.NewVector(uint64(s.VL), types.Float)
	vp := types.NewPointer(vec)
	dvec := types.NewVector(uint64(s.VL), types.Double)
	fma := m.declare(fmt.Sprintf("llvm.fma.v%df32", s.VL), vec, vec, vec, vec)
	entry := kfn.NewBlock("entry")
	nv := s.NR / s.VL
	cAddr := func(b *ir.Block, i, v int64, vt *types.VectorType) value.Value {
		off := b.NewAdd(b.NewMul(i64(i), ld), i64(v*s.VL))
		return b.NewBitCast(b.NewGetElementPtr(sumType, cp, off), types.NewPointer(vt))
	}
	// Each block of k starts from zero and is added to C at the end:
	// blocked summation, whose rounding error grows with KC plus the
	// number of blocks rather than with the whole depth.
	init := make([]value.Value, s.MR*nv)
	for i := range init {
		init[i] = constant.NewZeroInitializer(vec)
	}
	prefetch := m.declare("llvm.prefetch.p0i8", types.Void, types.I8Ptr, types.I32, types.I32, types.I32)
	zeros := constant.NewZeroInitializer(types.NewVector(uint64(s.VL), types.I32))
	// step is one depth value's products added to accs.
	step := func(body *ir.Block, k value.Value, accs []value.Value) []value.Value {
		var bv []value.Value
		for v := int64(0); v < nv; v++ {
			p := body.NewBitCast(body.NewGetElementPtr(types.Float, bp, body.NewAdd(body.NewMul(k, i64(s.NR)), i64(v*s.VL))), vp)
			l := body.NewLoad(vec, p)
			l.Align = 4
			bv = append(bv, l)
		}
		if cold {
			// One prefetch of the strip per depth value (a line holds
			// the strip's values of two depths or more) and one of the
			// panel per line of its row.
			ahead := body.NewAdd(k, i64(coldAhead))
			at := []value.Value{body.NewGetElementPtr(types.Float, ap, body.NewMul(ahead, i64(s.MR)))}
			floatsPerLine := int64(CacheLine / 4)
			for j := int64(0); j < s.NR; j += floatsPerLine {
				at = append(at, body.NewGetElementPtr(types.Float, bp, body.NewAdd(body.NewMul(ahead, i64(s.NR)), i64(j))))
			}
			for _, p := range at {
				body.NewCall(prefetch, body.NewBitCast(p, types.I8Ptr), i32(0), i32(3), i32(1))
			}
		}
		next := make([]value.Value, len(accs))
		for i := int64(0); i < s.MR; i++ {
			a := body.NewLoad(types.Float, body.NewGetElementPtr(types.Float, ap, body.NewAdd(body.NewMul(k, i64(s.MR)), i64(i))))
			one := body.NewInsertElement(constant.NewUndef(vec), a, i32(0))
			splat := body.NewShuffleVector(one, constant.NewUndef(vec), zeros)
			for v := int64(0); v < nv; v++ {
				j := i*nv + v
				next[j] = body.NewCall(fma, splat, bv[v], accs[j])
			}
		}
		return next
	}
	// The last MR depth values each fetch a row of C's tile, which the
	// end adds to (a block shorter than MR fetches its first kc rows):
	// its misses hide behind those values' products, without the fill
	// buffers filling up at once and without the tile displacing the
	// panel from L1 while the block runs. tail = kc - min(kc, MR).
	perLine := CacheLine / sumSize(sumType)
	tail := entry.NewSub(kc, entry.NewSelect(entry.NewICmp(enum.IPredSLT, kc, i64(s.MR)), kc, i64(s.MR)))
	loops := &fn{m: m, f: kfn, b: entry} // foldN's loops, outside a kernel
	accs := loops.foldN(i64(0), tail, i64(1), init, func(k value.Value, accs []value.Value) []value.Value {
		return step(loops.b, k, accs)
	})
	accs = loops.foldN(tail, kc, i64(1), accs, func(k value.Value, accs []value.Value) []value.Value {
		b := loops.b
		row := b.NewMul(b.NewSub(k, tail), ld)
		for j := int64(0); j < s.NR; j += perLine {
			p := b.NewGetElementPtr(sumType, cp, b.NewAdd(row, i64(j)))
			b.NewCall(prefetch, b.NewBitCast(p, types.I8Ptr), i32(1), i32(3), i32(1))
		}
		return step(b, k, accs)
	})
	// The depth's first block stores C, the others add to it.
	store, add := kfn.NewBlock("store"), kfn.NewBlock("add")
	loops.b.NewCondBr(first, store, add)
	sumVec, align := vec, ir.Align(sumSize(sumType))
	if sumType == types.Double {
		sumVec = dvec
	}
	for i := int64(0); i < s.MR; i++ {
		for v := int64(0); v < nv; v++ {
			sum := func(b *ir.Block) value.Value {
				if sumType == types.Double {
					return b.NewFPExt(accs[i*nv+v], dvec)
				}
				return accs[i*nv+v]
			}
			store.NewStore(sum(store), cAddr(store, i, v, sumVec)).Align = align
			p := cAddr(add, i, v, sumVec)
			c := add.NewLoad(sumVec, p)
			c.Align = align
			add.NewStore(add.NewFAdd(c, sum(add)), p).Align = align
		}
	}
	store.NewRet(nil)
	add.NewRet(nil)
	return kfn
}

// sumTypeOf is the type of s's sums in C: f32 where the blocking says
// the blocks' sums add in f32 (blocking.Shape.F32Sums), else double.
func sumTypeOf(s blocking.Shape) types.Type {
	if s.F32Sums() {
		return types.Float
	}
	return types.Double
}

// sumSize is the size in bytes of a sum of type t (sumTypeOf).
func sumSize(t types.Type) int64 {
	if t == types.Float {
		return 4
	}
	return 8
}
