package emit

import (
	"github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"tofuc/codegen/blocking"
	"tofuc/codegen/kernel"
	"tofuc/lang/precision"
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
//
// This file is the tasks' and blocks' structure (gemmHost, gemmTask,
// gemmBlock) and their buffers; packing the factors is gemm_pack.go's,
// the micro-kernels gemm_micro.go's and the epilogue gemm_epilogue.go's.

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
	sumType := sumTypeOf(s, f.m.Precision)
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
					return f.packedStrip(t.packed, s, ir, pc)
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
// multiple of NR) begins in the shared B of the bound batch index (B
// packed with the weights once for all batch indices where it reads
// none).
func (f *fn) sharedBlock(shared value.Value, s blocking.Shape, pc, jc value.Value) value.Value {
	g := f.k.GEMM
	colsPad := blocking.CeilDiv(s.Cols, s.NR) * s.NR
	var off value.Value = i64(0)
	if !g.BPacked || g.ReadsBatch(g.B) {
		batch := flatIndex(f, f.varValues(g.Batch), extents(g.Batch))
		off = f.b.NewMul(batch, i64(s.Depth*colsPad))
	}
	off = f.b.NewAdd(off, f.b.NewMul(f.b.NewUDiv(jc, i64(s.NR)), i64(s.Depth*s.NR)))
	off = f.b.NewAdd(off, f.b.NewMul(pc, i64(s.NR)))
	return f.b.NewGetElementPtr(types.Float, shared, off)
}

// sumTypeOf is the type of s's sums in C in precision mode p: f32 where
// the blocking says the blocks' sums add in f32 (blocking.Shape.F32Sums),
// else double.
func sumTypeOf(s blocking.Shape, p precision.Mode) types.Type {
	if s.F32Sums(p) {
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
