package emit

import (
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/value"

	"tofuc/codegen/kernel"
	tir "tofuc/lang/ir"
	"tofuc/lang/precision"
)

// The blocks form: a reduction whose range is at least BlockReduceMin
// runs a block per output element (blocks stride over the elements),
// with the smallest power of two of threads from 32 to ThreadsPerBlock
// covering the range; every thread folds a strided part of each
// top-level reduction, warps combine with shuffles and the warps'
// partials meet in shared memory (blockReduce). The host computes
// elements [begin, end) a call, as the threads form.
type blocksForm struct{}

// BlockReduceMin is the smallest reduction range the blocks form splits
// over a block; shorter ones run in one thread (the threads form).
const BlockReduceMin = 32

func (blocksForm) Name() string { return "blocks" }

func (blocksForm) Applies(k *kernel.Kernel, _ precision.Mode) bool {
	return k.Kind == kernel.Reduction && k.ReduceLen >= BlockReduceMin
}

func (blocksForm) Launch(k *kernel.Kernel, _ precision.Mode) Launch {
	return Launch{Grid: min(k.Elements, maxGrid), Block: blockCovering(k.ReduceLen), Shared: 32 * 8, Sync: true}
}

func (blocksForm) HostRange(k *kernel.Kernel) (items, grain int64) { return elementRange(k) }

func (blocksForm) GPU(f *Func) { f.f.blocksLoop() }

func (blocksForm) Host(f *Func, begin, end value.Value) { f.f.hostElements(begin, end) }

// blocksLoop lowers a blocks kernel: blocks stride over the output
// elements, every thread of a block takes part in the block's
// reductions, and thread 0 computes and stores the element.
func (f *fn) blocksLoop() {
	f.smem = f.sharedSlots()
	tid, ntid := f.reg(ThreadIndex), f.reg(BlockThreads)
	f.loop(f.reg(BlockIndex), i64(f.k.Elements), f.reg(GridBlocks), func(o value.Value) {
		f.unflatten(o, f.k.Vars, f.k.Shape)
		f.hoisted = map[*tir.Reduce]value.Value{}
		for _, r := range f.k.Reductions {
			f.hoisted[r] = f.blockReduce(r, tid, ntid)
		}
		f.ifThen(f.b.NewICmp(enum.IPredEQ, tid, i64(0)), func() {
			f.store(f.bufs[len(f.bufs)-1], o, f.computeStages(), f.k.Out().DType)
		})
	})
}
