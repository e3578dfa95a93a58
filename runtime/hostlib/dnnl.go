package hostlib

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"unsafe"

	"tofuc/runtime/plan"
)

// oneDNN's enumerations and sizes (dnnl_types.h of oneDNN 2.6).
const (
	dnnlCPU              = 1
	dnnlStreamDefault    = 1
	dnnlF32              = 3
	dnnlFormatAny        = 1
	dnnlForwardInference = 96
	dnnlConvDirect       = 1
	dnnlQuerySrcMD       = 129
	dnnlQueryWeightsMD   = 131
	dnnlQueryDstMD       = 133
	dnnlQueryScratchMD   = 136
	dnnlScratchpadUser   = 1
	dnnlArgScratchpad    = 80
	dnnlArgSrc           = 1
	dnnlArgDst           = 17
	dnnlArgWeights       = 33
	dnnlArgBias          = 41
	dnnlEltwiseRelu      = 0x1f
	dnnlEltwiseClipV2    = 0x10
	dnnlMaxDims          = 12
	dnnlUnimplemented    = 3 // dnnl_unimplemented
)

// dnnlPlainTag is the row-major format tag of each rank (dnnl_abc and
// on), from rank 3.
var dnnlPlainTag = map[int]int32{1: 2, 2: 3, 3: 4, 4: 5, 5: 7, 6: 8}

// memDesc holds a dnnl_memory_desc_t (696 bytes in oneDNN 2.6), with
// room to spare; opDesc a dnnl_convolution_desc_t (5,976 bytes) or a
// dnnl_matmul_desc_t (2,792). oneDNN copies them wherever it keeps them.
type (
	memDesc [128]int64
	opDesc  [1024]int64
)

// dnnlDims is a dnnl_dims_t.
type dnnlDims [dnnlMaxDims]int64

func dimsOf(xs []int64) *dnnlDims {
	var d dnnlDims
	copy(d[:], xs)
	return &d
}

// execArg is a dnnl_exec_arg_t.
type execArg struct {
	arg    int32
	memory uintptr
}

// dnnlAPI is the part of oneDNN's C API that convolutions and matrix
// products use, bound
// to the library, with its CPU engine and stream.
type dnnlAPI struct {
	engineCreate    func(engine *uintptr, kind int32, index uintptr) int32
	streamCreate    func(stream *uintptr, engine uintptr, flags uint32) int32
	mdInitByTag     func(md *memDesc, ndims int32, dims *dnnlDims, dtype, tag int32) int32
	mdInitByStrides func(md *memDesc, ndims int32, dims *dnnlDims, dtype int32, strides *dnnlDims) int32
	matmulInit      func(md *opDesc, src, weights, bias, dst *memDesc) int32
	attrClone       func(attr *uintptr, from uintptr) int32
	attrDestroy     func(attr uintptr) int32
	attrSetPostOps  func(attr, postOps uintptr) int32
	postOpsCreate   func(postOps *uintptr) int32
	postOpsDestroy  func(postOps uintptr) int32
	postOpsEltwise  func(postOps uintptr, scale float32, alg int32, alpha, beta float32) int32
	pdQuery         func(pd uintptr, what, index int32, result unsafe.Pointer) int32
	convInit        func(cd *opDesc, prop, alg int32, src, weights, bias, dst *memDesc, strides, dilates, padL, padR *dnnlDims) int32
	attrCreate      func(attr *uintptr) int32
	attrScratchpad  func(attr uintptr, mode int32) int32
	pdCreate        func(pd *uintptr, op *opDesc, attr, engine, hint uintptr) int32
	reorderPDCreate func(pd *uintptr, src *memDesc, srcEngine uintptr, dst *memDesc, dstEngine uintptr, attr uintptr) int32
	pdQueryMD       func(pd uintptr, what, index int32) *memDesc
	pdDestroy       func(pd uintptr) int32
	mdEqual         func(a, b *memDesc) int32
	mdSize          func(md *memDesc) uintptr
	primCreate      func(prim *uintptr, pd uintptr) int32
	primDestroy     func(prim uintptr) int32
	memDestroy      func(mem uintptr) int32
	streamDestroy   func(stream uintptr) int32
	memCreate       func(mem *uintptr, md *memDesc, engine uintptr, handle uintptr) int32
	memSetHandle    func(mem uintptr, handle unsafe.Pointer) int32
	execute         func(prim, stream uintptr, nargs int32, args *execArg) int32
	streamWait      func(stream uintptr) int32

	engine uintptr
	// attr makes every primitive take its scratchpad from its caller:
	// by default oneDNN keeps one per thread, and a goroutine that calls
	// a primitive need not be on the thread that made it.
	attr uintptr
	// inThreads runs f on the calling thread with OpenMP's thread count
	// (the calling thread's) set to the host runtime's.
	inThreads func(f func())

	mu    sync.Mutex
	prims map[string]*prim // by the call they make (convKey, matmulKey)
}

// dnnlMemoryAllocate is DNNL_MEMORY_ALLOCATE: the library allocates.
const dnnlMemoryAllocate = ^uintptr(0)

// bindDNNL binds the API's functions and makes its engine and stream.
func bindDNNL(h uintptr, inThreads func(f func())) (*dnnlAPI, error) {
	a := &dnnlAPI{inThreads: inThreads, prims: map[string]*prim{}}
	for sym, fn := range map[string]any{
		"dnnl_engine_create": &a.engineCreate, "dnnl_stream_create": &a.streamCreate,
		"dnnl_memory_desc_init_by_tag":               &a.mdInitByTag,
		"dnnl_memory_desc_init_by_strides":           &a.mdInitByStrides,
		"dnnl_matmul_desc_init":                      &a.matmulInit,
		"dnnl_primitive_desc_query":                  &a.pdQuery,
		"dnnl_primitive_attr_clone":                  &a.attrClone,
		"dnnl_primitive_attr_destroy":                &a.attrDestroy,
		"dnnl_primitive_attr_set_post_ops":           &a.attrSetPostOps,
		"dnnl_post_ops_create":                       &a.postOpsCreate,
		"dnnl_post_ops_destroy":                      &a.postOpsDestroy,
		"dnnl_post_ops_append_eltwise":               &a.postOpsEltwise,
		"dnnl_dilated_convolution_forward_desc_init": &a.convInit,
		"dnnl_primitive_attr_create":                 &a.attrCreate, "dnnl_primitive_attr_set_scratchpad_mode": &a.attrScratchpad,
		"dnnl_memory_desc_get_size": &a.mdSize, "dnnl_primitive_destroy": &a.primDestroy,
		"dnnl_memory_destroy": &a.memDestroy, "dnnl_stream_destroy": &a.streamDestroy,
		"dnnl_primitive_desc_create": &a.pdCreate, "dnnl_reorder_primitive_desc_create": &a.reorderPDCreate,
		"dnnl_primitive_desc_query_md": &a.pdQueryMD, "dnnl_primitive_desc_destroy": &a.pdDestroy,
		"dnnl_memory_desc_equal": &a.mdEqual, "dnnl_primitive_create": &a.primCreate,
		"dnnl_memory_create": &a.memCreate, "dnnl_memory_set_data_handle": &a.memSetHandle,
		"dnnl_primitive_execute": &a.execute, "dnnl_stream_wait": &a.streamWait,
	} {
		if err := register(h, fn, sym); err != nil {
			return nil, err
		}
	}
	if err := dnnlStatus("dnnl_engine_create", a.engineCreate(&a.engine, dnnlCPU, 0)); err != nil {
		return nil, err
	}
	if err := dnnlStatus("dnnl_primitive_attr_create", a.attrCreate(&a.attr)); err != nil {
		return nil, err
	}
	return a, dnnlStatus("dnnl_primitive_attr_set_scratchpad_mode", a.attrScratchpad(a.attr, dnnlScratchpadUser))
}

// dnnlStatus is an error for a oneDNN status other than success.
func dnnlStatus(fn string, st int32) error {
	names := []string{"success", "out of memory", "invalid arguments", "unimplemented", "iterator ends", "runtime error", "not required"}
	switch {
	case st == 0:
		return nil
	case st > 0 && int(st) < len(names):
		return fmt.Errorf("%s: %s", fn, names[st])
	}
	return fmt.Errorf("%s: status %d", fn, st)
}

// prim is a convolution's or a matrix product's primitive and its memories: the caller's
// tensors (plain, their addresses set at each call) and, where the
// primitive reads or writes another layout (oneDNN's blocked ones), its
// own copies with the reorders between; each primitive's scratchpad;
// its own stream.
type prim struct {
	mu      sync.Mutex
	holders int // callers that hold it (acquire); dnnlAPI.mu guards it
	stream  uintptr
	op      uintptr    // the convolution or matrix product
	scratch [4]uintptr // op's, then each reorder's; 0 where none
	plain   [3]uintptr // x, w, y as the plan lays them out
	bias    uintptr    // the post-ops' bias, plain; 0 where none
	inner   [3]uintptr // what the convolution reads and writes, but reordered weights
	reorder [3]uintptr // x → inner, w → weights' memory, inner → y; 0 where none
	// weightsMD is the layout of reordered weights; weights holds them,
	// per address of the plan's weights (convolutions of one shape
	// share a primitive, each with weights of its own).
	weightsMD memDesc
	weights   map[unsafe.Pointer]*keptWeights
}

// keptWeights are weights reordered to a primitive's layout: its
// memory, and the parameter binding they were reordered from (0: none
// known, reordered at every call).
type keptWeights struct {
	mem     uintptr
	binding uint64
}

// maxKeptWeights bounds a primitive's reordered weights: past it, they
// are freed and reordered again as the calls come (a long-lived process
// loading many plans of one shape).
const maxKeptWeights = 64

// acquire holds the primitive of key, made by make if no caller holds
// it, until release, which frees it when it was the last holder.
func (a *dnnlAPI) acquire(key string, make func() (*prim, error)) (p *prim, release func(), err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	p, ok := a.prims[key]
	if !ok {
		if p, err = make(); err != nil {
			return nil, nil, err
		}
		a.prims[key] = p
	}
	p.holders++
	var once sync.Once
	return p, func() { once.Do(func() { a.release(key, p) }) }, nil
}

// release drops a holder of primitive p, freeing it after the last.
func (a *dnnlAPI) release(key string, p *prim) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if p.holders--; p.holders == 0 {
		delete(a.prims, key)
		a.destroy(p)
	}
}

// destroy frees what p holds, waiting for a call that runs it.
func (a *dnnlAPI) destroy(p *prim) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, prim := range append([]uintptr{p.op}, p.reorder[:]...) {
		if prim != 0 {
			a.primDestroy(prim)
		}
		if i < 3 && p.inner[i] != 0 && p.inner[i] != p.plain[i] {
			a.memDestroy(p.inner[i])
		}
	}
	for _, m := range slices.Concat(p.plain[:], p.scratch[:], []uintptr{p.bias}) {
		if m != 0 {
			a.memDestroy(m)
		}
	}
	a.dropWeights(p)
	if p.stream != 0 {
		a.streamDestroy(p.stream)
	}
}

// fill makes p's stream, its primitive of pd and the memories and
// reorders of its operands, whose plan layouts are plain.
func (a *dnnlAPI) fill(p *prim, pd uintptr, plain *[3]memDesc) error {
	if err := dnnlStatus("dnnl_stream_create", a.streamCreate(&p.stream, a.engine, dnnlStreamDefault)); err != nil {
		return err
	}
	if err := a.primitive(&p.op, &p.scratch[0], pd); err != nil {
		return err
	}
	for i, what := range []int32{dnnlQuerySrcMD, dnnlQueryWeightsMD, dnnlQueryDstMD} {
		if err := a.memories(p, i, &plain[i], a.pdQueryMD(pd, what, 0), i == 2); err != nil {
			return err
		}
	}
	return nil
}

// memories makes operand i's memories: the plan's (its address set at
// each call) and, where the primitive's layout inner differs, one of
// that layout and the reorder between them (from it when out).
func (a *dnnlAPI) memories(p *prim, i int, plain, inner *memDesc, out bool) error {
	if err := dnnlStatus("dnnl_memory_create", a.memCreate(&p.plain[i], plain, a.engine, 0)); err != nil {
		return err
	}
	if a.mdEqual(plain, inner) != 0 {
		p.inner[i] = p.plain[i]
		return nil
	}
	if i == 1 { // weights: a memory per address (keptWeights)
		p.weightsMD = *inner
	} else if err := dnnlStatus("dnnl_memory_create", a.memCreate(&p.inner[i], inner, a.engine, dnnlMemoryAllocate)); err != nil {
		return err
	}
	from, to := plain, inner
	if out {
		from, to = inner, plain
	}
	var pd uintptr
	if err := dnnlStatus("dnnl_reorder_primitive_desc_create", a.reorderPDCreate(&pd, from, a.engine, to, a.engine, a.attr)); err != nil {
		return err
	}
	defer a.pdDestroy(pd)
	return a.primitive(&p.reorder[i], &p.scratch[1+i], pd)
}

// primitive makes the primitive of pd and its scratchpad's memory, if
// it needs one.
func (a *dnnlAPI) primitive(prim, scratch *uintptr, pd uintptr) error {
	if err := dnnlStatus("dnnl_primitive_create", a.primCreate(prim, pd)); err != nil {
		return err
	}
	md := a.pdQueryMD(pd, dnnlQueryScratchMD, 0)
	if md == nil || a.mdSize(md) == 0 {
		return nil
	}
	return dnnlStatus("dnnl_memory_create", a.memCreate(scratch, md, a.engine, dnnlMemoryAllocate))
}

// run runs primitive p on the tensors at ptrs (x, w, y, and the bias
// where p has one), reordering where it needs (the weights only when
// not reordered for the same binding and address before, Conv), one
// call at a time.
func (a *dnnlAPI) run(p *prim, ptrs []unsafe.Pointer, weightsBinding uint64) (err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, m := range append(p.plain[:], p.bias) {
		if m == 0 {
			continue
		}
		if err := dnnlStatus("dnnl_memory_set_data_handle", a.memSetHandle(m, ptrs[i])); err != nil {
			return err
		}
	}
	exec := func(prim, scratch uintptr, args ...execArg) {
		if scratch != 0 {
			args = append(args, execArg{dnnlArgScratchpad, scratch})
		}
		if err == nil {
			err = dnnlStatus("dnnl_primitive_execute", a.execute(prim, p.stream, int32(len(args)), &args[0]))
		}
	}
	a.inThreads(func() {
		if p.reorder[0] != 0 {
			exec(p.reorder[0], p.scratch[1], execArg{dnnlArgSrc, p.plain[0]}, execArg{dnnlArgDst, p.inner[0]})
		}
		weights := p.inner[1]
		if p.reorder[1] != 0 {
			var kept *keptWeights
			if kept, err = a.keptWeights(p, ptrs[1]); err != nil {
				return
			}
			if weightsBinding == 0 || kept.binding != weightsBinding {
				kept.binding = 0 // until the reorder has run
				exec(p.reorder[1], p.scratch[2], execArg{dnnlArgSrc, p.plain[1]}, execArg{dnnlArgDst, kept.mem})
				if err == nil {
					kept.binding = weightsBinding
				}
			}
			weights = kept.mem
		}
		args := []execArg{{dnnlArgSrc, p.inner[0]}, {dnnlArgWeights, weights}, {dnnlArgDst, p.inner[2]}}
		if p.bias != 0 {
			args = append(args, execArg{dnnlArgBias, p.bias})
		}
		exec(p.op, p.scratch[0], args...)
		if p.reorder[2] != 0 {
			exec(p.reorder[2], p.scratch[3], execArg{dnnlArgSrc, p.inner[2]}, execArg{dnnlArgDst, p.plain[2]})
		}
		if err == nil {
			err = dnnlStatus("dnnl_stream_wait", a.streamWait(p.stream))
		}
	})
	runtime.KeepAlive(ptrs)
	return err
}

// keptWeights is p's memory of reordered weights for the plan's weights
// at w, made when there is none (all of them freed first past
// maxKeptWeights); p.mu is held.
func (a *dnnlAPI) keptWeights(p *prim, w unsafe.Pointer) (*keptWeights, error) {
	if kept, ok := p.weights[w]; ok {
		return kept, nil
	}
	if len(p.weights) >= maxKeptWeights {
		a.dropWeights(p)
	}
	kept := &keptWeights{}
	if err := dnnlStatus("dnnl_memory_create", a.memCreate(&kept.mem, &p.weightsMD, a.engine, dnnlMemoryAllocate)); err != nil {
		return nil, err
	}
	if p.weights == nil {
		p.weights = map[unsafe.Pointer]*keptWeights{}
	}
	p.weights[w] = kept
	return kept, nil
}

// dropWeights frees p's reordered weights.
func (a *dnnlAPI) dropWeights(p *prim) {
	for _, kept := range p.weights {
		a.memDestroy(kept.mem)
	}
	p.weights = nil
}

// attrWith is a primitive attribute with a's (its scratchpad from the
// caller) and post-ops acts, for the caller to destroy; a.attr itself
// where there are none. Bounds compose into one bound on each side
// (clamps compose into a clamp), run as one post-op: a ReLU, or a clip.
// (oneDNN 2.6 skipped the second of two clips: min 1 then max 0.1 left
// -1.6, TestConvPostOps.)
func (a *dnnlAPI) attrWith(acts []plan.Activation) (attr uintptr, destroy func(), err error) {
	lo, hi := math.Inf(-1), math.Inf(1)
	for _, act := range acts {
		if act.Kind == plan.ActMax {
			lo, hi = max(lo, act.Value), max(hi, act.Value)
		} else {
			lo, hi = min(lo, act.Value), min(hi, act.Value)
		}
	}
	if math.IsInf(lo, -1) && math.IsInf(hi, 1) {
		return a.attr, func() {}, nil
	}
	var po uintptr
	if err := dnnlStatus("dnnl_post_ops_create", a.postOpsCreate(&po)); err != nil {
		return 0, nil, err
	}
	defer a.postOpsDestroy(po)
	// An open side is an infinite bound: ±MaxFloat32 clipped infinite
	// sums to it (the review's repro: +Inf became 3.4e38).
	alg, alpha, beta := int32(dnnlEltwiseClipV2), float32(lo), float32(hi)
	if lo == 0 && math.IsInf(hi, 1) {
		alg, alpha, beta = dnnlEltwiseRelu, 0, 0 // alpha: the slope below 0
	}
	if err := dnnlStatus("dnnl_post_ops_append_eltwise", a.postOpsEltwise(po, 1, alg, alpha, beta)); err != nil {
		return 0, nil, err
	}
	if err := dnnlStatus("dnnl_primitive_attr_clone", a.attrClone(&attr, a.attr)); err != nil {
		return 0, nil, err
	}
	if err := dnnlStatus("dnnl_primitive_attr_set_post_ops", a.attrSetPostOps(attr, po)); err != nil {
		a.attrDestroy(attr)
		return 0, nil, err
	}
	return attr, func() { a.attrDestroy(attr) }, nil
}
