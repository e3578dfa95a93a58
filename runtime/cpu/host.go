package cpu

import (
	"fmt"
	"runtime"

	"tofuc/runtime/executor"
	"tofuc/runtime/host"
	"tofuc/runtime/hostlib"
	"tofuc/runtime/native"
	"tofuc/runtime/plan"
)

// HostEngine runs host-flavour kernels natively.
type HostEngine struct {
	lib     *native.Library
	threads int
	pool    *pool // threads-1 workers, where there are several threads
	slots   *slots
}

// The host runs libraries' steps and quiets its pool before them.
var (
	_ host.LibraryEngine = (*HostEngine)(nil)
	_ host.Quieter       = (*HostEngine)(nil)
)

// Kind is the devices that run a plan's host module with this
// package's engine: `tofuc run --backend cpu`.
var Kind = executor.Kind{Name: "cpu", Module: Module, Summary: "host kernels, natively", Open: open}

// Module is the plan module (the target) of the host-flavour kernels.
const Module = "host"

func init() { executor.Register(Kind) }

func open(p *plan.Plan, dir string, opts executor.Options) ([]executor.Device, error) {
	e, err := NewHost(p, dir, Module, opts.Threads)
	if err != nil {
		return nil, err
	}
	return host.Open(p, e, host.ModeOf(opts.DevicesRun(p), opts)), nil
}

// NewHost loads the shared object of the plan module (target) called
// module, compiled into dir, whose kernels are host-flavour; threads <=
// 0 means GOMAXPROCS.
func NewHost(p *plan.Plan, dir, module string, threads int) (*HostEngine, error) {
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	hostlib.SetThreads(threads)
	e := &HostEngine{threads: threads, slots: newSlots(threads)}
	if len(p.Kernels) == 0 {
		return e, nil // nothing to launch
	}
	files := p.Modules[module].Files
	if len(files) != 1 {
		return nil, fmt.Errorf("the plan has no %s module (compile it with --emit %s)", module, module)
	}
	lib, err := native.OpenModule(p, dir, p.Modules[module])
	if err != nil {
		return nil, err
	}
	e.lib = lib
	if threads > 1 {
		e.pool = newPool(threads-1, spinFor)
	}
	return e, nil
}

// RunsLibraries reports that the host runs the library steps of
// placement groups (runtime/hostlib), as the plan chose them.
func (e *HostEngine) RunsLibraries() bool { return true }

// Quiet makes the pool's idle workers sleep until the next launch, for a
// host function that follows (host.Quieter).
func (e *HostEngine) Quiet() {
	if e.pool != nil {
		e.pool.quiet()
	}
}

// Runs reports whether k runs on the host (plan.Kernel.OnHost).
func (e *HostEngine) Runs(k *plan.Kernel) bool { return k.OnHost() }

// Launch runs a kernel's host range split over the threads: its first
// HostPhase items, all of them, before the rest.
func (e *HostEngine) Launch(k *plan.Kernel, argv uintptr) error {
	fn, err := e.lib.Symbol(k.Name)
	if err != nil {
		return err
	}
	if k.HostPhase > 0 {
		e.run(fn, argv, 0, k.HostPhase, 1)
	}
	e.run(fn, argv, k.HostPhase, k.HostRange, k.HostGrain)
	return nil
}

// run calls fn on items [lo, hi) split over the threads (the caller and
// the pool's workers), once the threads it needs are free (slots): one
// for a range that runs on the caller alone, all of them for one split
// over several. The range is cut into up to four pieces per
// thread (whole items, at least a grain each) that the threads take in
// turn, so that a thread slowed by another process on the machine, or a
// piece dearer than the others, does not hold the launch up while the
// other threads wait.
func (e *HostEngine) run(fn uintptr, argv uintptr, lo, hi, grain int64) {
	// Ranges smaller than a grain per thread run on fewer threads, so
	// that scheduling does not drown them.
	n := hi - lo
	grains := max(1, n/max(1, grain))
	parts := min(int64(e.threads), grains)
	if parts <= 1 {
		e.slots.acquire(1)
		defer e.slots.release(1)
		native.Call(fn, argv, uintptr(lo), uintptr(hi))
		return
	}
	// The pool's workers join any launch they see, so a launch split
	// over several threads holds them all.
	e.slots.acquire(e.threads)
	defer e.slots.release(e.threads)
	pieces := min(grains, 4*parts)
	e.pool.run(pieces, func(p int64) {
		native.Call(fn, argv, uintptr(lo+n*p/pieces), uintptr(lo+n*(p+1)/pieces))
	})
}

// Close stops the pool's workers and unloads the library.
func (e *HostEngine) Close() error {
	if e.pool != nil {
		e.pool.close()
	}
	if e.lib != nil {
		return e.lib.Close()
	}
	return nil
}
