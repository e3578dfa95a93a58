// Package cuda runs launch plans on NVIDIA GPUs. Its binding of the CUDA
// driver API loads libcuda.so.1 when first used, through
// github.com/ebitengine/purego: no cgo and no CUDA headers, so that a
// static binary built on a machine without CUDA runs on one with a GPU.
// Device implements runtime/gpu's Device on it; runtime/gpu executes
// the plans.
//
// Without a driver, Load says so in one line ("no CUDA driver:
// libcuda.so.1 not found") and everything that needs it returns that
// error. $TOFUC_LIBCUDA names another library to load instead (tests load
// a fake driver that way).
package cuda

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// result is a CUresult.
type result int32

// The driver's enumerations that tofuc uses (cuda.h).
const (
	attrMaxThreadsPerBlock = 1  // CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK
	attrMaxPitch           = 11 // CU_DEVICE_ATTRIBUTE_MAX_PITCH
	attrMultiprocessors    = 16 // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
	attrCCMajor            = 75 // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
	attrCCMinor            = 76 // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR
	attrMaxSharedOptIn     = 97 // CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN

	funcMaxThreadsPerBlock = 0 // CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK
	funcMaxDynamicShared   = 8 // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES

	jitErrorLogBuffer      = 5 // CU_JIT_ERROR_LOG_BUFFER
	jitErrorLogBufferSize  = 6 // CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES
	memoryHost             = 1 // CU_MEMORYTYPE_HOST
	memoryDevice           = 2 // CU_MEMORYTYPE_DEVICE
	streamNonBlocking      = 1 // CU_STREAM_NON_BLOCKING
	eventDisableTiming     = 2 // CU_EVENT_DISABLE_TIMING
	errorPeerAlreadyActive = 704

	errorNotReady = 600 // CUDA_ERROR_NOT_READY: cuStreamQuery's stream has work left
)

// memcpy3D is CUDA_MEMCPY3D_PEER; CUDA_MEMCPY3D has the same layout, with
// reserved words where this has the contexts.
type memcpy3D struct {
	srcX, srcY, srcZ, srcLOD uint64
	srcType                  uint32
	_                        uint32
	srcHost                  uintptr
	srcDevice                uint64
	srcArray                 uintptr
	srcContext               uintptr
	srcPitch, srcHeight      uint64
	dstX, dstY, dstZ, dstLOD uint64
	dstType                  uint32
	_                        uint32
	dstHost                  uintptr
	dstDevice                uint64
	dstArray                 uintptr
	dstContext               uintptr
	dstPitch, dstHeight      uint64
	width, height, depth     uint64
}

// Driver is the loaded CUDA driver library.
type Driver struct {
	Path    string
	Version int // cuDriverGetVersion: 1000·major + 10·minor

	cuInit                    func(flags uint32) result
	cuDriverGetVersion        func(v *int32) result
	cuGetErrorName            func(r result, s *uintptr) result
	cuGetErrorString          func(r result, s *uintptr) result
	cuDeviceGetCount          func(n *int32) result
	cuDeviceGet               func(d *int32, ordinal int32) result
	cuDeviceGetName           func(name *byte, n int32, d int32) result
	cuDeviceGetAttribute      func(v *int32, attr int32, d int32) result
	cuDeviceTotalMem          func(bytes *uint64, d int32) result
	cuDeviceCanAccessPeer     func(can *int32, d, peer int32) result
	cuDevicePrimaryCtxRetain  func(ctx *uintptr, d int32) result
	cuDevicePrimaryCtxRelease func(d int32) result
	cuCtxSetCurrent           func(ctx uintptr) result
	cuCtxEnablePeerAccess     func(peer uintptr, flags uint32) result
	cuModuleLoadDataEx        func(m *uintptr, image *byte, n uint32, opts *int32, vals *uintptr) result
	cuModuleUnload            func(m uintptr) result
	cuModuleGetFunction       func(f *uintptr, m uintptr, name string) result
	cuFuncGetAttribute        func(v *int32, attr int32, f uintptr) result
	cuFuncSetAttribute        func(f uintptr, attr int32, v int32) result
	cuMemAlloc                func(p *uint64, n uint64) result
	cuMemFree                 func(p uint64) result
	cuMemsetD8Async           func(p uint64, v uint8, n uint64, s uintptr) result
	cuMemcpyHtoD              func(dst uint64, src *byte, n uint64) result
	cuMemcpyDtoH              func(dst *byte, src uint64, n uint64) result
	cuMemcpy3D                func(c *memcpy3D) result
	cuMemcpy3DPeerAsync       func(c *memcpy3D, s uintptr) result
	cuMemcpyDtoDAsync         func(dst, src, n uint64, s uintptr) result
	cuMemcpyPeerAsync         func(dst uint64, dstCtx uintptr, src uint64, srcCtx uintptr, n uint64, s uintptr) result
	cuStreamCreate            func(s *uintptr, flags uint32) result
	cuStreamDestroy           func(s uintptr) result
	cuStreamSynchronize       func(s uintptr) result
	cuStreamQuery             func(s uintptr) result
	cuStreamWaitEvent         func(s, e uintptr, flags uint32) result
	cuEventCreate             func(e *uintptr, flags uint32) result
	cuEventDestroy            func(e uintptr) result
	cuEventRecord             func(e, s uintptr) result
	cuEventElapsedTime        func(ms *float32, start, end uintptr) result
	cuLaunchKernel            func(f uintptr, gx, gy, gz, bx, by, bz, shared uint32, s uintptr, params, extra uintptr) result
}

// symbols binds every function of Driver to its symbol in the library
// (versioned where the API was revised: cuMemAlloc_v2 and so on).
func (d *Driver) symbols() []struct {
	fn   any
	name string
} {
	return []struct {
		fn   any
		name string
	}{
		{&d.cuInit, "cuInit"}, {&d.cuDriverGetVersion, "cuDriverGetVersion"},
		{&d.cuGetErrorName, "cuGetErrorName"}, {&d.cuGetErrorString, "cuGetErrorString"},
		{&d.cuDeviceGetCount, "cuDeviceGetCount"}, {&d.cuDeviceGet, "cuDeviceGet"},
		{&d.cuDeviceGetName, "cuDeviceGetName"}, {&d.cuDeviceGetAttribute, "cuDeviceGetAttribute"},
		{&d.cuDeviceTotalMem, "cuDeviceTotalMem_v2"}, {&d.cuDeviceCanAccessPeer, "cuDeviceCanAccessPeer"},
		{&d.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"}, {&d.cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2"},
		{&d.cuCtxSetCurrent, "cuCtxSetCurrent"}, {&d.cuCtxEnablePeerAccess, "cuCtxEnablePeerAccess"},
		{&d.cuModuleLoadDataEx, "cuModuleLoadDataEx"}, {&d.cuModuleUnload, "cuModuleUnload"},
		{&d.cuModuleGetFunction, "cuModuleGetFunction"}, {&d.cuFuncGetAttribute, "cuFuncGetAttribute"},
		{&d.cuFuncSetAttribute, "cuFuncSetAttribute"},
		{&d.cuMemAlloc, "cuMemAlloc_v2"}, {&d.cuMemFree, "cuMemFree_v2"},
		{&d.cuMemsetD8Async, "cuMemsetD8Async"}, {&d.cuMemcpy3D, "cuMemcpy3D_v2"},
		{&d.cuMemcpyHtoD, "cuMemcpyHtoD_v2"}, {&d.cuMemcpyDtoH, "cuMemcpyDtoH_v2"},
		{&d.cuMemcpy3DPeerAsync, "cuMemcpy3DPeerAsync"}, {&d.cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2"},
		{&d.cuMemcpyPeerAsync, "cuMemcpyPeerAsync"},
		{&d.cuStreamCreate, "cuStreamCreate"}, {&d.cuStreamDestroy, "cuStreamDestroy_v2"},
		{&d.cuStreamSynchronize, "cuStreamSynchronize"}, {&d.cuStreamQuery, "cuStreamQuery"},
		{&d.cuStreamWaitEvent, "cuStreamWaitEvent"},
		{&d.cuEventCreate, "cuEventCreate"}, {&d.cuEventDestroy, "cuEventDestroy_v2"},
		{&d.cuEventRecord, "cuEventRecord"}, {&d.cuEventElapsedTime, "cuEventElapsedTime"},
		{&d.cuLaunchKernel, "cuLaunchKernel"},
	}
}

// libraryName is the driver library: $TOFUC_LIBCUDA, else libcuda.so.1.
func libraryName() string {
	if p := os.Getenv("TOFUC_LIBCUDA"); p != "" {
		return p
	}
	return "libcuda.so.1"
}

var (
	loadOnce   sync.Once
	loaded     *Driver
	loadFailed error
)

// Load loads the driver (libraryName) and initialises it, once per
// process.
func Load() (*Driver, error) {
	loadOnce.Do(func() { loaded, loadFailed = LoadFrom(libraryName()) })
	return loaded, loadFailed
}

// missing reports whether dlopen's failure err means that there is no
// library at path.
func missing(path string, err error) bool {
	if strings.Contains(err.Error(), "No such file") {
		return true
	}
	_, serr := os.Stat(path)
	return strings.Contains(path, "/") && errors.Is(serr, fs.ErrNotExist)
}

// LoadFrom loads and initialises the driver library at path.
func LoadFrom(path string) (*Driver, error) {
	// dlerror's message is the thread's: the goroutine must not move to
	// another thread between dlopen and the dlerror purego reads (the
	// message once came back empty in a busy test run).
	runtime.LockOSThread()
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	runtime.UnlockOSThread()
	if err != nil {
		if missing(path, err) {
			return nil, fmt.Errorf("no CUDA driver: %s not found", path)
		}
		return nil, fmt.Errorf("no CUDA driver: cannot load %s: %w", path, err)
	}
	d := &Driver{Path: path}
	for _, s := range d.symbols() {
		addr, err := purego.Dlsym(h, s.name)
		if err != nil {
			return nil, fmt.Errorf("no usable CUDA driver: %s has no %s", path, s.name)
		}
		purego.RegisterFunc(s.fn, addr)
	}
	if err := d.check("cuInit", d.cuInit(0)); err != nil {
		return nil, fmt.Errorf("the CUDA driver %s does not start: %w", path, err)
	}
	var v int32
	if err := d.check("cuDriverGetVersion", d.cuDriverGetVersion(&v)); err != nil {
		return nil, err
	}
	d.Version = int(v)
	return d, nil
}

// check turns a CUresult into an error naming the call.
func (d *Driver) check(call string, r result) error {
	if r == 0 {
		return nil
	}
	var name, desc uintptr
	d.cuGetErrorName(r, &name)
	d.cuGetErrorString(r, &desc)
	if name == 0 {
		return fmt.Errorf("%s: CUDA error %d", call, r)
	}
	return fmt.Errorf("%s: %s (%d): %s", call, goString(name), r, goString(desc))
}

// goString copies the NUL-terminated C string at p (memory of the
// driver's) into a Go string.
func goString(p uintptr) string {
	// Through a pointer to p, so that vet sees no uintptr conversion: the
	// memory is the driver's, never Go's, and stays where it is.
	ptr := *(*unsafe.Pointer)(unsafe.Pointer(&p))
	if ptr == nil {
		return ""
	}
	n := 0
	for *(*byte)(unsafe.Add(ptr, n)) != 0 {
		n++
	}
	return string(unsafe.Slice((*byte)(ptr), n))
}

// VersionString is the driver's version as major.minor.
func (d *Driver) VersionString() string {
	return fmt.Sprintf("%d.%d", d.Version/1000, d.Version%1000/10)
}

// Describe names the driver: its version and library.
func (d *Driver) Describe() string {
	return fmt.Sprintf("CUDA driver %s (%s)", d.VersionString(), d.Path)
}

// GPU describes one GPU.
type GPU struct {
	Ordinal        int
	Name           string
	Major, Minor   int // compute capability
	Memory         int64
	Multiprocessor int
}

// GPUs lists the GPUs the driver sees.
func (d *Driver) GPUs() ([]GPU, error) {
	var n int32
	if err := d.check("cuDeviceGetCount", d.cuDeviceGetCount(&n)); err != nil {
		return nil, err
	}
	out := make([]GPU, n)
	for i := range out {
		g, err := d.describe(i)
		if err != nil {
			return nil, err
		}
		out[i] = g
	}
	return out, nil
}

func (d *Driver) describe(ordinal int) (GPU, error) {
	g := GPU{Ordinal: ordinal}
	var dev int32
	if err := d.check("cuDeviceGet", d.cuDeviceGet(&dev, int32(ordinal))); err != nil {
		return g, err
	}
	name := make([]byte, 256)
	if err := d.check("cuDeviceGetName", d.cuDeviceGetName(&name[0], int32(len(name)), dev)); err != nil {
		return g, err
	}
	g.Name, _, _ = strings.Cut(string(name), "\x00")
	var mem uint64
	if err := d.check("cuDeviceTotalMem", d.cuDeviceTotalMem(&mem, dev)); err != nil {
		return g, err
	}
	g.Memory = int64(mem)
	for _, a := range []struct {
		attr int32
		v    *int
	}{{attrCCMajor, &g.Major}, {attrCCMinor, &g.Minor}, {attrMultiprocessors, &g.Multiprocessor}} {
		var v int32
		if err := d.check("cuDeviceGetAttribute", d.cuDeviceGetAttribute(&v, a.attr, dev)); err != nil {
			return g, err
		}
		*a.v = int(v)
	}
	return g, nil
}

func (g GPU) String() string {
	return fmt.Sprintf("%s (sm_%d%d, %.1f GiB, %d SMs)", g.Name, g.Major, g.Minor, float64(g.Memory)/(1<<30), g.Multiprocessor)
}

// Probe describes the driver and its GPUs in one line, or why there is
// none.
func Probe() string {
	d, err := Load()
	if err != nil {
		return err.Error()
	}
	gpus, err := d.GPUs()
	if err != nil {
		return fmt.Sprintf("%s: %v", d.Describe(), err)
	}
	names := make([]string, len(gpus))
	for i, g := range gpus {
		names[i] = g.String()
	}
	return fmt.Sprintf("%s, %d GPU(s): %s", d.Describe(), len(gpus), strings.Join(names, "; "))
}
