package codegen

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"

	"tofuc/analysis/cost"
	"tofuc/codegen/blocking"
	"tofuc/codegen/emit"
	"tofuc/codegen/kernel"
	"tofuc/codegen/target"
	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/lang/precision"
	"tofuc/runtime/plan"
)

// builder assembles a plan: its buffers, kernels and steps.
type builder struct {
	p *plan.Plan
	// bufferOf maps the key a kernel uses for a buffer (codegen's
	// choice: a value on a device, a local of a node, ...) to its id.
	bufferOf map[any]int
	life     []lifetime
	// units are the distinct kernels, in order of first use; kernelOf
	// maps a kernel's name to its index in the plan.
	units    []*kernel.Kernel
	kernelOf map[string]int
	// views holds, per view buffer, its base buffer and byte offset.
	views map[int]view
	// time counts the steps added, across devices, for lifetimes.
	time int
	// backends are the libraries offered the contractions (Options).
	backends []string
	// shared, for a plan of several devices, records what the next step
	// touches (pending) and, per buffer, the steps of other devices
	// reading it and its first step on its own device, so that a buffer
	// may share bytes with one another device read before it
	// (allocate's waits); nil: no buffer is read by another device.
	shared *sharedReads
}

// sharedReads are the reads across devices of a plan's buffers.
type sharedReads struct {
	pending []int
	remote  map[int][]plan.StepRef
	first   map[int]plan.StepRef
}

// lifetime is when a buffer's contents matter: from its first write to
// its last read, or always.
type lifetime struct {
	first, last int
	always      bool
}

type view struct {
	base   int
	offset int64
}

// newBuilder starts the plan of a model over devices, its kernels
// computing in mode prec.
func newBuilder(model string, devices int, prec precision.Mode) *builder {
	return &builder{
		p: &plan.Plan{Version: plan.Version, Model: model, Devices: devices, Precision: prec,
			ArenaBytes: make([]int64, devices), Init: make([][]plan.Step, devices), Steps: make([][]plan.Step, devices)},
		bufferOf: map[any]int{},
		kernelOf: map[string]int{},
		views:    map[int]view{},
	}
}

// buffer returns the buffer of key, adding it when new.
func (b *builder) buffer(key any, name string, device int, dt lang.DType, shape []int64, role string) int {
	if id, ok := b.bufferOf[key]; ok {
		return id
	}
	n := int64(dt.Size())
	for _, d := range shape {
		n *= d
	}
	id := len(b.p.Buffers)
	b.p.Buffers = append(b.p.Buffers, plan.Buffer{ID: id, Name: name, Device: device, DType: dt.String(), Shape: shape, Bytes: n, Role: role, ViewOf: -1})
	b.life = append(b.life, lifetime{first: -1, last: -1})
	b.bufferOf[key] = id
	return id
}

// keep makes a buffer (and the buffer it is a view of) live for the
// whole run.
func (b *builder) keep(id int) {
	b.life[id].always = true
	if v, ok := b.views[id]; ok {
		b.keep(v.base)
	}
}

// touch records a use of buffer id (and of the buffer it is a view of)
// at the current time.
func (b *builder) touch(id int) {
	l := &b.life[id]
	if l.first < 0 {
		l.first = b.time
	}
	l.last = b.time
	if v, ok := b.views[id]; ok {
		b.touch(v.base)
	} else if b.shared != nil {
		b.shared.pending = append(b.shared.pending, id)
	}
}

// addStep appends a step to a device's list (Init when init) and returns
// its index there.
func (b *builder) addStep(device int, init bool, s plan.Step) int {
	list := &b.p.Steps[device]
	if init {
		list = &b.p.Init[device]
	}
	*list = append(*list, s)
	b.time++
	b.sharedStep(device, init, len(*list)-1)
	return len(*list) - 1
}

// sharedStep records the reads across devices of the buffers the step
// just added touches; a buffer another device reads at init is kept
// for the whole run (an init step has no reference to wait for).
func (b *builder) sharedStep(device int, init bool, index int) {
	sh := b.shared
	if sh == nil {
		return
	}
	ref := plan.StepRef{Device: device, Step: index}
	for _, id := range sh.pending {
		switch {
		case b.p.Buffers[id].Device != device && init:
			b.keep(id)
		case b.p.Buffers[id].Device != device:
			sh.remote[id] = append(sh.remote[id], ref)
		case init:
		default:
			if _, ok := sh.first[id]; !ok {
				sh.first[id] = ref
			}
		}
	}
	sh.pending = sh.pending[:0]
}

// launch adds a launch of k with its argument buffers, resolved by their
// keys, to a device's steps.
func (b *builder) launch(device int, init bool, k *kernel.Kernel) (int, error) {
	if k.GEMM != nil && !k.PackOnly && !k.GPUOnly && k.GEMM.SharedB == nil && k.Before == nil {
		if n := blocking.SharedBLen(k.GEMM); n > 0 {
			// The host flavour's tasks share B, packed into a
			// workspace that lives for the launch only.
			key := sharedBKey{k}
			b.buffer(key, k.Label+" packed B", device, lang.F32, []int64{n}, plan.RoleWorkspace)
			k.ShareB(key, n)
		}
	}
	idx, err := b.kernel(k)
	if err != nil {
		return 0, err
	}
	for _, part := range []*kernel.Kernel{k.Before, k} {
		if part == nil || k.GPUOnly {
			continue // a GPU-only kernel's calls are the chained launch's
		}
		if err := b.opaqueSteps(device, init, part); err != nil {
			return 0, err
		}
	}
	s := plan.Step{Op: plan.Launch, Kernel: idx, Label: k.Label}
	if k.Call.IsValid() {
		s.Pos = k.Call.String()
	}
	for _, a := range k.LaunchArgs() {
		id, ok := b.bufferOf[a.Key]
		if !ok {
			return 0, fmt.Errorf("%s: argument %v has no buffer", k.Label, a.Key)
		}
		s.Args = append(s.Args, id)
		b.touch(id)
		if _, scratch := a.Key.(sharedBKey); init && !scratch {
			b.keep(id) // a workspace lives for its launch, also at init
		}
	}
	return b.addStep(device, init, s), nil
}

// sharedBKey is the buffer of the B factor a contraction kernel packs
// for all of its host tasks.
type sharedBKey struct{ k *kernel.Kernel }

// opaqueSteps adds the host calls of the opaque functions k reads, each
// into a workspace buffer of its own.
func (b *builder) opaqueSteps(device int, init bool, k *kernel.Kernel) error {
	for i, c := range k.Opaques {
		shape := append(append([]int64{}, c.Batch...), c.Shape...)
		to := b.buffer(c.Result, fmt.Sprintf("%s/opaque%d", k.Label, i), device, c.DType, shape, plan.RoleWorkspace)
		if k.PackOnly && !slices.Contains(k.FactorKeys(k.GEMM.PackedFactor()), c.Result) {
			// Packing the weights reads no other call's result, and the
			// other calls may read values computed per run: their
			// buffers are passed unread.
			continue
		}
		call := &plan.OpaqueCall{Fn: c.Fn, Batch: c.Batch, Shape: c.Shape}
		for _, a := range c.Args {
			id, ok := b.bufferOf[a.Key]
			if !ok {
				return fmt.Errorf("%s: opaque %s reads %v, which has no buffer", k.Label, c.Fn, a.Key)
			}
			call.Args = append(call.Args, id)
			fixed := make([]int64, len(a.Fixed))
			for d, f := range a.Fixed {
				fixed[d] = int64(f)
			}
			call.Fixed = append(call.Fixed, fixed)
			b.touch(id)
		}
		b.touch(to)
		if init {
			b.keep(to)
		}
		b.addStep(device, init, plan.Step{Op: plan.Opaque, To: to, Call: call, Label: c.Fn + " for " + k.Label})
	}
	return nil
}

// kernel returns the plan index of k, compiled once per distinct IR.
func (b *builder) kernel(k *kernel.Kernel) (int, error) {
	name, err := kernelName(k, b.p.Precision)
	if err != nil {
		return 0, err
	}
	if idx, ok := b.kernelOf[name]; ok {
		return idx, nil
	}
	idx := len(b.p.Kernels)
	b.kernelOf[name] = idx
	b.units = append(b.units, k)
	form := emit.FormOf(k, b.p.Precision)
	launch := form.Launch(k, b.p.Precision)
	pk := plan.Kernel{Name: name, Label: k.Label, Kind: k.Kind.String(), Form: form.Name(), Elements: k.Elements,
		Grid: launch.Grid, Block: launch.Block, Shared: launch.Shared, DynamicShared: launch.DynamicShared, Sync: launch.Sync && !k.HostOnly(), Writes: k.Writes()}
	pk.HostRange, pk.HostGrain = form.HostRange(k)
	if k.GEMM != nil && !k.PackOnly {
		pk.HostPhase = blocking.GEMMPackItems(k.GEMM)
	}
	switch {
	case k.HostOnly():
		pk.HostOnly, pk.Grid, pk.Block, pk.Shared, pk.DynamicShared = true, 0, 0, 0, false
	case k.GPUOnly:
		pk.GPUOnly, pk.HostRange, pk.HostGrain, pk.HostPhase = true, 0, 0, 0
	}
	for _, a := range k.LaunchArgs() {
		pk.Args = append(pk.Args, plan.Arg{DType: a.DType.String(), Shape: a.Shape})
		if k.Before != nil && a.Key == k.Before.Out().Key {
			continue // a chain's rows stay in its tasks' caches, as the roofline prices them
		}
		n := int64(a.DType.Size())
		for _, d := range a.Shape {
			n *= d
		}
		pk.Bytes += n
	}
	if pk.FLOPs, err = kernelCount(k, cost.DefFLOPsRecomputing); err != nil {
		return 0, err
	}
	if !k.GPUOnly {
		hostFLOPs, err := hostCount(k, form, cost.DefFLOPsRecomputing)
		if err != nil {
			return 0, err
		}
		if hostFLOPs != pk.FLOPs { // its host form computes otherwise
			pk.HostFLOPs = hostFLOPs
		}
	}
	if !k.GPUOnly && !k.PackOnly { // the host runs it, and calls its functions
		if pk.MathCalls, err = mathCalls(k, form); err != nil {
			return 0, err
		}
	}
	pk.GEMMs = hostGEMMs(k)
	for _, s := range k.Sites {
		pk.Sites = append(pk.Sites, plan.Site{Pos: s.Pos.String(), Tensor: s.Tensor, Shape: s.Shape})
	}
	b.p.Kernels = append(b.p.Kernels, pk)
	return idx, nil
}

// hostGEMMs are the shapes of the packed products k's host flavour
// computes: the chained kernel's before its own; none for a kernel that
// only packs a factor.
func hostGEMMs(k *kernel.Kernel) []plan.GEMM {
	var out []plan.GEMM
	if k.Before != nil {
		out = hostGEMMs(k.Before)
	}
	if k.GEMM != nil && !k.PackOnly {
		out = append(out, k.GEMM.Shape())
	}
	return out
}

// counter counts something of a Def (cost.DefFLOPsRecomputing, say)
// whose reads of the tensors recomputed gives a Def for compute them
// where they read them.
type counter func(d *ir.Def, recomputed func(*ir.Tensor) *ir.Def) (int64, error)

// kernelCount is count over k's stages and row locals, and the kernel
// chained before it, less the sum an epilogue reads (a library computed
// it); reads of its other locals and of its inlined producers count
// their Defs where they read them (recomputedIn).
func kernelCount(k *kernel.Kernel, count counter) (int64, error) {
	defs := k.Stages
	if k.Rows != nil {
		for _, l := range k.Rows.Locals {
			defs = append(defs[:len(defs):len(defs)], l.Def)
		}
	}
	total, err := countAll(k, defs, count)
	if err != nil {
		return 0, err
	}
	if in := k.SumIn; in != nil { // an epilogue: a library computed the sum
		first := k.Stages[0]
		f, err := count(&ir.Def{Tensor: first.Tensor, Vars: first.Vars, Body: in.Reduce}, recomputedIn(k))
		if err != nil {
			return 0, err
		}
		total -= f
	}
	if k.Before != nil {
		f, err := kernelCount(k.Before, count)
		return total + f, err
	}
	return total, nil
}

// countAll is count summed over defs, which kernel k computes.
func countAll(k *kernel.Kernel, defs []*ir.Def, count counter) (int64, error) {
	var total int64
	recomputed := recomputedIn(k)
	for _, d := range defs {
		n, err := count(d, recomputed)
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

// recomputedIn says which tensors kernel k computes where it reads them
// (kernel.Source's Local): a Def for them, nil for the rest, for its
// row locals, which it computes once a row (counted as Defs of their
// own), and for what a contraction's factors read, which it computes
// once a packed element (rows · depth, or columns · depth), not at each
// of the sum's reads (rows · columns · depth): left out, as before.
func recomputedIn(k *kernel.Kernel) func(*ir.Tensor) *ir.Def {
	skip := map[*ir.Tensor]bool{}
	if k.Rows != nil {
		for _, l := range k.Rows.Locals {
			skip[l.Def.Tensor] = true
		}
	}
	if g := k.GEMM; g != nil {
		for _, factor := range []ir.Expr{g.A, g.B} {
			ir.Walk(factor, func(e ir.Expr) bool {
				if a, ok := e.(*ir.Access); ok {
					skip[a.T] = true
				}
				return true
			})
		}
	}
	return func(t *ir.Tensor) *ir.Def {
		if src, ok := k.Source(t); ok && src.Local != nil && !skip[t] {
			return src.Local
		}
		return nil
	}
}

// hostCount is count over what k's host flavour in form computes: its
// kernelCount, less and plus what the form computes otherwise
// (emit.Recounter).
func hostCount(k *kernel.Kernel, form emit.Form, count counter) (int64, error) {
	total, err := kernelCount(k, count)
	r, ok := form.(emit.Recounter)
	if err != nil || !ok {
		return total, err
	}
	dense, instead := r.HostDefs(k)
	less, err := countAll(k, dense, count)
	if err != nil {
		return 0, err
	}
	more, err := countAll(k, instead, count)
	return total - less + more, err
}

// mathCalls counts k's calls of each costly math function
// (cost.CalibratedMath), as its host flavour in form makes them (the
// simulator prices them on the host only), nil where it makes none.
func mathCalls(k *kernel.Kernel, form emit.Form) (map[string]int64, error) {
	var calls map[string]int64
	for _, fn := range cost.CalibratedMath {
		n, err := hostCount(k, form, func(d *ir.Def, recomputed func(*ir.Tensor) *ir.Def) (int64, error) {
			return cost.DefMathCalls(d, fn, recomputed)
		})
		if err != nil {
			return nil, err
		}
		if n > 0 {
			if calls == nil {
				calls = map[string]int64{}
			}
			calls[fn] = n
		}
	}
	return calls, nil
}

// kernelName is "k" and the start of the hash of k's GPU-flavour IR for
// the naming machine (target.Naming), and its host-flavour IR for a
// kernel whose GPU flavour does nothing (or when no target has a GPU
// machine): the same lambda on the same shapes and dtypes gets the same
// name, whatever the targets built. A GPU-only kernel's name differs
// from that of the same kernel run by both.
func kernelName(k *kernel.Kernel, prec precision.Mode) (string, error) {
	text := ""
	naming := target.Naming()
	lowerings := []emit.Machine{naming}
	if k.HostOnly() && naming != nil {
		lowerings = append(lowerings, nil)
	}
	if k.GPUOnly {
		text = "gpu only\n"
	}
	for _, mc := range lowerings {
		m := newModule(mc, prec)
		if err := m.Add("kernel", k); err != nil {
			return "", err
		}
		text += m.String()
	}
	// The IR of a 1-D read does not show its buffer's length: two workers
	// reading 60 and 64 elements of a bias alike need two kernels.
	for _, a := range k.LaunchArgs() {
		text += fmt.Sprintf("\n%s%v", a.DType, a.Shape)
	}
	h := sha256.Sum256([]byte(text))
	return "k" + hex.EncodeToString(h[:8]), nil
}
