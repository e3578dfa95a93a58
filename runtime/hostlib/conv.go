package hostlib

import (
	"encoding/json"
	"fmt"
	"runtime"
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
	dnnlMaxDims          = 12
)

// dnnlPlainTag is the row-major format tag of each rank (dnnl_abc and
// on), from rank 3.
var dnnlPlainTag = map[int]int32{3: 4, 4: 5, 5: 7, 6: 8}

// memDesc holds a dnnl_memory_desc_t (696 bytes in oneDNN 2.6), with
// room to spare; convDesc a dnnl_convolution_desc_t (5,976 bytes).
// oneDNN copies both wherever it keeps them.
type (
	memDesc  [128]int64
	convDesc [1024]int64
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

// dnnlAPI is the part of oneDNN's C API that convolutions use, bound
// to the library, with its CPU engine and stream.
type dnnlAPI struct {
	engineCreate    func(engine *uintptr, kind int32, index uintptr) int32
	streamCreate    func(stream *uintptr, engine uintptr, flags uint32) int32
	mdInitByTag     func(md *memDesc, ndims int32, dims *dnnlDims, dtype, tag int32) int32
	convInit        func(cd *convDesc, prop, alg int32, src, weights, bias, dst *memDesc, strides, dilates, padL, padR *dnnlDims) int32
	attrCreate      func(attr *uintptr) int32
	attrScratchpad  func(attr uintptr, mode int32) int32
	pdCreate        func(pd *uintptr, op *convDesc, attr, engine, hint uintptr) int32
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
	convs map[string]*convPrim
}

// dnnlMemoryAllocate is DNNL_MEMORY_ALLOCATE: the library allocates.
const dnnlMemoryAllocate = ^uintptr(0)

// bindDNNL binds the API's functions and makes its engine and stream.
func bindDNNL(h uintptr, inThreads func(f func())) (*dnnlAPI, error) {
	a := &dnnlAPI{inThreads: inThreads, convs: map[string]*convPrim{}}
	for sym, fn := range map[string]any{
		"dnnl_engine_create": &a.engineCreate, "dnnl_stream_create": &a.streamCreate,
		"dnnl_memory_desc_init_by_tag":               &a.mdInitByTag,
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

// convPrim is a convolution's primitive and its memories: the caller's
// tensors (plain, their addresses set at each call) and, where the
// primitive reads or writes another layout (oneDNN's blocked ones), its
// own copies with the reorders between; each primitive's scratchpad;
// its own stream.
type convPrim struct {
	mu      sync.Mutex
	holders int // callers that hold it (acquire); dnnlAPI.mu guards it
	stream  uintptr
	conv    uintptr
	scratch [4]uintptr // the convolution's, then each reorder's; 0 where none
	plain   [3]uintptr // x, w, y as the plan lays them out
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

// Conv runs convolution c on the tensors at x, w and y (their buffers'
// first elements). The call must have been validated (plan.Validate).
// Its primitive is made for the call and freed after it unless a
// caller holds it (AcquireConv).
//
// weightsBinding, when not 0, says that the weights at w are a
// parameter binding's, which stays unchanged until the caller binds
// others under another number: a call with the binding of the last call
// with weights at w does not reorder them to the primitive's layout
// again (the primitive keeps them per address). A reorder of ResNet-50's weights at every call took a
// fifth of its convolutions' time (docs/placement.md).
func (l *Library) Conv(c *plan.ConvCall, x, w, y unsafe.Pointer, weightsBinding uint64) error {
	if l.dnnl == nil {
		return fmt.Errorf("backend %s has no convolutions", l.Name)
	}
	p, release, err := l.dnnl.acquire(c)
	if err != nil {
		return err
	}
	defer release()
	ptrs := [3]unsafe.Pointer{unsafe.Add(x, 4*c.X.Offset), unsafe.Add(w, 4*c.W.Offset), unsafe.Add(y, 4*c.Y.Offset)}
	return l.dnnl.run(p, ptrs, weightsBinding)
}

// AcquireConv makes convolution c's primitive (oneDNN compiles its
// kernel then), or takes the one made for another caller, and holds it
// until release: a program holds its convolutions from its load, so
// that a convolution the library cannot make is said then, and its
// calls do not make them again.
func (l *Library) AcquireConv(c *plan.ConvCall) (release func(), err error) {
	if l.dnnl == nil {
		return nil, fmt.Errorf("backend %s has no convolutions", l.Name)
	}
	_, release, err = l.dnnl.acquire(c)
	return release, err
}

// convKey keys a convolution's primitive: its call without its library
// and its operands' places.
func convKey(c *plan.ConvCall) string {
	shape := *c
	shape.Backend, shape.X, shape.W, shape.Y = "", plan.Dense{}, plan.Dense{}, plan.Dense{}
	b, _ := json.Marshal(shape)
	return string(b)
}

// acquire holds the primitive of c, made if no caller holds it, until
// release, which frees it when it was the last holder.
func (a *dnnlAPI) acquire(c *plan.ConvCall) (p *convPrim, release func(), err error) {
	key := convKey(c)
	a.mu.Lock()
	defer a.mu.Unlock()
	p, ok := a.convs[key]
	if !ok {
		if p, err = a.newConv(c); err != nil {
			return nil, nil, err
		}
		a.convs[key] = p
	}
	p.holders++
	var once sync.Once
	return p, func() { once.Do(func() { a.release(key, p) }) }, nil
}

// release drops a holder of primitive p, freeing it after the last.
func (a *dnnlAPI) release(key string, p *convPrim) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if p.holders--; p.holders == 0 {
		delete(a.convs, key)
		a.destroy(p)
	}
}

// destroy frees what p holds, waiting for a call that runs it.
func (a *dnnlAPI) destroy(p *convPrim) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, prim := range append([]uintptr{p.conv}, p.reorder[:]...) {
		if prim != 0 {
			a.primDestroy(prim)
		}
		if i < 3 && p.inner[i] != 0 && p.inner[i] != p.plain[i] {
			a.memDestroy(p.inner[i])
		}
	}
	for _, m := range append(p.plain[:], p.scratch[:]...) {
		if m != 0 {
			a.memDestroy(m)
		}
	}
	a.dropWeights(p)
	if p.stream != 0 {
		a.streamDestroy(p.stream)
	}
}

// newConv makes c's primitive. It reads and writes the layouts oneDNN
// chooses (blocked ones), reordered to and from the plan's at each call:
// its depthwise kernels are 6–14× faster than on the plain layout, and
// ResNet-50's convolutions 1.6× (docs/placement.md).
func (a *dnnlAPI) newConv(c *plan.ConvCall) (*convPrim, error) {
	xs, ws, ys := c.Shapes()
	if c.Group > 1 {
		ws = append([]int64{c.Group, c.O / c.Group}, ws[1:]...)
	}
	var plain [3]memDesc
	for i, shape := range [][]int64{xs, ws, ys} {
		if err := dnnlStatus("dnnl_memory_desc_init_by_tag", a.mdInitByTag(&plain[i], int32(len(shape)), dimsOf(shape), dnnlF32, dnnlPlainTag[len(shape)])); err != nil {
			return nil, err
		}
	}
	var asked [3]memDesc
	for i, shape := range [][]int64{xs, ws, ys} {
		if err := dnnlStatus("dnnl_memory_desc_init_by_tag", a.mdInitByTag(&asked[i], int32(len(shape)), dimsOf(shape), dnnlF32, dnnlFormatAny)); err != nil {
			return nil, err
		}
	}
	dilations := make([]int64, len(c.Dilations))
	for i, d := range c.Dilations {
		dilations[i] = d - 1 // oneDNN counts the gaps
	}
	var cd convDesc
	st := a.convInit(&cd, dnnlForwardInference, dnnlConvDirect, &asked[0], &asked[1], nil, &asked[2],
		dimsOf(c.Strides), dimsOf(dilations), dimsOf(c.PadsBegin), dimsOf(c.PadsEnd))
	if err := dnnlStatus("dnnl_dilated_convolution_forward_desc_init", st); err != nil {
		return nil, err
	}
	var pd uintptr
	if err := dnnlStatus("dnnl_primitive_desc_create", a.pdCreate(&pd, &cd, a.attr, a.engine, 0)); err != nil {
		return nil, err
	}
	defer a.pdDestroy(pd)
	p := &convPrim{}
	if err := a.fill(p, pd, &plain); err != nil {
		a.destroy(p)
		return nil, err
	}
	return p, nil
}

// fill makes p's stream, its primitive of pd and the memories and
// reorders of its operands, whose plan layouts are plain.
func (a *dnnlAPI) fill(p *convPrim, pd uintptr, plain *[3]memDesc) error {
	if err := dnnlStatus("dnnl_stream_create", a.streamCreate(&p.stream, a.engine, dnnlStreamDefault)); err != nil {
		return err
	}
	if err := a.primitive(&p.conv, &p.scratch[0], pd); err != nil {
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
func (a *dnnlAPI) memories(p *convPrim, i int, plain, inner *memDesc, out bool) error {
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

// run runs primitive p on the tensors at ptrs (x, w, y), reordering
// where it needs (the weights only when not reordered for the same
// binding and address before, Conv), one call at a time.
func (a *dnnlAPI) run(p *convPrim, ptrs [3]unsafe.Pointer, weightsBinding uint64) (err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, m := range p.plain {
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
		exec(p.conv, p.scratch[0], execArg{dnnlArgSrc, p.inner[0]}, execArg{dnnlArgWeights, weights}, execArg{dnnlArgDst, p.inner[2]})
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
func (a *dnnlAPI) keptWeights(p *convPrim, w unsafe.Pointer) (*keptWeights, error) {
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
func (a *dnnlAPI) dropWeights(p *convPrim) {
	for _, kept := range p.weights {
		a.memDestroy(kept.mem)
	}
	p.weights = nil
}
