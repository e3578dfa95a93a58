package emit

import (
	"slices"
	"sync"

	"github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/value"

	"tofuc/codegen/blocking"
	"tofuc/codegen/kernel"
	tir "tofuc/lang/ir"
	"tofuc/lang/precision"
)

// Form is one way of lowering a kernel, declared in one place: its name
// (the plan's `form`), which kernels it applies to, how it sizes a GPU
// launch and the host's calls, and how it lowers the kernel's body in
// each flavour. This package's forms are declared in form_threads.go,
// form_blocks.go, form_rows.go, form_planes.go, form_scatter.go, tiled.go, tensorcore.go and chain.go
// and registered below; RegisterForm adds one from elsewhere.
//
// A kernel that only the host runs (kernel.Kernel.HostOnly) is not
// lowered for a GPU and launches no grid, one that only a GPU runs
// (GPUOnly) is not lowered for the host and has no host range, whatever
// its form (the builder and the functions below see to it).
type Form interface {
	// Name is the form's name in plans.
	Name() string
	// Applies reports whether the form lowers k in precision mode p.
	Applies(k *kernel.Kernel, p precision.Mode) bool
	// Launch is k's GPU launch in precision mode p.
	Launch(k *kernel.Kernel, p precision.Mode) Launch
	// HostRange is the range the host flavour's calls split, [0, items),
	// and the fewest items worth a thread of their own.
	HostRange(k *kernel.Kernel) (items, grain int64)
	// GPU lowers k's body in the GPU flavour (f.Kernel() is k); Host
	// lowers it in the host flavour for items [begin, end) of its host
	// range.
	GPU(f *Func)
	Host(f *Func, begin, end value.Value)
}

// Recounter is a form whose host flavour computes less than its
// kernel's lambdas say (the scatter form skips the terms its condition
// rules out): what it computes of k is k's lambdas less the Defs dense,
// plus the Defs instead, for counting (cost.DefFLOPs, or a math
// function's cost.DefMathCalls); the Defs are not lowered.
type Recounter interface {
	HostDefs(k *kernel.Kernel) (dense, instead []*tir.Def)
}

// Launch is a GPU launch: blocks, threads per block, shared memory in
// bytes (static, or dynamic: given at launch), and whether the threads
// meet at barriers or warp shuffles.
type Launch struct {
	Grid, Block, Shared int64
	DynamicShared       bool
	Sync                bool
}

var (
	formsMu sync.Mutex
	forms   []Form // newest first
)

// The forms of this package, the most general first (forms are tried
// newest first): a chained launch, then a kernel computing row locals,
// a sum scattered by an index read from data (on the host), a depthwise
// convolution (planes, on the host), then a contraction on
// tensor cores (in the tf32, bf16 and f16 modes), any
// contraction, a long reduction, and any kernel.
func init() {
	for _, f := range []Form{threadsForm{}, blocksForm{}, tiledForm{}, tensorCoreForm{mode: precision.TF32}, tensorCoreForm{mode: precision.BF16}, tensorCoreForm{mode: precision.F16}, planesForm{}, scatterForm{}, rowsForm{}, chainForm{}} {
		RegisterForm(f)
	}
}

// RegisterForm adds a form; forms are tried newest first, so that a new
// form is tried before the general ones it refines (the threads form,
// which applies to every kernel, was registered first).
func RegisterForm(f Form) {
	formsMu.Lock()
	defer formsMu.Unlock()
	forms = slices.Insert(forms, 0, f)
}

// UnregisterForm removes a form that RegisterForm added (tests).
func UnregisterForm(f Form) {
	formsMu.Lock()
	defer formsMu.Unlock()
	forms = slices.DeleteFunc(forms, func(g Form) bool { return g == f })
}

// FormOf is the form that lowers k in precision mode p: the newest that
// applies.
func FormOf(k *kernel.Kernel, p precision.Mode) Form {
	formsMu.Lock()
	defer formsMu.Unlock()
	for _, f := range forms {
		if f.Applies(k, p) {
			return f
		}
	}
	panic("emit: no form applies, not even threads")
}

// Func is a kernel's function while a form lowers it: the lowering's
// building blocks that forms outside this package use.
type Func struct{ f *fn }

// Kernel is the kernel being lowered.
func (f *Func) Kernel() *kernel.Kernel { return f.f.k }

// Block is the block the next instruction goes to.
func (f *Func) Block() *ir.Block { return f.f.b }

// Register reads a special register of the GPU flavour's machine, as an
// i64.
func (f *Func) Register(r Register) value.Value { return f.f.reg(r) }

// Loop emits for (i = lo; i < hi; i += step) body(i), signed i64.
func (f *Func) Loop(lo, hi, step value.Value, body func(i value.Value)) { f.f.loop(lo, hi, step, body) }

// Element computes output element o (a flat row-major index, i64): the
// kernel's stages in order, then the store.
func (f *Func) Element(o value.Value) { f.f.element(o) }

// maxGrid caps every grid: CUDA would take 2^31 - 1 blocks, but more
// blocks were slower on an H200 (docs/decisions.md, "GPU kernel code"):
// an element-wise chain over 2^26 floats ran at 1934 GB/s with a block
// per 256 elements against 2395 with 65535 blocks, a sum of 64 per
// element over 2^20 elements at 427 against 1267 GB/s, a softmax of 2^18
// rows of 64 at 520 against 543 GB/s. Every form strides over what its
// grid does not cover, so a kernel is correct for any grid (TestAnyGrid).
const maxGrid = 65535

// ThreadsPerBlock is the most threads of a block a form launches (the
// block of a large threads kernel).
const ThreadsPerBlock = 256

// blockCovering is the smallest power of two of threads, from 32 to
// ThreadsPerBlock, covering n.
func blockCovering(n int64) int64 {
	block := int64(32)
	for block < ThreadsPerBlock && block < n {
		block *= 2
	}
	return block
}

// elementRange is the host range of a kernel whose calls compute output
// elements: a grain of 4,096 elements of a few operations each (an
// addition: more threads would cost more to wake than they save),
// fewer of costlier ones (kernel.Kernel.ElementWork), down to
// minElementGrain. An LSTM step's 4,096 gates (eight exponentials each)
// ran on one thread.
func elementRange(k *kernel.Kernel) (items, grain int64) {
	return k.Elements, max(minElementGrain, plainGrain*plainWork/max(plainWork, k.ElementWork()))
}

// plainGrain elements of plainWork operations each are the least work
// a host thread is given; a grain is never below minElementGrain
// elements (a few vectors).
const (
	plainGrain      = 4096
	plainWork       = 4
	minElementGrain = 256
)

// hostElements lowers the host flavour of a kernel computed element by
// element, elements [begin, end) in one thread.
func (f *fn) hostElements(begin, end value.Value) {
	if len(f.k.Vars) == 0 {
		f.loop(begin, end, i64(1), f.element)
		return
	}
	reads := f.interiorReads()
	if len(reads) == 0 {
		f.mergedRuns(begin, end)
		return
	}
	if extent(f.k.Vars[len(f.k.Vars)-1]) < blocking.HostLanes()/2 {
		// Runs shorter than the vectorised tail (half a vector, the
		// toolchain's epilogue vectorisation) would pay a vector loop's
		// set-up each: one flat loop, the index divided per element.
		f.loop(begin, end, i64(1), f.element)
		return
	}
	f.storeRuns(begin, end, reads)
}
