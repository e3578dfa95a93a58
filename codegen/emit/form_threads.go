package emit

import (
	"github.com/llir/llvm/ir/value"

	"tofuc/codegen/kernel"
	"tofuc/lang/precision"
)

// The threads form: one GPU thread per output element, grid-stride,
// blocks of ThreadsPerBlock threads (fewer, a multiple of 32, for small
// outputs), at most maxGrid blocks; a kernel of at least TurnMin
// elements takes TurnElements a turn (turn) on a grid of TurnGrid
// blocks. It applies to every kernel, after the forms registered after
// it. The host computes elements [begin, end) a call (hostElements).
type threadsForm struct{}

func (threadsForm) Name() string { return "threads" }

func (threadsForm) Applies(*kernel.Kernel, precision.Mode) bool { return true }

func (threadsForm) Launch(k *kernel.Kernel, _ precision.Mode) Launch {
	block := min(ThreadsPerBlock, max(32, (k.Elements+31)/32*32))
	if t := turn(k); t > 1 {
		return Launch{Grid: min((k.Elements+block*t-1)/(block*t), TurnGrid), Block: block}
	}
	return Launch{Grid: min((k.Elements+block-1)/block, maxGrid), Block: block}
}

func (threadsForm) HostRange(k *kernel.Kernel) (items, grain int64) { return elementRange(k) }

func (threadsForm) GPU(fn *Func) {
	f := fn.f
	tid := f.b.NewAdd(f.b.NewMul(f.reg(BlockIndex), f.reg(BlockThreads)), f.reg(ThreadIndex))
	stride := f.b.NewMul(f.reg(GridBlocks), f.reg(BlockThreads))
	f.threadsLoop(tid, stride)
}

func (threadsForm) Host(f *Func, begin, end value.Value) { f.f.hostElements(begin, end) }

// turn is the number of output elements each thread of a threads
// kernel computes per turn of its grid-stride loop on a GPU:
// TurnElements for kernels of at least TurnMin elements, computing all
// of them (their loads issued) before storing any, so that a thread has
// that many loads in flight; one for smaller kernels, whose threads are
// enough.
func turn(k *kernel.Kernel) int64 {
	if k.Elements >= TurnMin {
		return TurnElements
	}
	return 1
}

// TurnElements and TurnMin: see turn. TurnGrid is the grid of a kernel
// that takes several elements a turn (docs/codegen.md: an element-wise
// chain over 2²⁶ floats on an H200 ran at 76% of a copy's bandwidth
// with four elements a turn on a grid of 4,224 to 16,896 blocks, 59%
// with one on 65,535); TurnMin is the elements of that grid's threads
// taking TurnElements each.
const (
	TurnElements = 4
	TurnGrid     = 8448
	TurnMin      = TurnElements * ThreadsPerBlock * TurnGrid
)

// threadsLoop lowers a threads kernel on the GPU: a grid-stride loop
// from first over the output elements. A kernel taking several elements
// a turn (turn) computes the turn's elements, loads first, before
// storing any, while all of them are in range; the last turn's elements
// go one at a time.
func (f *fn) threadsLoop(first, stride value.Value) {
	n := i64(f.k.Elements)
	turn := turn(f.k)
	if turn > 1 {
		span := f.b.NewMul(stride, i64(turn))
		whole := f.b.NewSub(n, f.b.NewMul(stride, i64(turn-1))) // o < whole: o's turn is in range
		first = f.fold(first, whole, span, first, func(o, _ value.Value) value.Value {
			at := make([]value.Value, turn)
			vals := make([]value.Value, turn)
			for u := range at {
				at[u] = f.b.NewAdd(o, f.b.NewMul(stride, i64(int64(u))))
				f.unflatten(at[u], f.k.Vars, f.k.Shape)
				vals[u] = f.computeStages()
			}
			for u := range at {
				f.store(f.bufs[len(f.bufs)-1], at[u], vals[u], f.k.Out().DType)
			}
			return f.b.NewAdd(o, span)
		})
	}
	f.loop(first, n, stride, f.element)
}
