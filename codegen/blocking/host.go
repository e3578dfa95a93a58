package blocking

import (
	"fmt"
	"math"
	"runtime"

	"golang.org/x/sys/cpu"

	"tofuc/codegen/kernel"
	"tofuc/lang/ir"
	"tofuc/lang/precision"
)

// The host flavour of a contraction is a packed, cache-blocked matrix
// product (codegen/emit's gemm, GotoBLAS's structure). Its sizes follow
// one rule (docs/codegen.md): the vector has the host's widest lanes VL
// (16 floats with AVX-512, 8 with AVX, else 4); the micro-kernel keeps
// MR × 2 vectors of C in registers (MR = 8 with AVX-512's 32 registers,
// else 6 of 16) over NR = 2·VL columns; KC = 256 keeps a panel of Bp
// (KC·NR floats, contiguous) in L1 while the strips of a block of MC =
// 240 rows of Ap (L2) pass; a task's columns nc keep Bp (KC·nc floats)
// within 512 KiB of L2, at most 512, dealt out in equal shares of 32
// columns; its rows keep C (rows·nc sums, counted as doubles) within
// 1 MiB of L2; and there are at least four tasks where the shape
// allows, so that every thread has work (Split). Products accumulate in
// f32 with fused multiply-adds within a block of KC, and the blocks'
// sums are added in f32 where there are at most 4 blocks or the
// precision mode computes in f32, else in double (F32Sums): in the exact
// mode a contraction's result differs from the interpreter's (which sums
// in float64) within the reordered-sum tolerance.
const (
	KC         = 256 // values of the depth per block
	MC         = 240 // rows of A packed per block (a multiple of every MR)
	ColQuantum = 32  // columns are dealt out to tasks in quanta of it (Split)
)

const (
	budgetB      = 512 << 10 // bytes of Bp a task keeps
	maxNC        = 512       // a task's most columns
	budgetC      = 1 << 20   // bytes of a task's sums
	budgetShared = 16 << 20  // bytes of B packed for all tasks
	minSharedB   = 64 << 10  // bytes of a batch index's B below which each task packs its own
	f32Blocks    = 4         // blocks of the depth whose sums C may add in f32 (F32Sums)
)

// HostLanes is the number of f32 lanes of the host's widest vectors
// (the GEMM micro-kernel's and the peak probe's, codegen/peak).
func HostLanes() int64 {
	switch {
	case runtime.GOARCH == "amd64" && cpu.X86.HasAVX512F:
		return 16
	case runtime.GOARCH == "amd64" && cpu.X86.HasAVX:
		return 8
	}
	return 4
}

// HostChoices names every choice the blocking makes from the CPU
// features Go detects (GODEBUG=cpu.avx512f=off changes them on the same
// CPU): the vector width, the GEMM's register tile and narrow columns.
// What caches compiled outputs keys on it, with the math library's
// choice of FMA (codegen/mathir.HostHasFMA).
func HostChoices() string {
	mr, nr, narrow := HostTile()
	return fmt.Sprintf("lanes %d tile %d×%d narrow %d", HostLanes(), mr, nr, narrow)
}

// Shape is the host blocking of a contraction kernel: its extents, how
// its work is split into tasks, and this host's register tile.
type Shape struct {
	Rows, Cols, Depth, Batch int64
	Split
	VL, NR, MR int64 // f32 lanes of a vector; the micro-kernel's tile, MR rows by NR columns (HostTile)
}

// NewShape is the blocking of g, sharing B where g has the workspace
// for it (SharedBLen) or B packed with the weights (BPacked).
func NewShape(g *kernel.GEMM) Shape { return shapeOf(g, g.SharedB != nil, g.BPacked) }

// ShapeOf is the blocking of g, sharing B only where share says the
// kernel has the workspace.
func ShapeOf(g *kernel.GEMM, share bool) Shape { return shapeOf(g, share, false) }

// shapeOf is ShapeOf, B always shared and never packed by the kernel
// where packed says it was packed with the weights.
func shapeOf(g *kernel.GEMM, share, packed bool) Shape {
	s := Shape{Rows: ir.Extent(g.Rows), Cols: ir.Extent(g.Cols), Depth: ir.Extent(g.K), Batch: ir.Extent(g.Batch)}
	s.VL = HostLanes()
	s.MR, s.NR, _ = HostTile()
	s.Split = newSplit(s.Rows, s.Cols, s.Depth, s.Batch, s.MR, s.NR, share, packed)
	return s
}

// Split is how a contraction's work is split into tasks: batch
// indices × chunks of rows × chunks of columns, so that tasks take
// equal time and every thread has work.
//
// Columns are dealt out in quanta of ColQuantum (a whole number of any
// host's NR) as evenly as the quanta allow: a task's columns keep a
// packed block of the column factor within budgetB of L2, at most
// maxNC, and several column chunks are a multiple of four where there
// are that many quanta (65–96 columns make three). Rows are dealt out
// in strips of MR as evenly as the strips allow, split where batch and
// columns give fewer than four tasks, and where a task's sums (rows ×
// columns sums, counted as doubles) would not stay within budgetC.
//
// Split rows would each pack the same columns of B, and column chunks
// of unequal panels (196 columns: 1, 2, 2 and 2 panels of 32) leave
// threads waiting; either way B is shared when it fits budgetShared and
// a batch index's B is more than minSharedB (a smaller one, a recurrent
// state of a few rows, each task packs in less time than the wait for
// the items packing it: a stacked LSTM at batch 1 took 1.38–1.56 ms a
// run sharing it, 1.13–1.30 not):
// the kernel's first items pack all of B into a workspace (every batch
// index, every block of the depth, in parallel), and then the tasks
// split columns only as the L2 budget asks and rows into at least
// eight tasks where the strips allow; B is not shared where that would
// leave fewer tasks than splitting columns gave, up to four (rows of a
// few strips).
type Split struct {
	Quanta, ColChunks int64 // column chunk c has quanta [Quanta·c/ColChunks, Quanta·(c+1)/ColChunks)
	Strips, RowChunks int64 // row chunk r has strips [Strips·r/RowChunks, Strips·(r+1)/RowChunks)
	Cols1, Rows1      int64 // the widest chunk's columns and rows
	Shared            bool  // B is packed once for all tasks (SharedBLen)
	PackItems         int64 // items packing B, before the tasks, when shared
}

// newSplit is the split of a contraction's shape; B is shared only
// where share says the kernel has the workspace, and always, without
// items packing it, where packed says it was packed with the weights.
func newSplit(rows, cols, depth, batch, mr, nr int64, share, packed bool) Split {
	b := Split{Quanta: max(1, CeilDiv(cols, ColQuantum)), Strips: max(1, CeilDiv(rows, mr))}
	nc := int64(min(maxNC, max(64, budgetB/(4*KC)/64*64)))
	chunks := CeilDiv(cols, nc)
	if batch < 4 {
		chunks = max(chunks, min(4, CeilDiv(cols, 64)))
	}
	if chunks > 1 {
		chunks = CeilDiv(chunks, 4) * 4
	}
	b.ColChunks = max(1, min(chunks, b.Quanta))
	b.RowChunks = b.rowsFor(rows, cols, batch, 4, 1)
	if packed || share && (b.RowChunks > 1 || !b.evenPanels(cols, nr)) && 4*batch*depth*CeilDiv(cols, nr)*nr <= budgetShared && 4*depth*cols > minSharedB {
		// Shared, unless that leaves fewer tasks than there were, up
		// to four (a few strips of rows cannot make up for the
		// column chunks).
		sb := b
		sb.ColChunks = max(1, min(CeilDiv(cols, nc), b.Quanta))
		sb.RowChunks = sb.rowsFor(rows, cols, batch, 8, 2)
		if sb.RowChunks*sb.ColChunks < min(4, b.RowChunks*b.ColChunks) {
			sb.RowChunks = sb.rowsFor(rows, cols, batch, 8, 1)
		}
		if packed || sb.RowChunks*sb.ColChunks >= min(4, b.RowChunks*b.ColChunks) {
			b = sb
			b.Shared = true
			if !packed {
				b.PackItems = batch * CeilDiv(depth, KC) * b.ColChunks
			}
		}
	}
	b.Cols1 = b.widestCols(cols)
	b.Rows1 = CeilDiv(b.Strips, b.RowChunks) * mr
	return b
}

// widestCols is the widest column chunk's columns.
func (b Split) widestCols(cols int64) int64 {
	return max(1, min(cols, CeilDiv(b.Quanta, b.ColChunks)*ColQuantum))
}

// rowsFor is the number of row chunks: enough for batch × column chunks
// × row chunks to reach tasks where the strips allow (at least
// minStrips each), and for a task's sums to stay within budgetC.
func (b Split) rowsFor(rows, cols, batch, tasks, minStrips int64) int64 {
	byC := CeilDiv(rows*b.widestCols(cols)*8, budgetC)
	n := max(byC, CeilDiv(tasks, max(1, batch*b.ColChunks)))
	return max(1, min(n, b.Strips/minStrips))
}

// evenPanels says whether the column chunks have nearly equal numbers
// of panels (of nr columns): within a quarter of the widest.
func (b Split) evenPanels(cols, nr int64) bool {
	widest, narrowest := int64(0), int64(math.MaxInt64)
	for c := range b.ColChunks {
		lo := min(cols, b.Quanta*c/b.ColChunks*ColQuantum)
		hi := min(cols, b.Quanta*(c+1)/b.ColChunks*ColQuantum)
		panels := CeilDiv(hi-lo, nr)
		widest, narrowest = max(widest, panels), min(narrowest, panels)
	}
	return 4*(widest-narrowest) <= widest
}

// CeilDiv is ⌈a/b⌉ for a ≥ 0 and b > 0.
func CeilDiv(a, b int64) int64 { return (a + b - 1) / b }

// SharedBLen is the length of the workspace into which a contraction
// packs all of B for its tasks (Split), 0 when its tasks pack their
// own blocks: per batch index, the columns in panels of NR, each panel
// the whole depth (Bs[(j/NR)·depth·NR + k·NR + j%NR]).
func SharedBLen(g *kernel.GEMM) int64 {
	s := ShapeOf(g, true)
	if !s.Shared || s.Rows == 0 || s.Cols == 0 {
		return 0
	}
	return s.Batch * s.Depth * CeilDiv(s.Cols, s.NR) * s.NR
}

// PackedBLen is the length of a GEMM's B factor packed with the weights
// (kernel.GEMM.BPacked): SharedBLen's panels, for every batch index
// where B reads a batch variable, else once.
func PackedBLen(g *kernel.GEMM) int64 {
	s := shapeOf(g, true, true)
	n := s.Depth * CeilDiv(s.Cols, s.NR) * s.NR
	if g.ReadsBatch(g.B) {
		n *= s.Batch
	}
	return n
}

// PackedBItems is the host range of the kernel packing a GEMM's B with
// the weights: an item per block of the depth and chunk of columns, of
// every batch index where B reads a batch variable, else of one.
func PackedBItems(g *kernel.GEMM) int64 {
	s := shapeOf(g, true, true)
	n := CeilDiv(s.Depth, KC) * s.ColChunks
	if g.ReadsBatch(g.B) {
		n *= s.Batch
	}
	return n
}

// PackedLen is the length of a GEMM's A factor packed for this host's
// micro-kernel: PackedStrips strips of MR rows, each the whole depth.
func PackedLen(g *kernel.GEMM) int64 {
	s := NewShape(g)
	return PackedStrips(g) * s.MR * s.Depth
}

// PackedStrips is the number of strips of a GEMM's A factor packed for
// this host's micro-kernel: its rows in strips of MR (the last one
// padded, StripsOf), once per batch index where A differs between them
// (a grouped convolution's weights, a stack of recurrent cells' R), else
// once.
func PackedStrips(g *kernel.GEMM) int64 {
	strips := StripsOf(g)
	if g.ReadsBatch(g.A) {
		strips *= NewShape(g).Batch
	}
	return strips
}

// StripsOf is the number of strips of MR rows of one batch index's A.
func StripsOf(g *kernel.GEMM) int64 {
	s := NewShape(g)
	return CeilDiv(s.Rows, s.MR)
}

// PackedStrideOf is the distance between two batch indices' packings of
// a GEMM's A factor where it differs between them.
func PackedStrideOf(g *kernel.GEMM) int64 {
	s := NewShape(g)
	return StripsOf(g) * s.MR * s.Depth
}

// GEMMTasks is the host range of a contraction kernel: the items that
// pack a shared B (all of them run before the rest: GEMMPackItems), then
// its tasks, each a batch index, a block of rows and a block of columns.
func GEMMTasks(g *kernel.GEMM) int64 {
	s := NewShape(g)
	if s.Cols == 0 || s.Rows == 0 {
		return 0
	}
	return s.PackItems + s.Batch*s.RowChunks*s.ColChunks
}

// GEMMPackItems is the number of items at the start of a contraction's
// host range that pack its shared B, 0 when it has none.
func GEMMPackItems(g *kernel.GEMM) int64 {
	if GEMMTasks(g) == 0 {
		return 0
	}
	return NewShape(g).PackItems
}

// maxNarrowCols is the most columns a narrow kernel takes.
const maxNarrowCols = 4

// Narrow reports whether s's contraction has so few columns (a fully
// connected layer at batch 1) that the micro-kernel, whose panel is NR
// columns wide, would compute mostly padding: its strips of A are then
// read as vectors of two depth values of MR rows each (VL = 2·MR, as
// with AVX-512) by the narrow kernel, which streams A at the memory's
// rate.
func (s Shape) Narrow() bool {
	_, _, narrowCols := HostTile()
	return narrowCols > 0 && s.Cols <= narrowCols
}

// HostTile is this host's micro-kernel tile, MR rows by NR columns (two
// vectors of the widest lanes; 8 rows with AVX-512's 32 registers, else
// 6), and the most columns a contraction may have to run the narrow
// kernel instead (where a vector holds two depth values of MR rows, VL =
// 2·MR; 0 elsewhere). The cost model's host topology reads it too.
func HostTile() (mr, nr, narrowCols int64) {
	vl := HostLanes()
	mr = 6
	if vl == 16 {
		mr = 8
	}
	if vl == 2*mr {
		narrowCols = maxNarrowCols
	}
	return mr, 2 * vl, narrowCols
}

// F32Sums reports whether a contraction's sums in C are f32, the
// blocks' f32 sums added in f32: where the depth has at most f32Blocks
// blocks and the kernel is not narrow; they are double otherwise. The
// f32 additions of the blocks add at most f32Blocks-1 roundings to the
// bound of KC a block's own sum has (about 1% more), while C's traffic
// through L2, once per block in each micro-kernel call, and the
// epilogue's reads halve (docs/decisions.md). Where the depth is one
// block, C is that block's sums as they are and every result is the
// same double as with double sums. In a mode that computes in f32
// (precision.Mode.InF32), every depth's sums add in f32, as a BLAS's do.
func (s Shape) F32Sums(p precision.Mode) bool {
	return !s.Narrow() && (p.InF32() || CeilDiv(s.Depth, KC) <= f32Blocks)
}
