package emit

import (
	"slices"

	"github.com/llir/llvm/ir/value"

	"tofuc/analysis/schedule"
	"tofuc/codegen/blocking"
	"tofuc/codegen/kernel"
	tir "tofuc/lang/ir"
	"tofuc/lang/precision"
)

// A chained launch (kernel.Kernel.Before, schedule's chain) computes,
// block by block of schedule.ChainChunk rows, those rows of the first
// kernel's output, then the same rows of the second kernel's, which
// reads them. Its function takes the first kernel's buffers, then the
// second's, then the status words; each kernel is lowered by a fn of
// its own sharing the function. Only the host runs it: its GPU flavour
// does nothing, and a GPU runs the two kernels as launches of their own
// (kernel.Kernel.GPUOnly).

// The chain form is a chained launch: it applies to a kernel with
// Before, and sizes the host's calls in blocks of rows.
type chainForm struct{}

func (chainForm) Name() string { return "chain" }

func (chainForm) Applies(k *kernel.Kernel, _ precision.Mode) bool { return k.Before != nil }

// Launch is none: a GPU runs the two kernels (GPUOnly).
func (chainForm) Launch(*kernel.Kernel, precision.Mode) Launch { return Launch{} }

func (chainForm) HostRange(k *kernel.Kernel) (items, grain int64) { return chainBlocks(k), 1 }

// GPU is never called: a chained launch is host-only.
func (chainForm) GPU(*Func) {}

func (chainForm) Host(f *Func, begin, end value.Value) { f.f.chainHost(begin, end) }

// chainParts returns the fns of the two kernels of f's chained launch,
// over f's buffers (the first kernel's are the first of them).
func (f *fn) chainParts() (first, then *fn) {
	part := func(k *kernel.Kernel, bufs []value.Value) *fn {
		return &fn{m: f.m, k: k, f: f.f, b: f.b, bufs: bufs, status: f.status, vars: map[*tir.Var]value.Value{}, unrolled: 1}
	}
	n := len(f.k.Before.Args)
	return part(f.k.Before, f.bufs[:n]), part(f.k, f.bufs[n:])
}

// chainBlocks is the number of blocks of rows of a chained launch.
func chainBlocks(k *kernel.Kernel) int64 {
	return blocking.CeilDiv(k.ChainRowCount(), schedule.ChainChunk)
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

// chainRows returns what computes and stores the n rows from lo of f's
// kernel (its first rows variables): a block of its contraction, where
// the rows are exactly the row or the column variables of its GEMM,
// else element by element. Buffers it allocates are freed by what it
// adds to frees.
func (f *fn) chainRows(rows int, frees *[]func()) func(lo, n value.Value) {
	g := f.k.GEMM
	inner := kernel.Product(f.k.Shape[rows:])
	elements := func(lo, n value.Value) {
		f.loop(f.b.NewMul(lo, i64(inner)), f.b.NewMul(f.b.NewAdd(lo, n), i64(inner)), i64(1), f.element)
	}
	if g == nil || len(g.Batch) > 0 {
		return elements
	}
	s := blocking.ShapeOf(g, false)
	switch {
	case slices.Equal(g.Rows, f.k.Vars[:rows]):
		t, free := f.newGemmTask(g, s, schedule.ChainChunk, s.Cols)
		*frees = append(*frees, free)
		return func(lo, n value.Value) { f.gemmBlock(t, lo, n, i64(0), i64(s.Cols)) }
	case slices.Equal(g.Cols, f.k.Vars[:rows]):
		t, free := f.newGemmTask(g, s, s.Rows, schedule.ChainChunk)
		*frees = append(*frees, free)
		return func(lo, n value.Value) { f.gemmBlock(t, i64(0), i64(s.Rows), lo, n) }
	}
	return elements
}
