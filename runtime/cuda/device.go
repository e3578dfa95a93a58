package cuda

import (
	"errors"
	"fmt"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"unsafe"

	"tofuc/runtime/executor"
	"tofuc/runtime/native"
	"tofuc/runtime/plan"
)

// context is one GPU's primary context with a plan's modules loaded.
type context struct {
	drv      *Driver
	plan     *plan.Plan
	gpu      GPU
	dev      int32
	ctx      uintptr
	modules  []uintptr
	funcs    []uintptr // per plan kernel
	maxPitch int64
	users    int        // the open logical devices on it
	blas     uintptr    // its cuBLAS handle, made on first use (cublasHandle)
	blasAPI  *cublasAPI // the cuBLAS that made it
	dnn      uintptr    // its cuDNN handle, made on first use (cudnnHandle)
	dnnAPI   *cudnnAPI  // the cuDNN that made it
	convs    map[string]*cudnnConv
}

// device is a logical device of a plan: a stream on a GPU's context.
type device struct {
	c      *context
	id     int
	stream uintptr
	events []uintptr
}

// do runs f with c's context current on this OS thread.
func (c *context) do(f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := c.drv.check("cuCtxSetCurrent", c.drv.cuCtxSetCurrent(c.ctx)); err != nil {
		return err
	}
	return f()
}

// Open loads plan p, compiled into dir, onto the GPUs: logical device d
// runs on GPU d mod (the number of GPUs), each logical device with a
// stream of its own. The PTX modules are loaded once per GPU (the driver
// compiles them for it; a failure shows the JIT's error log). Logical
// devices on different GPUs copy between them directly where the GPUs
// allow peer access.
func (d *Driver) Open(p *plan.Plan, dir string) ([]executor.Device, error) {
	return d.open(p, dir, -1, 0)
}

// OpenRank opens logical device rank of plan p alone, on GPU gpu mod
// the number of GPUs (a machine's ranks take its GPUs in turn: gpu is
// the rank's local rank), for the process that runs it as a rank
// (executor.LoadRank): the other devices' entries are nil.
func (d *Driver) OpenRank(p *plan.Plan, dir string, rank, gpu int) ([]executor.Device, error) {
	if rank < 0 || rank >= p.Devices || gpu < 0 {
		return nil, fmt.Errorf("rank %d of a plan of %d devices, on GPU %d", rank, p.Devices, gpu)
	}
	return d.open(p, dir, rank, gpu)
}

// open opens every logical device of p, or only device only (>= 0) on
// GPU gpu mod the GPUs.
func (d *Driver) open(p *plan.Plan, dir string, only, gpu int) ([]executor.Device, error) {
	gpus, err := d.GPUs()
	if err != nil {
		return nil, err
	}
	if len(gpus) == 0 {
		return nil, fmt.Errorf("the CUDA driver sees no GPU")
	}
	ptx, err := readPTX(p, dir)
	if err != nil {
		return nil, err
	}
	contexts := make([]*context, min(len(gpus), p.Devices))
	if only >= 0 { // one context, on the rank's GPU
		contexts = make([]*context, 1)
		gpus = gpus[gpu%len(gpus):]
	}
	devs := make([]executor.Device, p.Devices)
	fail := func(err error) ([]executor.Device, error) {
		for _, v := range devs {
			if v != nil {
				v.(*device).destroy()
			}
		}
		for _, c := range contexts {
			c.release()
		}
		return nil, err
	}
	for i := range contexts {
		if contexts[i], err = d.newContext(gpus[i], p, ptx); err != nil {
			return fail(err)
		}
	}
	if only < 0 { // a rank's device copies only to and from itself
		if err := enablePeers(contexts); err != nil {
			return fail(err)
		}
	}
	for i := range p.Devices {
		if only >= 0 && i != only {
			continue
		}
		v := &device{c: contexts[i%len(contexts)], id: i} // a rank's one context: i mod 1
		err := v.c.do(func() error {
			return d.check("cuStreamCreate", d.cuStreamCreate(&v.stream, streamNonBlocking))
		})
		if err != nil {
			return fail(err)
		}
		v.c.users++
		devs[i] = v
	}
	return devs, nil
}

// readPTX reads plan p's PTX modules from dir and checks that they hold
// its kernels.
func readPTX(p *plan.Plan, dir string) ([][]byte, error) {
	files := p.Modules[Module].Files
	if len(p.Kernels) > 0 && len(files) == 0 {
		return nil, fmt.Errorf("the plan has no PTX modules (compile it with --emit ptx)")
	}
	for _, k := range p.Kernels {
		if k.Module >= len(files) {
			return nil, fmt.Errorf("kernel %s: module %d of %d PTX modules", k.Name, k.Module, len(files))
		}
	}
	ptx := make([][]byte, len(files))
	for i, m := range files {
		var err error
		if ptx[i], err = m.Read(dir); err != nil {
			return nil, err
		}
	}
	if err := p.CheckKernels("the PTX modules", func(sym string) ([]byte, error) { return ptxBytes(ptx, sym) }); err != nil {
		return nil, err
	}
	return ptx, nil
}

// newContext retains g's primary context, loads the modules and finds
// every kernel.
func (d *Driver) newContext(g GPU, p *plan.Plan, ptx [][]byte) (*context, error) {
	c := &context{drv: d, plan: p, gpu: g}
	if err := d.check("cuDeviceGet", d.cuDeviceGet(&c.dev, int32(g.Ordinal))); err != nil {
		return c, err
	}
	if err := d.check("cuDevicePrimaryCtxRetain", d.cuDevicePrimaryCtxRetain(&c.ctx, c.dev)); err != nil {
		return c, err
	}
	var pitch int32
	if err := d.check("cuDeviceGetAttribute", d.cuDeviceGetAttribute(&pitch, attrMaxPitch, c.dev)); err != nil {
		return c, err
	}
	c.maxPitch = int64(pitch)
	err := c.do(func() error {
		for i, text := range ptx {
			m, err := d.loadModule(text)
			if err != nil {
				return fmt.Errorf("%s on GPU %d: %w", p.Modules[Module].Files[i].Path, g.Ordinal, err)
			}
			c.modules = append(c.modules, m)
		}
		for _, k := range p.Kernels {
			f, err := d.function(c.modules[k.Module], c.dev, k)
			if err != nil {
				return err
			}
			c.funcs = append(c.funcs, f)
		}
		return nil
	})
	return c, err
}

// release unloads the modules and releases the primary context.
func (c *context) release() error {
	if c == nil || c.ctx == 0 {
		return nil
	}
	d := c.drv
	var errs []error
	errs = append(errs, c.do(func() error {
		errs = append(errs, c.destroyCUBLAS(), c.destroyCUDNN())
		for _, m := range c.modules {
			errs = append(errs, d.check("cuModuleUnload", d.cuModuleUnload(m)))
		}
		return nil
	}))
	errs = append(errs, d.check("cuDevicePrimaryCtxRelease", d.cuDevicePrimaryCtxRelease(c.dev)))
	c.modules, c.ctx = nil, 0
	return errors.Join(errs...)
}

// jitLogBytes is the size of the JIT's error log.
const jitLogBytes = 1 << 16

// loadModule loads PTX into the current context; when the JIT fails,
// the error carries its log.
func (d *Driver) loadModule(ptx []byte) (uintptr, error) {
	log, err := native.Alloc(jitLogBytes) // the driver writes it: not Go memory
	if err != nil {
		return 0, err
	}
	defer log.Free()
	opts := []int32{jitErrorLogBuffer, jitErrorLogBufferSize}
	vals := []uintptr{log.Addr(0), jitLogBytes}
	image := append(append([]byte{}, ptx...), 0)
	var m uintptr
	r := d.cuModuleLoadDataEx(&m, &image[0], uint32(len(opts)), &opts[0], &vals[0])
	if err := d.check("cuModuleLoadDataEx", r); err != nil {
		text, _, _ := strings.Cut(string(log.Bytes()), "\x00")
		if text = strings.TrimSpace(text); text != "" {
			return 0, fmt.Errorf("%w\n%s", err, text)
		}
		return 0, err
	}
	return m, nil
}

// function finds kernel k in module m of the GPU dev, checks that its
// block fits, and opts it in to dynamic shared memory beyond
// plan.MaxShared where it asks for that much.
func (d *Driver) function(m uintptr, dev int32, k plan.Kernel) (uintptr, error) {
	var f uintptr
	if err := d.check("cuModuleGetFunction "+k.Name, d.cuModuleGetFunction(&f, m, k.Name)); err != nil {
		return 0, err
	}
	var most int32
	if err := d.check("cuFuncGetAttribute", d.cuFuncGetAttribute(&most, funcMaxThreadsPerBlock, f)); err != nil {
		return 0, err
	}
	if k.Block > int64(most) {
		return 0, fmt.Errorf("kernel %s (%s): blocks of %d threads, the GPU runs at most %d of it", k.Name, k.Label, k.Block, most)
	}
	if k.DynamicShared && k.Shared > plan.MaxShared {
		var optIn int32
		if err := d.check("cuDeviceGetAttribute", d.cuDeviceGetAttribute(&optIn, attrMaxSharedOptIn, dev)); err != nil {
			return 0, err
		}
		if k.Shared > int64(optIn) {
			return 0, fmt.Errorf("kernel %s (%s): %d bytes of shared memory a block, the GPU gives at most %d", k.Name, k.Label, k.Shared, optIn)
		}
		if err := d.check("cuFuncSetAttribute", d.cuFuncSetAttribute(f, funcMaxDynamicShared, int32(k.Shared))); err != nil {
			return 0, err
		}
	}
	return f, nil
}

// enablePeers lets every GPU read the others' memory where the hardware
// allows it (peer copies work without, staged through the host).
func enablePeers(cs []*context) error {
	for _, a := range cs {
		for _, b := range cs {
			if a == b {
				continue
			}
			d := a.drv
			var can int32
			if err := d.check("cuDeviceCanAccessPeer", d.cuDeviceCanAccessPeer(&can, a.dev, b.dev)); err != nil {
				return err
			}
			if can == 0 {
				continue
			}
			err := a.do(func() error {
				if r := d.cuCtxEnablePeerAccess(b.ctx, 0); r != errorPeerAlreadyActive {
					return d.check("cuCtxEnablePeerAccess", r)
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// Runs reports whether a GPU launches k (plan.Kernel.OnGPU).
func (v *device) Runs(k *plan.Kernel) bool { return k.OnGPU() }

func (v *device) Name() string {
	return fmt.Sprintf("GPU %d: %s", v.c.gpu.Ordinal, v.c.gpu.Name)
}

func (v *device) Alloc(n int64) (executor.Ptr, error) {
	var p uint64
	err := v.c.do(func() error { return v.c.drv.check("cuMemAlloc", v.c.drv.cuMemAlloc(&p, uint64(max(n, 1)))) })
	return executor.Ptr(p), err
}

func (v *device) Free(p executor.Ptr) error {
	return v.c.do(func() error { return v.c.drv.check("cuMemFree", v.c.drv.cuMemFree(uint64(p))) })
}

// pitched is the 3-D copy of r, its addresses and memory types left
// for the caller to fill in.
func pitched(r executor.Rows) *memcpy3D {
	return &memcpy3D{width: uint64(r.Width), height: uint64(r.Height), depth: uint64(r.Depth),
		srcPitch: uint64(r.SrcPitch), srcHeight: uint64(r.SrcSlice / r.SrcPitch),
		dstPitch: uint64(r.DstPitch), dstHeight: uint64(r.DstSlice / r.DstPitch)}
}

// hostCopy is the 3-D copy of r between host memory and device memory.
func hostCopy(r executor.Rows, host []byte, dev executor.Ptr, toDevice bool) *memcpy3D {
	c := pitched(r)
	addr := uintptr(unsafe.Pointer(unsafe.SliceData(host)))
	if toDevice {
		c.srcType, c.srcHost = memoryHost, addr+uintptr(r.SrcOff)
		c.dstType, c.dstDevice = memoryDevice, uint64(dev)+uint64(r.DstOff)
	} else {
		c.srcType, c.srcDevice = memoryDevice, uint64(dev)+uint64(r.SrcOff)
		c.dstType, c.dstHost = memoryHost, addr+uintptr(r.DstOff)
	}
	return c
}

func (v *device) Upload(dst executor.Ptr, src []byte, r executor.Rows) error {
	if err := hostRange(src, r.SrcOff, r.SrcPitch, r.SrcSlice, r); err != nil {
		return err
	}
	d := v.c.drv
	err := v.hostTransfer(r, src, dst, true, func(so, do int64) error {
		return d.check("cuMemcpyHtoD", d.cuMemcpyHtoD(uint64(dst)+uint64(do), &src[so], uint64(r.Width)))
	})
	if err != nil {
		return err
	}
	// From pageable memory, cuMemcpyHtoD may return before its DMA ends:
	// the work after it, on the device's non-blocking stream, would not
	// wait for the legacy stream's copy.
	return v.c.do(func() error { return d.check("cuStreamSynchronize", d.cuStreamSynchronize(0)) })
}

func (v *device) Download(dst []byte, src executor.Ptr, r executor.Rows) error {
	if err := hostRange(dst, r.DstOff, r.DstPitch, r.DstSlice, r); err != nil {
		return err
	}
	d := v.c.drv
	return v.hostTransfer(r, dst, src, false, func(so, do int64) error {
		return d.check("cuMemcpyDtoH", d.cuMemcpyDtoH(&dst[do], uint64(src)+uint64(so), uint64(r.Width)))
	})
}

// hostRange checks that the rows of r on the host side lie in host.
func hostRange(host []byte, off, pitch, slice int64, r executor.Rows) error {
	if r.Bytes() > 0 && (off < 0 || off+(r.Depth-1)*slice+(r.Height-1)*pitch+r.Width > int64(len(host))) {
		return fmt.Errorf("a copy of rows %+v outside %d host bytes", r, len(host))
	}
	return nil
}

// hostTransfer runs a synchronous copy of r between host memory and
// device memory at dev: one 3-D copy, or row by row (row copies src
// offset, dst offset) when there is one row or a pitch is beyond the
// GPU's limit for 3-D copies.
func (v *device) hostTransfer(r executor.Rows, host []byte, dev executor.Ptr, toDevice bool, row func(so, do int64) error) error {
	if r.Bytes() == 0 {
		return nil
	}
	return v.c.do(func() error {
		if r.Height*r.Depth > 1 && max(r.SrcPitch, r.DstPitch) <= v.c.maxPitch {
			err := v.c.drv.check("cuMemcpy3D", v.c.drv.cuMemcpy3D(hostCopy(r, host, dev, toDevice)))
			runtime.KeepAlive(host) // the descriptor holds its address
			return err
		}
		return eachRow(r, row)
	})
}

// eachRow calls f with the offsets of every row of r until it fails.
func eachRow(r executor.Rows, f func(so, do int64) error) error {
	var err error
	r.Each(func(so, do int64) {
		if err == nil {
			err = f(so, do)
		}
	})
	return err
}

func (v *device) Copy(dst executor.Ptr, from executor.Device, src executor.Ptr, r executor.Rows) error {
	f, ok := from.(*device)
	if !ok {
		return fmt.Errorf("a copy from %s, not a CUDA device", from.Name())
	}
	if r.Bytes() == 0 {
		return nil
	}
	d := v.c.drv
	return v.c.do(func() error {
		if r.Height == 1 && r.Depth == 1 {
			return v.copyRow(f, dst+executor.Ptr(r.DstOff), src+executor.Ptr(r.SrcOff), r.Width)
		}
		if max(r.SrcPitch, r.DstPitch) > min(v.c.maxPitch, f.c.maxPitch) {
			return eachRow(r, func(so, do int64) error { return v.copyRow(f, dst+executor.Ptr(do), src+executor.Ptr(so), r.Width) })
		}
		c := pitched(r)
		c.srcType, c.srcContext, c.srcDevice = memoryDevice, f.c.ctx, uint64(src)+uint64(r.SrcOff)
		c.dstType, c.dstContext, c.dstDevice = memoryDevice, v.c.ctx, uint64(dst)+uint64(r.DstOff)
		return d.check("cuMemcpy3DPeerAsync", d.cuMemcpy3DPeerAsync(c, v.stream))
	})
}

// copyRow enqueues a copy of n contiguous bytes from device f.
func (v *device) copyRow(f *device, dst, src executor.Ptr, n int64) error {
	d := v.c.drv
	if f.c == v.c {
		return d.check("cuMemcpyDtoDAsync", d.cuMemcpyDtoDAsync(uint64(dst), uint64(src), uint64(n), v.stream))
	}
	return d.check("cuMemcpyPeerAsync", d.cuMemcpyPeerAsync(uint64(dst), v.c.ctx, uint64(src), f.c.ctx, uint64(n), v.stream))
}

func (v *device) Zero(p executor.Ptr, n int64) error {
	if n == 0 {
		return nil
	}
	d := v.c.drv
	return v.c.do(func() error { return d.check("cuMemsetD8Async", d.cuMemsetD8Async(uint64(p), 0, uint64(n), v.stream)) })
}

func (v *device) Launch(k int, a *executor.Args) error {
	f, kern := v.c.funcs[k], &v.c.plan.Kernels[k]
	d := v.c.drv
	dynamic := uint32(0) // static shared memory is declared in the PTX
	if kern.DynamicShared {
		dynamic = uint32(kern.Shared)
	}
	return v.c.do(func() error {
		return d.check("cuLaunchKernel", d.cuLaunchKernel(f, uint32(kern.Grid), 1, 1, uint32(kern.Block), 1, 1, dynamic, v.stream, a.Params(), 0))
	})
}

func (v *device) NewEvent(timing bool) (executor.Event, error) {
	flags := uint32(eventDisableTiming)
	if timing {
		flags = 0
	}
	var e uintptr
	err := v.c.do(func() error { return v.c.drv.check("cuEventCreate", v.c.drv.cuEventCreate(&e, flags)) })
	if err != nil {
		return 0, err
	}
	v.events = append(v.events, e)
	return executor.Event(e), nil
}

func (v *device) Record(e executor.Event) error {
	d := v.c.drv
	return v.c.do(func() error { return d.check("cuEventRecord", d.cuEventRecord(uintptr(e), v.stream)) })
}

func (v *device) Wait(e executor.Event) error {
	d := v.c.drv
	return v.c.do(func() error { return d.check("cuStreamWaitEvent", d.cuStreamWaitEvent(v.stream, uintptr(e), 0)) })
}

func (v *device) Elapsed(start, end executor.Event) (float64, error) {
	var ms float32
	d := v.c.drv
	err := v.c.do(func() error {
		return d.check("cuEventElapsedTime", d.cuEventElapsedTime(&ms, uintptr(start), uintptr(end)))
	})
	return float64(ms), err
}

func (v *device) Sync() error {
	d := v.c.drv
	return v.c.do(func() error { return d.check("cuStreamSynchronize", d.cuStreamSynchronize(v.stream)) })
}

// Close destroys the device's events and stream; the last device of a
// GPU to close releases the GPU's context.
func (v *device) Close() error {
	if v.stream == 0 {
		return nil // closed already
	}
	err := v.destroy()
	if v.c.users--; v.c.users == 0 {
		err = errors.Join(err, v.c.release())
	}
	return err
}

// destroy destroys the device's events and stream.
func (v *device) destroy() error {
	d := v.c.drv
	var errs []error
	errs = append(errs, v.c.do(func() error {
		for _, e := range v.events {
			errs = append(errs, d.check("cuEventDestroy", d.cuEventDestroy(e)))
		}
		return d.check("cuStreamDestroy", d.cuStreamDestroy(v.stream))
	}))
	v.events, v.stream = nil, 0
	return errors.Join(errs...)
}

// ptxGlobal is a global array of bytes in PTX text, as llc writes one.
var ptxGlobal = regexp.MustCompile(`\.global \.align \d+ \.b8 ([A-Za-z0-9_$]+)\[(\d+)\] = \{([0-9, ]*)\}`)

// ptxBytes returns the bytes of the global called name in one of the
// PTX modules, up to its first NUL.
func ptxBytes(modules [][]byte, name string) ([]byte, error) {
	for _, m := range modules {
		for _, g := range ptxGlobal.FindAllSubmatch(m, -1) {
			if string(g[1]) != name {
				continue
			}
			var out []byte
			for _, f := range strings.Split(string(g[3]), ",") {
				v, err := strconv.Atoi(strings.TrimSpace(f))
				if err != nil || v < 0 || v > 255 {
					return nil, fmt.Errorf("the global %s is no array of bytes", name)
				}
				if v == 0 {
					break
				}
				out = append(out, byte(v))
			}
			return out, nil
		}
	}
	return nil, fmt.Errorf("no global %s", name)
}

// Module is the plan module (the target) a GPU runs: the PTX modules.
const Module = "nvptx"

// Kind is the devices of NVIDIA GPUs, through the driver Load finds:
// `tofuc-run`'s devices.
var Kind = executor.Kind{Name: "cuda", Module: Module, Summary: "NVIDIA GPUs, through the CUDA driver", Open: func(p *plan.Plan, dir string, _ executor.Options) ([]executor.Device, error) {
	d, err := Load()
	if err != nil {
		return nil, err
	}
	return d.Open(p, dir)
}}

func init() { executor.Register(Kind) }
