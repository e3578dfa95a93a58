package emit

import (
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

// AsyncCopies is a Machine whose threads copy global memory to shared
// memory asynchronously (cp.async), in groups that a thread commits and
// waits for; the tiled forms stage their plain factors so.
type AsyncCopies interface {
	// CopyAsync starts copying the bytes (4 or 16; 16 from and to
	// 16-byte boundaries) at src (global memory) to dst (shared memory),
	// both i8 pointers; the copy belongs to the thread's next group.
	CopyAsync(m *Module, b *ir.Block, dst, src value.Value, bytes int)
	// Commit closes the thread's group of the copies started since the
	// last one (an empty group where there were none).
	Commit(m *Module, b *ir.Block)
	// Wait waits until at most pending of the thread's committed groups
	// are incomplete, the copies of every earlier group done. The other
	// threads see them after a barrier.
	Wait(m *Module, b *ir.Block, pending int64)
}

// stagePlan is how a tiled kernel's stages reach shared memory: each
// factor laid out as lay, a factor that is a plain read of an f32
// buffer (asyncFactor) copied there asynchronously, buffers stages
// ahead, the others fetched into registers during a stage's products
// and stored after it; above maxStaticShared the memory is dynamic.
type stagePlan struct {
	lay     stageLayout
	async   [2]bool // A's and B's
	buffers int64   // the stages of an asynchronous factor in shared memory, 1 without one
	dynamic bool
}

// maxStaticShared is the most static shared memory a kernel may have
// on NVIDIA GPUs (more is dynamic, which a kernel opts in to).
// maxStageShared is the most a tiled kernel's stages take: two blocks
// fit a multiprocessor of an A100 (164 KB) or an H100 (228 KB).
// maxBuffers is the deepest pipeline of asynchronous stages.
const (
	maxStaticShared = 48 << 10
	maxStageShared  = 80 << 10
	maxBuffers      = 4
)

// planStages is the stage plan of tiled kernel k laid out as lay: the
// most buffers, up to maxBuffers, whose stages fit in maxStageShared,
// at least two.
func planStages(k *kernel.Kernel, lay stageLayout) stagePlan {
	s := stagePlan{lay: lay, async: [2]bool{asyncFactor(k, k.GEMM.A, lay), asyncFactor(k, k.GEMM.B, lay)}, buffers: 1}
	t := blocking.GPUTile(k.GEMM)
	if s.async[0] || s.async[1] {
		for s.buffers = maxBuffers; s.buffers > 2 && s.bytes(t) > maxStageShared; s.buffers-- {
		}
	}
	s.dynamic = s.bytes(t) > maxStaticShared
	return s
}

// asyncFactor says a factor of tiled kernel k can be copied to shared
// memory as it is: a read of an f32 argument with a zero default, its
// stages f32 (the f32 and tf32 modes).
func asyncFactor(k *kernel.Kernel, factor tir.Expr, lay stageLayout) bool {
	a, ok := factor.(*tir.Access)
	if !ok || a.T.DType != lang.F32 || !lay.elem.Equal(types.Float) || !zeroDefault(a.Default) {
		return false
	}
	src, found := k.Source(a.T)
	return found && src.Arg >= 0
}

// stageValues is the values of one stage of a factor along a side of n
// positions.
func (s stagePlan) stageValues(t blocking.Tile, n int64) int64 {
	return s.lay.rows(t, n) * s.lay.stride(t, n)
}

// buffersOf is the stages of factor i (0 A, 1 B) in shared memory.
func (s stagePlan) buffersOf(i int) int64 {
	if s.async[i] {
		return s.buffers
	}
	return 1
}

// bytes is the shared memory of a tile's stages of both factors.
func (s stagePlan) bytes(t blocking.Tile) int64 {
	return s.lay.size * (s.buffersOf(0)*s.stageValues(t, t.M) + s.buffersOf(1)*s.stageValues(t, t.N))
}

// copyFactor starts the asynchronous copies of the thread's share of a
// stage of a factor (a read of an f32 argument: asyncFactor) to the
// shared array whose first value sh points to, from value base, laid
// out as lay, rows stride values apart.
// Where the factor's contiguous direction is the stage's rows' (a
// side-major stage of a factor contiguous along the depth, a
// depth-major one of a factor contiguous along the side), the thread
// takes groups of 4 consecutive values, each one 16-byte copy where
// its 4 elements lie inside and are consecutive in memory from a
// 16-byte boundary (checked as it runs: the index arithmetic is the
// lambda's), else 4 copies of 4 bytes; otherwise single values, as
// fetchFactor takes them. A value past the side's extent or the depth,
// or outside the buffer, is stored as 0 at once.
func (f *fn) copyFactor(factor tir.Expr, sh value.Value, base value.Value, lay stageLayout, side []*tir.Var, n, stride, extentSide int64, s0, k0, tid value.Value, t blocking.Tile) {
	g := f.k.GEMM
	depth := tir.Extent(g.K)
	a := factor.(*tir.Access)
	src, _ := f.k.Source(a.T)
	alongK := f.contiguousAlong(factor, g.K)
	ac := f.m.Machine.(AsyncCopies)
	shared, global := pointer(types.I8, f.m.Machine.Shared()), pointer(types.I8, f.m.Machine.Global())
	// element is the stage's e-th value: its place in the stage, whether
	// it lies inside the side and the depth, and binds its variables.
	type element struct {
		dst, inside value.Value
		bind        func()
	}
	at := func(e value.Value) element {
		s, kk := f.stageSlot(e, n, alongK, t)
		gs, gk := f.b.NewAdd(s0, s), f.b.NewAdd(k0, kk)
		return element{
			dst:    sharedAt(f, sh, f.b.NewAdd(base, lay.at(f, s, kk, stride))),
			inside: f.b.NewAnd(f.b.NewICmp(enum.IPredSLT, gs, i64(extentSide)), f.b.NewICmp(enum.IPredSLT, gk, i64(depth))),
			bind: func() {
				f.unflatten(gs, side, extents(side))
				f.unflatten(gk, g.K, extents(g.K))
			},
		}
	}
	single := func(x element) {
		zero := func() { f.b.NewStore(constant.NewFloat(types.Float, 0), x.dst) }
		f.ifElse(x.inside, func() {
			x.bind()
			ptr, inRange, outside := f.f32Place(a, src.Arg)
			start := func() { ac.CopyAsync(f.m, f.b, f.b.NewBitCast(x.dst, shared), f.b.NewBitCast(ptr, global), 4) }
			if inRange == nil {
				start()
				return
			}
			f.ifElse(inRange, start, func() {
				outside()
				zero()
			})
		}, zero)
	}
	per := n * t.K / t.Threads
	if alongK != lay.sideMajor || per%4 != 0 {
		for r := int64(0); r < per; r++ {
			single(at(f.b.NewAdd(tid, i64(r*t.Threads))))
		}
		return
	}
	for r := int64(0); r < per/4; r++ {
		first := f.b.NewMul(f.b.NewAdd(tid, i64(r*t.Threads)), i64(4))
		var group [4]element
		for j := range group {
			group[j] = at(f.b.NewAdd(first, i64(int64(j))))
		}
		singles := func() {
			for _, x := range group {
				single(x)
			}
		}
		// The 4 run along one dimension: the last inside, all are.
		f.ifElse(group[3].inside, func() {
			var whole, start value.Value
			for j, x := range group {
				x.bind()
				ptr, inRange, _ := f.f32Place(a, src.Arg)
				addr := f.b.NewPtrToInt(ptr, types.I64)
				if j == 0 {
					start = addr
					whole = f.b.NewICmp(enum.IPredEQ, f.b.NewAnd(addr, i64(15)), i64(0))
				} else {
					whole = f.b.NewAnd(whole, f.b.NewICmp(enum.IPredEQ, addr, f.b.NewAdd(start, i64(int64(4*j)))))
				}
				if inRange != nil {
					whole = f.b.NewAnd(whole, inRange)
				}
			}
			f.ifElse(whole, func() {
				ac.CopyAsync(f.m, f.b, f.b.NewBitCast(group[0].dst, shared), f.b.NewIntToPtr(start, global), 16)
			}, singles)
		}, singles)
	}
}
