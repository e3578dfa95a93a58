package emit

import (
	"github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/metadata"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"tofuc/codegen/blocking"
	"tofuc/codegen/kernel"
	"tofuc/lang"
	tir "tofuc/lang/ir"
)

// fn lowers one kernel into one function.
type fn struct {
	m      *Module
	k      *kernel.Kernel
	f      *ir.Func
	b      *ir.Block // where the next instruction goes
	bufs   []value.Value
	status value.Value
	vars   map[*tir.Var]value.Value
	// stages are the values of the stages computed so far at the
	// current output element.
	stages []value.Value
	// hoisted holds the reductions a Blocks kernel combined over the
	// block for the current output element.
	hoisted map[*tir.Reduce]value.Value
	smem    *ir.Global
	// rowVals holds the row locals of a Rows kernel computed for the
	// current row; rowBufs points at the buffers of its buffered locals.
	rowVals map[*tir.Def]value.Value
	rowBufs map[*tir.Def]value.Value
	// unrolled is the number of copies of the code being emitted that
	// enclosing unrolled reductions make (1 outside any).
	unrolled int64
	// reassoc: the float sums being emitted may add in any order (the
	// host flavour's sums, reduce).
	reassoc bool
	// unchecked are the checked reads known to be in range in the code
	// being emitted (a run's interior, storeRuns).
	unchecked map[*tir.Access]bool
	// flatCols, when not nil, are the element's last variables with
	// their flat index (a GEMM's epilogue).
	flatCols *flatCols
}

// loop emits for (i = lo; i < hi; i += step) body(i), signed.
func (f *fn) loop(lo, hi, step value.Value, body func(i value.Value)) {
	f.fold(lo, hi, step, nil, func(i, _ value.Value) value.Value {
		body(i)
		return nil
	})
}

// fold emits a loop like loop that carries acc (nil: nothing) from init
// through step, and returns its value after the loop.
func (f *fn) fold(lo, hi, stride, init value.Value, step func(i, acc value.Value) value.Value) value.Value {
	acc, _ := f.foldLoop(lo, hi, stride, init, step)
	return acc
}

// foldLoop is fold that also returns the branch that closes the loop,
// when the body is one block of straight-line code (nil otherwise).
func (f *fn) foldLoop(lo, hi, stride, init value.Value, step func(i, acc value.Value) value.Value) (value.Value, *ir.TermBr) {
	if init == nil {
		_, back := f.foldLoopN(lo, hi, stride, nil, func(i value.Value, _ []value.Value) []value.Value {
			step(i, nil)
			return nil
		})
		return nil, back
	}
	acc, back := f.foldLoopN(lo, hi, stride, []value.Value{init}, func(i value.Value, acc []value.Value) []value.Value {
		return []value.Value{step(i, acc[0])}
	})
	return acc[0], back
}

// foldN is fold carrying several values.
func (f *fn) foldN(lo, hi, stride value.Value, init []value.Value, step func(i value.Value, acc []value.Value) []value.Value) []value.Value {
	acc, _ := f.foldLoopN(lo, hi, stride, init, step)
	return acc
}

// foldLoopN is foldN that also returns the branch that closes the loop,
// when the body is one block of straight-line code (nil otherwise).
func (f *fn) foldLoopN(lo, hi, stride value.Value, init []value.Value, step func(i value.Value, acc []value.Value) []value.Value) ([]value.Value, *ir.TermBr) {
	pre := f.b
	head := f.f.NewBlock("")
	body := f.f.NewBlock("")
	exit := f.f.NewBlock("")
	pre.NewBr(head)
	i := head.NewPhi(ir.NewIncoming(lo, pre))
	acc := make([]value.Value, len(init))
	phis := make([]*ir.InstPhi, len(init))
	for e, v := range init {
		phis[e] = head.NewPhi(ir.NewIncoming(v, pre))
		acc[e] = phis[e]
	}
	head.NewCondBr(head.NewICmp(enum.IPredSLT, i, hi), body, exit)
	f.b = body
	next := step(i, acc)
	inc := f.b.NewAdd(i, stride)
	back := f.b.NewBr(head)
	latch := f.b
	i.Incs = append(i.Incs, ir.NewIncoming(inc, latch))
	for e, p := range phis {
		p.Incs = append(p.Incs, ir.NewIncoming(next[e], latch))
	}
	f.b = exit
	if latch != body {
		back = nil
	}
	return acc, back
}

// vectorLoop emits for (i = lo; i < hi; i++) body(i) whose iterations
// are independent, and on the host asks LLVM to vectorise it with the
// host's vector width when the body is straight-line code. LLVM's cost
// model declines such loops on its own when they compute in double and
// round to f32 between stages, as fused epilogues do (docs/codegen.md).
func (f *fn) vectorLoop(lo, hi value.Value, body func(i value.Value)) {
	_, back := f.foldLoop(lo, hi, i64(1), nil, func(i, _ value.Value) value.Value {
		body(i)
		return nil
	})
	if back != nil && f.m.Flavour == Host {
		back.Metadata = append(back.Metadata, &metadata.Attachment{Name: "llvm.loop", Node: f.m.vectorizeHint()})
	}
}

// nest emits loops over vars (first outermost, each from 0 to its
// extent) carrying acc through step at the innermost level.
func (f *fn) nest(vars []*tir.Var, acc value.Value, step func(acc value.Value) value.Value) value.Value {
	if len(vars) == 0 {
		return step(acc)
	}
	v := vars[0]
	if n := tir.Extent(vars); f.m.Flavour == Host && f.unrolled*n <= unrollLimit {
		// Unrolled, in the same order: a small window (a 3 × 3 pool, a
		// local response normalisation's five channels) leaves the
		// element's code straight-line, so that vectorLoop applies. The
		// limit counts the copies of the body, enclosing unrolled
		// reductions included.
		outer := f.unrolled
		f.unrolled *= extent(v)
		for i := range extent(v) {
			f.vars[v] = i64(i)
			acc = f.nest(vars[1:], acc, step)
		}
		f.unrolled = outer
		return acc
	}
	acc, back := f.foldLoop(i64(0), i64(extent(v)), i64(1), acc, func(i, acc value.Value) value.Value {
		f.vars[v] = i
		return f.nest(vars[1:], acc, step)
	})
	if back != nil && f.reassoc && len(vars) == 1 {
		back.Metadata = append(back.Metadata, &metadata.Attachment{Name: "llvm.loop", Node: f.m.vectorizeHint()})
	}
	return acc
}

// unrollLimit is the most copies of a reduction's body the host flavour
// unrolls into one element's code.
const unrollLimit = 16

func extent(v *tir.Var) int64 {
	n, ok := v.Extent.IsConst()
	if !ok {
		fail("variable %s has a symbolic extent %s", v.Name, v.Extent)
	}
	return n
}

func extents(vars []*tir.Var) []int64 {
	out := make([]int64, len(vars))
	for i, v := range vars {
		out[i] = extent(v)
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

// ifThen emits if cond { then() }.
func (f *fn) ifThen(cond value.Value, then func()) {
	yes := f.f.NewBlock("")
	join := f.f.NewBlock("")
	f.b.NewCondBr(cond, yes, join)
	f.b = yes
	then()
	f.b.NewBr(join)
	f.b = join
}

// ifElse emits if cond { a() } else { b() }.
func (f *fn) ifElse(cond value.Value, a, b func()) {
	yes, no, join := f.f.NewBlock(""), f.f.NewBlock(""), f.f.NewBlock("")
	f.b.NewCondBr(cond, yes, no)
	f.b = yes
	a()
	f.b.NewBr(join)
	f.b = no
	b()
	f.b.NewBr(join)
	f.b = join
}

// branch emits cond ? a() : b() with only the chosen side evaluated; the
// sides return values of one type.
func (f *fn) branch(cond value.Value, a, b func() value.Value) value.Value {
	yes := f.f.NewBlock("")
	no := f.f.NewBlock("")
	join := f.f.NewBlock("")
	f.b.NewCondBr(cond, yes, no)
	f.b = yes
	va := a()
	endA := f.b
	endA.NewBr(join)
	f.b = no
	vb := b()
	endB := f.b
	endB.NewBr(join)
	f.b = join
	return join.NewPhi(ir.NewIncoming(va, endA), ir.NewIncoming(vb, endB))
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

// unflatten binds vars to the coordinates of flat row-major index o.
func (f *fn) unflatten(o value.Value, vars []*tir.Var, shape []int64) {
	for d := len(vars) - 1; d >= 0; d-- {
		if d == 0 {
			f.vars[vars[d]] = o
			break
		}
		f.vars[vars[d]] = f.b.NewURem(o, i64(shape[d]))
		o = f.b.NewUDiv(o, i64(shape[d]))
	}
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

// element computes output element o: the stages in order, then the store.
func (f *fn) element(o value.Value) {
	f.unflatten(o, f.k.Vars, f.k.Shape)
	f.store(f.bufs[len(f.bufs)-1], o, f.computeStages(), f.k.Out().DType)
}

// computeStages evaluates the stages at the bound output index; each is
// rounded to its tensor's dtype, as the interpreter stores it.
func (f *fn) computeStages() value.Value {
	f.stages = f.stages[:0]
	var v value.Value
	for i, d := range f.k.Stages {
		if i > 0 {
			for j, sv := range d.Vars {
				f.vars[sv] = f.vars[f.k.Vars[j]]
			}
		}
		v = f.convert(f.expr(d.Body), d.Body.Type(), d.Tensor.DType, true)
		f.stages = append(f.stages, v)
	}
	return v
}

// sharedSlots defines the kernel's shared array of 32 i64 slots, where
// warps leave their partial reductions.
func (f *fn) sharedSlots() *ir.Global {
	arr := types.NewArray(32, types.I64)
	g := f.m.M.NewGlobalDef(f.f.Name()+".smem", constant.NewUndef(arr))
	g.Linkage = enum.LinkageInternal
	g.AddrSpace = f.m.Machine.Shared()
	g.Typ = nil // recomputed with the address space
	g.Align = 8
	return g
}

// blockReduce combines reduction r over the block: each thread folds a
// strided part of the range, warps combine with butterfly shuffles, and
// every thread combines the warps' partials from shared memory in the
// same order, so all threads hold the same result.
func (f *fn) blockReduce(r *tir.Reduce, tid, ntid value.Value) value.Value {
	n := int64(1)
	for _, v := range r.Vars {
		n *= extent(v)
	}
	shape := make([]int64, len(r.Vars))
	for i, v := range r.Vars {
		shape[i] = extent(v)
	}
	acc := f.fold(tid, i64(n), ntid, f.identity(r.Kind, r.T), func(j, acc value.Value) value.Value {
		f.unflatten(j, r.Vars, shape)
		return f.combine(r.Kind, r.T, acc, f.convert(f.expr(r.Body), r.Body.Type(), r.T, false))
	})
	for off := int64(16); off >= 1; off /= 2 {
		acc = f.combine(r.Kind, r.T, acc, f.shuffleXor(acc, off))
	}
	lane := f.b.NewAnd(tid, i64(31))
	warp := f.b.NewLShr(tid, i64(5))
	f.ifThen(f.b.NewICmp(enum.IPredEQ, lane, i64(0)), func() {
		f.b.NewStore(f.bits(acc), f.smemSlot(warp))
	})
	f.barrier()
	warps := f.b.NewLShr(f.b.NewAdd(ntid, i64(31)), i64(5))
	res := f.fold(i64(0), warps, i64(1), f.identity(r.Kind, r.T), func(w, a value.Value) value.Value {
		return f.combine(r.Kind, r.T, a, f.fromBits(f.b.NewLoad(types.I64, f.smemSlot(w)), r.T))
	})
	f.barrier()
	return f.finishReduce(r.Kind, r.T, res)
}

func (f *fn) smemSlot(i value.Value) value.Value {
	return f.b.NewGetElementPtr(f.smem.ContentType, f.smem, i64(0), i)
}

func (f *fn) barrier() { f.m.Machine.Barrier(f.m, f.b) }

// shuffleXor exchanges a domain value with the lane whose index differs
// in the bits of mask: a float as one 32-bit shuffle, a double or an i64
// as two.
func (f *fn) shuffleXor(x value.Value, mask int64) value.Value {
	if x.Type().Equal(types.Float) {
		s := f.m.Machine.ShuffleXor(f.m, f.b, f.b.NewBitCast(x, types.I32), mask)
		return f.b.NewBitCast(s, types.Float)
	}
	bits := f.bits(x)
	lo := f.b.NewTrunc(bits, types.I32)
	hi := f.b.NewTrunc(f.b.NewLShr(bits, i64(32)), types.I32)
	slo := f.m.Machine.ShuffleXor(f.m, f.b, lo, mask)
	shi := f.m.Machine.ShuffleXor(f.m, f.b, hi, mask)
	out := f.b.NewOr(f.b.NewShl(f.b.NewZExt(shi, types.I64), i64(32)), f.b.NewZExt(slo, types.I64))
	if x.Type().Equal(types.Double) {
		return f.b.NewBitCast(out, types.Double)
	}
	return out
}

// bits is a domain value (double, float or i64) as an i64.
func (f *fn) bits(x value.Value) value.Value {
	switch {
	case x.Type().Equal(types.Double):
		return f.b.NewBitCast(x, types.I64)
	case x.Type().Equal(types.Float):
		return f.b.NewZExt(f.b.NewBitCast(x, types.I32), types.I64)
	}
	return x
}

// fromBits is the domain value of dtype dt whose bits (bits) are x.
func (f *fn) fromBits(x value.Value, dt lang.DType) value.Value {
	switch f.m.domain(dt) {
	case types.Double:
		return f.b.NewBitCast(x, types.Double)
	case types.Float:
		return f.b.NewBitCast(f.b.NewTrunc(x, types.I32), types.Float)
	}
	return x
}

// CacheLine is the size in bytes of a cache line, and of the widest
// vector a kernel loads: the alignment of the plan's buffers (codegen's
// arenas) and of a host kernel's scratch memory, and the unit of the
// host GEMM's padding and prefetches.
const CacheLine = 64

// scratch allocates bytes of host scratch memory (aligned_alloc, at a
// cache line: with malloc's 16 bytes, every vector of a GEMM's double
// sums straddled two lines) as a pointer to elem; freeScratch frees it.
func (f *fn) scratch(bytes int64, elem types.Type) value.Value {
	alloc := f.m.declare("aligned_alloc", types.I8Ptr, types.I64, types.I64)
	if len(alloc.ReturnAttrs) == 0 {
		// Fresh memory: LLVM, given no target triple, does not know
		// aligned_alloc, and would think scratch may alias the buffers.
		alloc.ReturnAttrs = []ir.ReturnAttribute{enum.ReturnAttrNoAlias}
	}
	size := max(1, blocking.CeilDiv(bytes, CacheLine)) * CacheLine // a multiple of the alignment, as C11 asks
	return f.b.NewBitCast(f.b.NewCall(alloc, i64(CacheLine), i64(size)), types.NewPointer(elem))
}

func (f *fn) freeScratch(p value.Value) {
	f.b.NewCall(f.m.declare("free", types.Void, types.I8Ptr), f.b.NewBitCast(p, types.I8Ptr))
}
