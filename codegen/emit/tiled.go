package emit

import (
	"github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"tofuc/codegen/blocking"
	"tofuc/codegen/kernel"
	tir "tofuc/lang/ir"
	"tofuc/lang/precision"
)

// The tiled form: a contraction with a GEMM description (kernel.GEMM).
// On a GPU a block per tile of the output (blocking.GPUTile), below; on
// the host a packed GEMM (gemm.go), whose calls run its tasks, and a
// kernel packing its A factor with the weights (kernel.Kernel.PackOnly)
// packs strips of it.
type tiledForm struct{}

func (tiledForm) Name() string { return "tiled" }

func (tiledForm) Applies(k *kernel.Kernel, _ precision.Mode) bool { return k.GEMM != nil }

func (tiledForm) Launch(k *kernel.Kernel, p precision.Mode) Launch {
	return tiledLaunch(k, fmaStages(p))
}

// tiledLaunch is the launch of a tiled kernel whose stages lie as l.
func tiledLaunch(k *kernel.Kernel, l stageLayout) Launch {
	t := blocking.GPUTile(k.GEMM)
	s := planStages(k, l)
	return Launch{Grid: min(t.Tiles, maxGrid), Block: t.Threads, Shared: s.bytes(t), DynamicShared: s.dynamic, Sync: true}
}

// stageLayout is how a tiled kernel's stages lie in shared memory: each
// factor's stage as rows of values of type elem (size bytes), each row
// followed by blocking.TilePadBytes, so that the threads of a warp
// reaching along consecutive rows hit different banks. Depth-major (the
// tiled form's): K rows of the side's positions. Side-major (the
// tensor-core forms', whose ldmatrix reads rows of 16 bytes along the
// depth): a row of K depth values per side position.
type stageLayout struct {
	elem      types.Type
	size      int64
	sideMajor bool
	// store is a value of a stage, fetched as an f32, as stored.
	store func(f *fn, x value.Value) value.Value
}

// fmaStages is the tiled form's layout in mode p: depth-major, of
// stageType.
func fmaStages(p precision.Mode) stageLayout {
	st := stageType(p)
	return stageLayout{elem: st, size: stageSize(p), store: func(f *fn, x value.Value) value.Value {
		if st.Equal(x.Type()) {
			return x
		}
		return f.b.NewFPExt(x, st)
	}}
}

// rows is the rows of a factor's stage along a side of n positions,
// stride the values from one row to the next.
func (l stageLayout) rows(t blocking.Tile, n int64) int64 {
	if l.sideMajor {
		return n
	}
	return t.K
}

func (l stageLayout) stride(t blocking.Tile, n int64) int64 {
	if l.sideMajor {
		return t.K + blocking.Pad(l.size)
	}
	return n + blocking.Pad(l.size)
}

// at is the place of side position s and depth kk in a stage whose rows
// are stride values apart.
func (l stageLayout) at(f *fn, s, kk value.Value, stride int64) value.Value {
	if l.sideMajor {
		return f.b.NewAdd(f.b.NewMul(s, i64(stride)), kk)
	}
	return f.b.NewAdd(f.b.NewMul(kk, i64(stride)), s)
}

// stageType is the type of the values of a tiled kernel's stages and
// sums in mode p: double in the exact mode (a product of two floats is
// exact in double, so that every step rounds as the interpreter's
// multiply and add do), float in the modes that compute in f32 (twice
// the FMA rate, half the shared memory and registers).
func stageType(p precision.Mode) *types.FloatType {
	if p.InF32() {
		return types.Float
	}
	return types.Double
}

// stageSize is the size in bytes of a stage's values (stageType).
func stageSize(p precision.Mode) int64 {
	if p.InF32() {
		return 4
	}
	return 8
}

// minSplitFLOPs is the least work of a contraction whose tasks are
// shared among threads: less, one thread does sooner than two threads
// meet (a GRU step at batch 1, hidden 64: 25 kFLOP).
const minSplitFLOPs = 1 << 17

func (tiledForm) HostRange(k *kernel.Kernel) (items, grain int64) {
	switch {
	case k.PackOnly && k.GEMM.BPacked:
		return blocking.PackedBItems(k.GEMM), 1
	case k.PackOnly:
		return blocking.PackedStrips(k.GEMM), 1
	}
	tasks := blocking.GEMMTasks(k.GEMM)
	if s := blocking.NewShape(k.GEMM); 2*s.Batch*s.Rows*s.Cols*s.Depth < minSplitFLOPs {
		return tasks, max(1, tasks)
	}
	return tasks, 1
}

func (tiledForm) GPU(f *Func) { f.f.tiledLoop() }

func (tiledForm) Host(f *Func, begin, end value.Value) {
	if f.f.k.PackOnly {
		f.f.packWeights(begin, end)
		return
	}
	f.f.gemmHost(begin, end)
}

// The GPU flavour of a contraction is a tiled matrix product with
// register blocking (docs/codegen.md, "The tiled form"): tiledStages.

// tiledLoop lowers a tiled kernel (GPU flavour), its products by
// fmaWork.
func (f *fn) tiledLoop() {
	t := blocking.GPUTile(f.k.GEMM)
	f.tiledStages(t, fmaStages(f.m.Precision), func(tid value.Value, sm, sn int64) tileWork {
		tn := t.N / t.MicroN
		// The thread's first position along a side of s positions, in runs
		// of 4 (blocking.Tile): run q starts at base + q·4·threads along
		// the side.
		tx := f.b.NewURem(tid, i64(tn))
		ty := f.b.NewUDiv(tid, i64(tn))
		rowBase, colBase := f.b.NewMul(ty, i64(4)), f.b.NewMul(tx, i64(4))
		return &fmaWork{t: t, sm: sm, sn: sn, rowBase: rowBase, colBase: colBase}
	})
}

// tileWork is how the threads of a tiled kernel's block share a tile's
// products and results.
type tileWork interface {
	// micro is the thread's results: rows × cols of them, its sums held
	// row-major.
	micro() (rows, cols int64)
	// products adds a stage's products (of the stages a and b, rows sm
	// and sn values apart) to the thread's sums.
	products(f *fn, a, b stageRef, acc []value.Value) []value.Value
	// row is the tile row of the thread's i-th row of results, col the
	// tile column of its j-th column.
	row(f *fn, i value.Value) value.Value
	col(f *fn, j int64) value.Value
}

// stageRef is a stage of a factor in shared memory: the values from
// base of the array whose first value sh points to.
type stageRef struct {
	sh   value.Value
	base value.Value
}

// ptr is the address of value i of the stage, as a pointer to t (in
// shared memory).
func (r stageRef) ptr(f *fn, i value.Value, t types.Type) value.Value {
	return f.b.NewBitCast(sharedAt(f, r.sh, f.b.NewAdd(r.base, i)), pointer(t, f.m.Machine.Shared()))
}

// sharedAt is the address of value i of the array whose first value sh
// points to.
func sharedAt(f *fn, sh, i value.Value) value.Value {
	return f.b.NewGetElementPtr(sh.Type().(*types.PointerType).ElemType, sh, i)
}

// stagedFactor is a factor of a tiled kernel as its stages reach
// shared memory.
type stagedFactor struct {
	expr   tir.Expr
	side   []*tir.Var
	n      int64       // the tile's positions along the side
	extent int64       // the output's
	sh     value.Value // its stages' first value
	stride int64       // values from one row of a stage to the next
	values int64       // values of one stage
	async  bool
}

// tiledStages lowers a tiled kernel's GPU flavour, the stages loaded and
// the results stored as below, the stages laid out as lay and reaching
// shared memory as planStages says, the products by the tileWork that
// work returns for the thread tid (rows of the stages sm and sn values
// apart):
//
//	for each tile (batch b, rows [m0, m0+M), columns [n0, n0+N)), blocks striding:
//	  C = 0                                    the thread's sums (stageType)
//	  held = the block's share of stage 0 of the factors staged by registers
//	  start the copies of stages 0 .. S-2 of the asynchronous factors, a group each
//	  for each stage s of K values of the depth, from k0:
//	    As[m, kk], Bs[n, kk] = held            as lay stores them
//	    start the copies of stage s+S-1 into its buffer, (s+S-1) mod S
//	    wait until only the S-1 latest groups are pending: stage s is there
//	    barrier
//	    held = the share of stage s+1          loads in flight during the products
//	    C += the stage's products (tileWork)   from buffer s mod S
//	    barrier
//	  epilogue, a loop over the thread's rows, its columns unrolled: each
//	  result inside the output: its stages with the sum replaced by C[i,j],
//	  stored
//
// with S the buffers of an asynchronous factor. Every thread of a block
// runs the same trip counts (tiles, stages, rows of the epilogue), so
// the barriers are uniform, and commits a group at every stage, empty
// past the depth, so that its waits count alike: edge tiles and the
// stages past the depth are padded by predicated loads (zero) and
// stores, never by an early exit.
func (f *fn) tiledStages(t blocking.Tile, lay stageLayout, work func(tid value.Value, sm, sn int64) tileWork) {
	g := f.k.GEMM
	rows, cols, depth := tir.Extent(g.Rows), tir.Extent(g.Cols), tir.Extent(g.K)
	st := stageType(f.m.Precision) // of the sums
	plan := planStages(f.k, lay)
	factors := [2]*stagedFactor{
		{expr: g.A, side: g.Rows, n: t.M, extent: rows, stride: lay.stride(t, t.M), values: plan.stageValues(t, t.M), async: plan.async[0]},
		{expr: g.B, side: g.Cols, n: t.N, extent: cols, stride: lay.stride(t, t.N), values: plan.stageValues(t, t.N), async: plan.async[1]},
	}
	f.sharedStages(plan, factors)
	tid := f.reg(ThreadIndex)
	w := work(tid, factors[0].stride, factors[1].stride)
	microM, microN := w.micro()
	nacc := int(microM * microN)
	perBatch := t.RowTiles * t.ColTiles
	f.loop(f.reg(BlockIndex), i64(t.Tiles), f.reg(GridBlocks), func(tile value.Value) {
		f.unflatten(f.b.NewUDiv(tile, i64(perBatch)), g.Batch, extents(g.Batch))
		rest := f.b.NewURem(tile, i64(perBatch))
		m0 := f.b.NewMul(f.b.NewUDiv(rest, i64(t.ColTiles)), i64(t.M))
		n0 := f.b.NewMul(f.b.NewURem(rest, i64(t.ColTiles)), i64(t.N))
		s0 := [2]value.Value{m0, n0}
		fetch := func(k0 value.Value) []value.Value {
			var held []value.Value
			for i, x := range factors {
				if !x.async {
					held = append(held, f.fetchFactor(x.expr, x.side, x.n, x.extent, s0[i], k0, tid, t)...)
				}
			}
			return held
		}
		// start starts the copies of the stage from k0 into buffer buf
		// where k0 is inside the depth, and commits them as a group.
		start := func(k0, buf value.Value) {
			f.ifThen(f.b.NewICmp(enum.IPredSLT, k0, i64(depth)), func() {
				for i, x := range factors {
					if x.async {
						f.copyFactor(x.expr, x.sh, f.b.NewMul(buf, i64(x.values)), lay, x.side, x.n, x.stride, x.extent, s0[i], k0, tid, t)
					}
				}
			})
			f.m.Machine.(AsyncCopies).Commit(f.m, f.b)
		}
		async := plan.buffers > 1
		if async {
			for s := int64(0); s < plan.buffers-1; s++ {
				start(i64(s*t.K), i64(s))
			}
		}
		init := make([]value.Value, nacc)
		for e := range init {
			init[e] = constant.NewFloat(st, 0)
		}
		init = append(init, fetch(i64(0))...)
		out := f.foldN(i64(0), i64(depth), i64(t.K), init, func(k0 value.Value, c []value.Value) []value.Value {
			acc, held := c[:nacc], c[nacc:]
			stage := f.b.NewUDiv(k0, i64(t.K))
			for _, x := range factors {
				if !x.async {
					na := int(x.n * t.K / t.Threads)
					f.putFactor(x.expr, held[:na], x.sh, lay, x.n, x.stride, tid, t)
					held = held[na:]
				}
			}
			var buf value.Value = i64(0)
			if async {
				ahead := f.b.NewAdd(stage, i64(plan.buffers-1))
				start(f.b.NewMul(ahead, i64(t.K)), f.b.NewURem(ahead, i64(plan.buffers)))
				f.m.Machine.(AsyncCopies).Wait(f.m, f.b, plan.buffers-1)
				buf = f.b.NewURem(stage, i64(plan.buffers))
			}
			f.barrier()
			next := fetch(f.b.NewAdd(k0, i64(t.K)))
			var refs [2]stageRef
			for i, x := range factors {
				refs[i] = stageRef{sh: x.sh, base: i64(0)}
				if x.async {
					refs[i].base = f.b.NewMul(buf, i64(x.values))
				}
			}
			acc = w.products(f, refs[0], refs[1], acc)
			f.barrier()
			return append(acc, next...)
		})
		acc := out[:nacc]
		// Epilogue: a loop over the thread's rows (the row's results picked
		// by selects, not by a dynamic index, which would put the
		// accumulators in local memory), its columns unrolled, so that
		// the stages are emitted microN times.
		f.loop(i64(0), i64(microM), i64(1), func(i value.Value) {
			gm := f.b.NewAdd(m0, w.row(f, i))
			rowInside := f.b.NewICmp(enum.IPredSLT, gm, i64(rows))
			is := make([]value.Value, microM)
			for r := int64(1); r < microM; r++ {
				is[r] = f.b.NewICmp(enum.IPredEQ, i, i64(r))
			}
			for j := int64(0); j < microN; j++ {
				v := acc[j]
				for r := int64(1); r < microM; r++ {
					v = f.b.NewSelect(is[r], acc[r*microN+j], v)
				}
				gn := f.b.NewAdd(n0, w.col(f, j))
				inside := f.b.NewAnd(rowInside, f.b.NewICmp(enum.IPredSLT, gn, i64(cols)))
				f.ifThen(inside, func() {
					f.unflatten(gm, g.Rows, extents(g.Rows))
					f.unflatten(gn, g.Cols, extents(g.Cols))
					f.hoisted = map[*tir.Reduce]value.Value{g.Sum: f.toDomain(v, g.Sum.T)}
					out := flatIndex(f, f.varValues(f.k.Vars), f.k.Shape)
					f.store(f.bufs[len(f.bufs)-1], out, f.computeStages(), f.k.Out().DType)
					f.hoisted = nil
				})
			}
		})
	})
}

// fmaWork is the tiled form's products on the threads' own FMAs: a
// thread owns MicroM × MicroN results, in runs of 4 along each side
// from rowBase and colBase, 4·threads apart:
//
//	for kk < K: a = As[kk·(M+p) + rows of the thread], b = Bs[kk·(N+p) + its columns]
//	            C[i,j] = fma(a[i], b[j], C[i,j])      16-byte shared loads
type fmaWork struct {
	t                blocking.Tile
	sm, sn           int64
	rowBase, colBase value.Value
}

func (w *fmaWork) micro() (rows, cols int64) { return w.t.MicroM, w.t.MicroN }

func (w *fmaWork) products(f *fn, as, bs stageRef, acc []value.Value) []value.Value {
	t := w.t
	tn, tm := t.N/t.MicroN, t.M/t.MicroM
	fma := f.fma(stageType(f.m.Precision))
	return f.foldN(i64(0), i64(t.K), i64(1), acc, func(kk value.Value, acc []value.Value) []value.Value {
		a := f.sharedRuns(as, f.b.NewAdd(f.b.NewMul(kk, i64(w.sm)), w.rowBase), t.MicroM, tm)
		b := f.sharedRuns(bs, f.b.NewAdd(f.b.NewMul(kk, i64(w.sn)), w.colBase), t.MicroN, tn)
		next := make([]value.Value, len(acc))
		for i := range a {
			for j := range b {
				e := i*len(b) + j
				next[e] = f.b.NewCall(fma, a[i], b[j], acc[e])
			}
		}
		return next
	})
}

func (w *fmaWork) row(f *fn, i value.Value) value.Value {
	tm := w.t.M / w.t.MicroM
	return f.b.NewAdd(w.rowBase, f.b.NewAdd(f.b.NewMul(f.b.NewUDiv(i, i64(4)), i64(4*tm)), f.b.NewURem(i, i64(4))))
}

func (w *fmaWork) col(f *fn, j int64) value.Value {
	tn := w.t.N / w.t.MicroN
	return f.b.NewAdd(w.colBase, i64(j/4*4*tn+j%4))
}

// stageSlot is the side index s and depth index kk of the e-th value of
// a stage of a factor along a side of n positions: consecutive values
// run along the factor's contiguous direction.
func (f *fn) stageSlot(e value.Value, n int64, alongK bool, t blocking.Tile) (s, kk value.Value) {
	if alongK {
		return f.b.NewUDiv(e, i64(t.K)), f.b.NewURem(e, i64(t.K))
	}
	return f.b.NewURem(e, i64(n)), f.b.NewUDiv(e, i64(n))
}

// fetchFactor evaluates the thread's share of a stage of a factor: the
// values e = tid + r·Threads (r < n·K/Threads) of side indices [s0,
// s0+n) and depth [k0, k0+K), in f32, zero past the side's extent or
// the depth (the lambda not evaluated). The values are only held, not
// used, so their loads are all in flight together. The batch variables
// are bound.
func (f *fn) fetchFactor(factor tir.Expr, side []*tir.Var, n, extentSide int64, s0, k0, tid value.Value, t blocking.Tile) []value.Value {
	g := f.k.GEMM
	depth := tir.Extent(g.K)
	alongK := f.contiguousAlong(factor, g.K)
	out := make([]value.Value, n*t.K/t.Threads)
	for r := range out {
		s, kk := f.stageSlot(f.b.NewAdd(tid, i64(int64(r)*t.Threads)), n, alongK, t)
		gs, gk := f.b.NewAdd(s0, s), f.b.NewAdd(k0, kk)
		inside := f.b.NewAnd(f.b.NewICmp(enum.IPredSLT, gs, i64(extentSide)), f.b.NewICmp(enum.IPredSLT, gk, i64(depth)))
		out[r] = f.branch(inside, func() value.Value {
			f.unflatten(gs, side, extents(side))
			f.unflatten(gk, g.K, extents(g.K))
			return f.factorF32(factor)
		}, func() value.Value { return constant.NewFloat(types.Float, 0) })
	}
	return out
}

// putFactor stores the values fetchFactor held into the stage whose
// first value sh points to, laid out as lay, its rows stride values
// apart.
func (f *fn) putFactor(factor tir.Expr, held []value.Value, sh value.Value, lay stageLayout, n, stride int64, tid value.Value, t blocking.Tile) {
	alongK := f.contiguousAlong(factor, f.k.GEMM.K)
	for r, v := range held {
		s, kk := f.stageSlot(f.b.NewAdd(tid, i64(int64(r)*t.Threads)), n, alongK, t)
		f.b.NewStore(lay.store(f, v), sharedAt(f, sh, lay.at(f, s, kk, stride)))
	}
}

// sharedStages gives each factor the shared memory of its stages: a
// static array each, or, where the plan's memory is dynamic, A's from
// the start of the kernel's dynamic shared memory and B's after it.
func (f *fn) sharedStages(plan stagePlan, factors [2]*stagedFactor) {
	elem := pointer(plan.lay.elem, f.m.Machine.Shared())
	if !plan.dynamic {
		for i, name := range []string{"as", "bs"} {
			arr := types.NewArray(uint64(factors[i].values*plan.buffersOf(i)), plan.lay.elem)
			g := f.sharedGlobal(name, arr, constant.NewUndef(arr))
			factors[i].sh = f.b.NewBitCast(g, elem)
		}
		return
	}
	bytes := types.NewArray(0, types.I8)
	dyn := f.sharedGlobal("dyn", bytes, nil)
	offset := int64(0)
	for i, x := range factors {
		x.sh = f.b.NewBitCast(f.b.NewGetElementPtr(bytes, dyn, i64(0), i64(offset)), elem)
		offset += x.values * plan.buffersOf(i) * plan.lay.size
	}
}

// sharedGlobal is a shared-memory global of the kernel named after it,
// 16-byte aligned: internal, of value init, or, without one, external
// (dynamic shared memory, named with an underscore: an external name is
// a PTX identifier as it is).
func (f *fn) sharedGlobal(name string, t types.Type, init constant.Constant) *ir.Global {
	var g *ir.Global
	if init == nil {
		g = f.m.M.NewGlobal(f.f.Name()+"_"+name, t)
		g.Linkage = enum.LinkageExternal
	} else {
		g = f.m.M.NewGlobalDef(f.f.Name()+"."+name, init)
		g.Linkage = enum.LinkageInternal
	}
	g.AddrSpace = f.m.Machine.Shared()
	g.Typ = nil // recomputed with the address space
	g.Align = 16
	return g
}

// sharedRuns loads a thread's micro values of a stage: the micro/4
// runs of 4 values at base + q·4·threads, in 16-byte vector loads (two
// of two doubles, or one of four floats; base is a multiple of 4).
func (f *fn) sharedRuns(stage stageRef, base value.Value, micro, threads int64) []value.Value {
	elem := stage.sh.Type().(*types.PointerType).ElemType
	lanes := int64(2)
	if elem.Equal(types.Float) {
		lanes = 4
	}
	vec := types.NewVector(uint64(lanes), elem)
	var out []value.Value
	for q := int64(0); q < micro/4; q++ {
		for h := int64(0); h < 4/lanes; h++ {
			ld := f.b.NewLoad(vec, stage.ptr(f, f.b.NewAdd(base, i64(q*4*threads+lanes*h)), vec))
			ld.Align = 16
			for l := int64(0); l < lanes; l++ {
				out = append(out, f.b.NewExtractElement(ld, i32(l)))
			}
		}
	}
	return out
}

// fma is llvm.fma of type t (double or float), declared once per module:
// codegen/mathir may have declared it already.
func (f *fn) fma(t *types.FloatType) *ir.Func {
	name := "llvm.fma.f64"
	if t.Equal(types.Float) {
		name = "llvm.fma.f32"
	}
	for _, d := range f.m.M.Funcs {
		if d.Name() == name {
			return d
		}
	}
	return f.m.declare(name, t, t, t, t)
}
