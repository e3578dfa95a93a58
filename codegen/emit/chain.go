package emit

import (
	"slices"

	"github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/value"

	"tofuc/analysis/schedule"
	"tofuc/codegen/kernel"
	tir "tofuc/lang/ir"
)

// A chained launch (kernel.Kernel.Before, schedule's chain) computes,
// block by block of schedule.ChainChunk rows, those rows of the first
// kernel's output, then the same rows of the second kernel's, which
// reads them. Its function takes the first kernel's buffers, then the
// second's, then the status words; each kernel is lowered by a fn of
// its own sharing the function.

// chainParts returns the fns of the two kernels of f's chained launch,
// over f's buffers (the first kernel's are the first of them).
func (f *fn) chainParts() (first, then *fn) {
	part := func(k *kernel.Kernel, bufs []value.Value) *fn {
		return &fn{m: f.m, k: k, f: f.f, b: f.b, bufs: bufs, status: f.status, vars: map[*tir.Var]value.Value{}, unrolled: 1}
	}
	n := len(f.k.Before.Args)
	return part(f.k.Before, f.bufs[:n]), part(f.k, f.bufs[n:])
}

// ChainBlocks is the number of blocks of rows of a chained launch on the
// host.
func ChainBlocks(k *kernel.Kernel) int64 {
	return ceilDiv(k.ChainRowCount(), schedule.ChainChunk)
}

// ChainGPUBlocks is the number of blocks of rows of a chained launch's
// GPU flavour, chainGPURows rows each.
func ChainGPUBlocks(k *kernel.Kernel) int64 {
	return ceilDiv(k.ChainRowCount(), chainGPURows(k))
}

// chainHost lowers a chained launch on the host: blocks [begin, end),
// each the first kernel's rows then the second's.
func (f *fn) chainHost(begin, end value.Value) {
	first, then := f.chainParts()
	var frees []func()
	// The tasks' buffers are allocated once per call, before the loop.
	first.b = f.b
	firstRows := first.chainRows(f.k.ChainRows, &frees)
	then.b = first.b
	thenRows := then.chainRows(f.k.ChainRows, &frees)
	f.b = then.b
	total := f.k.ChainRowCount()
	f.loop(begin, end, i64(1), func(block value.Value) {
		lo := f.b.NewMul(block, i64(schedule.ChainChunk))
		n := f.smin(i64(schedule.ChainChunk), f.b.NewSub(i64(total), lo))
		first.b = f.b
		firstRows(lo, n)
		then.b = first.b
		thenRows(lo, n)
		f.b = then.b
	})
	first.b, then.b = f.b, f.b // frees add calls, no blocks
	for _, free := range frees {
		free()
	}
}

// chainSide is how a half of a chained launch computes a block of
// rows: a block of its contraction's GEMM along the row or the column
// side, when the launch's rows are exactly that side's variables, else
// element by element.
type chainSide int

const (
	chainByElements chainSide = iota
	chainByRows
	chainByCols
)

// chainSideOf is the chainSide of half k of a chained launch whose rows
// are k's first rows variables.
func chainSideOf(k *kernel.Kernel, rows int) chainSide {
	g := k.GEMM
	switch {
	case g == nil || len(g.Batch) > 0:
		return chainByElements
	case slices.Equal(g.Rows, k.Vars[:rows]):
		return chainByRows
	case slices.Equal(g.Cols, k.Vars[:rows]):
		return chainByCols
	}
	return chainByElements
}

// chainGPURows is the rows a block of a chained launch's GPU flavour
// computes: the most of 128, 64 and 32 that still gives
// kernel.TileLargeMin blocks (as the tiled form's large tiles), else
// schedule.ChainChunk.
func chainGPURows(k *kernel.Kernel) int64 {
	rows := k.ChainRowCount()
	for _, r := range []int64{kernel.TileLarge, kernel.TileLarge / 2} {
		if ceilDiv(rows, r) >= kernel.TileLargeMin {
			return r
		}
	}
	return schedule.ChainChunk
}

// chainAcross is the positions of a chained half's tile across the rows.
const chainAcross = 128

// chainTile is the GPU tile of a half computing a block of r rows as a
// block of its GEMM: r positions along the side of the launch's rows,
// chainAcross along the other, kernel.ThreadsPerBlock threads (8 results
// a thread across for blocks of 128 rows, else 4), the half running as
// the tiles along the other side.
func chainTile(side chainSide, r int64) kernel.Tile {
	across := int64(kernel.TileMicro)
	if r == kernel.TileLarge {
		across = kernel.TileLargeMicro
	}
	threadRows := kernel.ThreadsPerBlock / (chainAcross / across)
	t := kernel.Tile{M: r, N: chainAcross, K: kernel.TileK, MicroM: r / threadRows, MicroN: across, Threads: kernel.ThreadsPerBlock}
	if side == chainByCols {
		t.M, t.N, t.MicroM, t.MicroN = t.N, t.M, t.MicroN, t.MicroM
	}
	return t
}

// chainStages is the tile of each half of chained launch k (zero for a
// half computed element by element) and the shared memory the halves
// share: a stage of each factor, as many values as the larger tile.
func chainStages(k *kernel.Kernel) (tiles [2]kernel.Tile, stage kernel.Tile) {
	r := chainGPURows(k)
	for i, half := range []*kernel.Kernel{k.Before, k} {
		if side := chainSideOf(half, k.ChainRows); side != chainByElements {
			tiles[i] = chainTile(side, r)
			stage.M, stage.N, stage.K = max(stage.M, tiles[i].M), max(stage.N, tiles[i].N), kernel.TileK
		}
	}
	return tiles, stage
}

// ChainShared is the static shared memory of a chained launch's GPU
// flavour: the halves' stages.
func ChainShared(k *kernel.Kernel) int64 {
	if _, stage := chainStages(k); stage.K > 0 {
		return stage.SharedBytes()
	}
	return 0
}

// chainRows returns what computes and stores the n rows from lo of f's
// kernel (its first rows variables): a block of its contraction, where
// the rows are exactly the row or the column variables of its GEMM,
// else element by element. Buffers it allocates are freed by what it
// adds to frees.
func (f *fn) chainRows(rows int, frees *[]func()) func(lo, n value.Value) {
	g := f.k.GEMM
	switch chainSideOf(f.k, rows) {
	case chainByRows:
		s := gemmShapeOf(g, false)
		t, free := f.newGemmTask(g, s, schedule.ChainChunk, s.cols)
		*frees = append(*frees, free)
		return func(lo, n value.Value) { f.gemmBlock(t, lo, n, i64(0), i64(s.cols)) }
	case chainByCols:
		s := gemmShapeOf(g, false)
		t, free := f.newGemmTask(g, s, s.rows, schedule.ChainChunk)
		*frees = append(*frees, free)
		return func(lo, n value.Value) { f.gemmBlock(t, i64(0), i64(s.rows), lo, n) }
	}
	inner := kernel.Product(f.k.Shape[rows:])
	return func(lo, n value.Value) {
		f.loop(f.b.NewMul(lo, i64(inner)), f.b.NewMul(f.b.NewAdd(lo, n), i64(inner)), i64(1), f.element)
	}
}

// chainGPU lowers a chained launch on the GPU: blocks stride over the
// blocks of chainGPURows rows; a half computes the rows as the tiles of
// its GEMM along them (chainTile), else the threads share its elements;
// between the halves a barrier (after which the block sees all of the
// rows, and the halves may reuse the shared stages).
func (f *fn) chainGPU() {
	first, then := f.chainParts()
	tid, ntid := f.sreg("tid.x"), f.sreg("ntid.x")
	total, r := f.k.ChainRowCount(), chainGPURows(f.k)
	tiles, stage := chainStages(f.k)
	var as, bs *ir.Global
	if stage.K > 0 {
		as, bs = f.tileStages(stage, "")
	}
	f.loop(f.sreg("ctaid.x"), i64(ChainGPUBlocks(f.k)), f.sreg("nctaid.x"), func(block value.Value) {
		lo := f.b.NewMul(block, i64(r))
		n := f.smin(i64(r), f.b.NewSub(i64(total), lo))
		for i, g := range []*fn{first, then} {
			if i > 0 {
				f.barrier()
			}
			g.b = f.b
			g.chainHalfGPU(f.k.ChainRows, tiles[i], lo, n, as, bs, tid, ntid)
			f.b = g.b
		}
	})
}

// chainHalfGPU computes rows [lo, lo+n) of a half of a chained launch,
// its first rows variables the launch's rows: the tiles t of its GEMM
// along them, staged through as and bs, or, where t is zero, element by
// element.
func (f *fn) chainHalfGPU(rows int, t kernel.Tile, lo, n value.Value, as, bs *ir.Global, tid, ntid value.Value) {
	if t.K == 0 {
		inner := kernel.Product(f.k.Shape[rows:])
		f.loop(f.b.NewAdd(f.b.NewMul(lo, i64(inner)), tid), f.b.NewMul(f.b.NewAdd(lo, n), i64(inner)), ntid, f.element)
		return
	}
	g := f.k.GEMM
	if chainSideOf(f.k, rows) == chainByRows {
		f.loop(i64(0), i64(tir.Extent(g.Cols)), i64(t.N), func(n0 value.Value) { f.tiledTile(t, as, bs, lo, n0) })
		return
	}
	f.loop(i64(0), i64(tir.Extent(g.Rows)), i64(t.M), func(m0 value.Value) { f.tiledTile(t, as, bs, m0, lo) })
}
