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

// Packing the factors of the host GEMM (gemm.go) in f32, each factor's
// lambda evaluated as it is packed (a convolution's im2col costs no
// buffer): B into panels of NR columns, each KC × NR floats contiguous
// (a task's block, or all of B once for the tasks where they share it),
// in runs that copy between zeros where the read allows; A into strips
// of MR rows, depth outermost (per block of rows, or once with the
// weights by a PackOnly kernel), a full strip transposed in registers
// where A is contiguous along the depth.

// packWeights lowers items [begin, end) of a PackOnly kernel: strips of
// A (packStrips), or of B packed with the weights the blocks of a
// shared B (packShared).
func (f *fn) packWeights(begin, end value.Value) {
	if !f.k.GEMM.BPacked {
		f.packStrips(begin, end)
		return
	}
	s := blocking.NewShape(f.k.GEMM)
	out := f.bufs[len(f.bufs)-1]
	f.loop(begin, end, i64(1), func(item value.Value) { f.packShared(out, s, item) })
}

// packStrips packs strips [begin, end) of A for a PackOnly kernel, strip
// after strip: Apk[(strip·depth + k)·MR + i], so that a block of depth
// starting at pc of the strip at row ir begins at ir·depth + pc·MR; where
// A differs between batch indices, strip item of batch index b is item -
// b·strips, packed PackedStrideOf floats after b's (packedStrip).
func (f *fn) packStrips(begin, end value.Value) {
	g := f.k.GEMM
	s := blocking.NewShape(g)
	out := f.bufs[len(f.bufs)-1]
	strips := blocking.StripsOf(g)
	if !g.ReadsBatch(g.A) {
		f.unflatten(i64(0), g.Batch, extents(g.Batch))
	}
	f.loop(begin, end, i64(1), func(item value.Value) {
		strip := item
		if g.ReadsBatch(g.A) {
			f.unflatten(f.b.NewUDiv(item, i64(strips)), g.Batch, extents(g.Batch))
			strip = f.b.NewURem(item, i64(strips))
		}
		ir := f.b.NewMul(strip, i64(s.MR))
		f.packA(g, s, f.packedStrip(out, s, ir, i64(0)), i64(0), i64(s.Depth), ir)
	})
}

// packedStrip is where the block at depth pc of the strip at row ir of
// A packed with the weights begins, for the bound batch index where A
// differs between batch indices.
func (f *fn) packedStrip(packed value.Value, s blocking.Shape, ir, pc value.Value) value.Value {
	g := f.k.GEMM
	var off value.Value = f.b.NewAdd(f.b.NewMul(ir, i64(s.Depth)), f.b.NewMul(pc, i64(s.MR)))
	if g.ReadsBatch(g.A) {
		batch := flatIndex(f, f.varValues(g.Batch), extents(g.Batch))
		off = f.b.NewAdd(off, f.b.NewMul(batch, i64(blocking.PackedStrideOf(g))))
	}
	return f.b.NewGetElementPtr(types.Float, packed, off)
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
		from := f.packPanelsAlongDepth(g, s, bp, panelLen, pc, kc, jc, nc)
		f.forRange(f.b.NewAdd(jc, from), f.b.NewSub(nc, from), g.Cols, func(j value.Value) {
			j = f.b.NewAdd(from, j)
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

// packPanelsAlongDepth packs the whole panels of B's columns [jc,
// jc+nc) for k in [pc, pc+kc), as packB does, where B is one f32 read
// contiguous along its one depth variable, never out of range, with one
// column variable (an input gradient's transposed weights; NR, two
// vectors, is a power of two): each VL values of the depth are NR
// vector loads, one per column, transposed by interleaving
// (transposeRows) into VL rows of the panel; the depth's last kc mod VL
// values one at a time. It returns the
// columns it packed, none where B is no such read. (Element by element,
// a 1,000 × 1,000 transposed weight took 0.3 ms more to pack than the
// same weight read along its columns.)
func (f *fn) packPanelsAlongDepth(g *kernel.GEMM, s blocking.Shape, bp, panelLen, pc, kc, jc, nc value.Value) value.Value {
	if len(g.Cols) != 1 || len(g.K) != 1 {
		return i64(0)
	}
	colVar, kVar := g.Cols[0], g.K[0]
	f.vars[colVar], f.vars[kVar] = jc, pc
	if _, _, ok := f.rowsAlongDepth(g.B, colVar, kVar); !ok {
		return i64(0)
	}
	panels := f.b.NewUDiv(nc, i64(s.NR))
	whole := f.b.NewMul(f.b.NewUDiv(kc, i64(s.VL)), i64(s.VL))
	f.loop(i64(0), panels, i64(1), func(p value.Value) {
		j0 := f.b.NewAdd(jc, f.b.NewMul(p, i64(s.NR)))
		f.vars[colVar], f.vars[kVar] = j0, pc
		first, colStep, _ := f.rowsAlongDepth(g.B, colVar, kVar)
		panel := f.b.NewGetElementPtr(types.Float, bp, f.b.NewMul(p, panelLen))
		f.loop(i64(0), whole, i64(s.VL), func(ks value.Value) {
			f.transposeInto(panel, first, s.NR, colStep, s.VL, ks)
		})
		f.loop(whole, kc, i64(1), func(ks value.Value) {
			f.vars[kVar] = f.b.NewAdd(pc, ks)
			for i := range s.NR {
				f.vars[colVar] = f.b.NewAdd(j0, i64(i))
				f.b.NewStore(f.factorF32(g.B), f.b.NewGetElementPtr(types.Float, panel, f.b.NewAdd(f.b.NewMul(ks, i64(s.NR)), i64(i))))
			}
		})
	})
	return f.b.NewMul(panels, i64(s.NR))
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
	whole := f.b.NewMul(f.b.NewUDiv(kc, i64(s.VL)), i64(s.VL))
	f.loop(i64(0), whole, i64(s.VL), func(ks value.Value) {
		f.transposeInto(ap, first, s.MR, rowStep, s.VL, ks)
	})
	scalar(whole)
}

// transposeInto loads n vectors of vl floats, vector i at depth ks of
// the read first advanced by i·step, and stores them transposed
// (transposeRows) as the n values of each of the vl depths from ks:
// dst[(ks + k)·n + i] = first[i·step + ks + k].
func (f *fn) transposeInto(dst value.Value, first flatRead, n, step, vl int64, ks value.Value) {
	vec := types.NewVector(uint64(vl), types.Float)
	rows := make([]value.Value, n)
	for i := range rows {
		at := f.b.NewAdd(first.flat, f.b.NewAdd(i64(int64(i)*step), ks))
		l := f.b.NewLoad(vec, f.b.NewBitCast(f.b.NewGetElementPtr(types.Float, f.bufs[first.arg], at), types.NewPointer(vec)))
		l.Align = 4
		rows[i] = l
	}
	for t, v := range f.transposeRows(rows) {
		at := f.b.NewAdd(f.b.NewMul(ks, i64(n)), i64(int64(t)*vl))
		st := f.b.NewStore(v, f.b.NewBitCast(f.b.NewGetElementPtr(types.Float, dst, at), types.NewPointer(vec)))
		st.Align = 4
	}
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
// loaded as it is stored; anything else is computed in its domain and
// rounded.
func (f *fn) factorF32(e tir.Expr) value.Value {
	if a, ok := e.(*tir.Access); ok && a.T.DType == lang.F32 {
		if src, found := f.k.Source(a.T); found && src.Arg >= 0 && zeroDefault(a.Default) {
			return f.loadF32(a, src.Arg)
		}
	}
	return f.single(f.exprTo(e, lang.F32))
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
	ptr, inRange, outside := f.f32Place(a, arg)
	read := func() value.Value { return f.b.NewLoad(types.Float, ptr) }
	if inRange == nil {
		return read()
	}
	return f.branch(inRange, read, func() value.Value {
		outside()
		return constant.NewFloat(types.Float, 0)
	})
}

// f32Place is the address of the element of f32 argument arg that
// access a reads, the condition that its index lies inside the buffer
// (nil where it always does), and outside, which records the error of
// an access without a default, to be called where the condition fails.
func (f *fn) f32Place(a *tir.Access, arg int) (ptr, inRange value.Value, outside func()) {
	shape := f.k.Args[arg].Shape
	idx := make([]value.Value, len(a.Index))
	for d, x := range a.Index {
		idx[d] = f.exprTo(x, lang.I64)
	}
	ptr = f.b.NewGetElementPtr(types.Float, f.bufs[arg], flatIndex(f, idx, shape))
	checked, site := f.k.Checked(a)
	return ptr, f.inRange(checked, idx, shape), func() {
		if a.Default == nil {
			f.reportOutOfRange(site, checked, idx, shape)
		}
	}
}
