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
	// CopyAsync starts copying the 4 bytes at src (global memory) to dst
	// (shared memory), both i8 pointers; the copy belongs to the
	// thread's next group.
	CopyAsync(m *Module, b *ir.Block, dst, src value.Value)
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
// and stored after it.
type stagePlan struct {
	lay     stageLayout
	async   [2]bool // A's and B's
	buffers int64   // the stages of an asynchronous factor in shared memory, 1 without one
}

// maxStaticShared is the most static shared memory a kernel may have
// on NVIDIA GPUs (more needs dynamic shared memory).
const maxStaticShared = 48 << 10

// planStages is the stage plan of tiled kernel k laid out as lay: three
// buffers where they fit in maxStaticShared, else two.
func planStages(k *kernel.Kernel, lay stageLayout) stagePlan {
	s := stagePlan{lay: lay, async: [2]bool{asyncFactor(k, k.GEMM.A, lay), asyncFactor(k, k.GEMM.B, lay)}, buffers: 1}
	if s.async[0] || s.async[1] {
		t := blocking.GPUTile(k.GEMM)
		s.buffers = 3
		if s.bytes(t) > maxStaticShared {
			s.buffers = 2
		}
	}
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
// stage of a factor (the values fetchFactor would evaluate, a read of
// an f32 argument: asyncFactor) to shared array sh from value base,
// laid out as lay, rows stride values apart; a value past the side's
// extent or the depth, or outside the buffer, is stored as 0 at once.
func (f *fn) copyFactor(factor tir.Expr, sh *ir.Global, base value.Value, lay stageLayout, side []*tir.Var, n, stride, extentSide int64, s0, k0, tid value.Value, t blocking.Tile) {
	g := f.k.GEMM
	depth := tir.Extent(g.K)
	a := factor.(*tir.Access)
	src, _ := f.k.Source(a.T)
	alongK := f.contiguousAlong(factor, g.K)
	ac := f.m.Machine.(AsyncCopies)
	i8 := func(addrSpace types.AddrSpace) *types.PointerType {
		p := types.NewPointer(types.I8)
		p.AddrSpace = addrSpace
		return p
	}
	for r := int64(0); r < n*t.K/t.Threads; r++ {
		s, kk := f.stageSlot(f.b.NewAdd(tid, i64(r*t.Threads)), n, alongK, t)
		dst := f.b.NewGetElementPtr(sh.ContentType, sh, i64(0), f.b.NewAdd(base, lay.at(f, s, kk, stride)))
		zero := func() { f.b.NewStore(constant.NewFloat(types.Float, 0), dst) }
		gs, gk := f.b.NewAdd(s0, s), f.b.NewAdd(k0, kk)
		inside := f.b.NewAnd(f.b.NewICmp(enum.IPredSLT, gs, i64(extentSide)), f.b.NewICmp(enum.IPredSLT, gk, i64(depth)))
		f.ifElse(inside, func() {
			f.unflatten(gs, side, extents(side))
			f.unflatten(gk, g.K, extents(g.K))
			ptr, inRange, outside := f.f32Place(a, src.Arg)
			start := func() {
				ac.CopyAsync(f.m, f.b, f.b.NewBitCast(dst, i8(f.m.Machine.Shared())), f.b.NewBitCast(ptr, i8(f.m.Machine.Global())))
			}
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
}
