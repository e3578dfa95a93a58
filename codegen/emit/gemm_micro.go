package emit

import (
	"fmt"

	"github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"tofuc/codegen/blocking"
)

// The host GEMM's micro-kernels (gemm.go): internal functions of the
// module that multiply a packed strip of A by a packed panel of B in
// registers, in f32 with fused multiply-adds, and store or add the
// block's sums to C's tile: microKernel's MR × NR tile (and its cold
// variant, which prefetches), narrowKernel for contractions of a few
// columns.

// coldAhead is the number of depth values a cold micro-kernel
// prefetches its strip and panel ahead (microKernel).
const coldAhead = 32

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
// adding the block's sums to C of type S = sumTypeOf(s, m.Precision) (widened to
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
	sumType := sumTypeOf(s, m.Precision)
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
