// Package simt is tofuc's SIMT emulator: it runs the GPU-flavour kernels
// of a plan on the CPU, retargeted to the host by codegen/simt and linked
// with the runtime in csrc/simt.c, so that the IR that becomes PTX is tested
// on machines without a GPU. Blocks are spread over threads; within a
// block, a kernel that meets at barriers or warp shuffles runs each GPU
// thread as a fiber (see csrc/simt.c). docs/codegen.md lists what differs
// between the emulated module and the PTX module.
package simt

import (
	"fmt"
	"runtime"
	"sync"

	"tofuc/runtime/executor"
	"tofuc/runtime/host"
	"tofuc/runtime/native"
	"tofuc/runtime/plan"
)

// Engine runs GPU-flavour kernels under the emulator.
type Engine struct {
	lib     *native.Library
	run     uintptr
	threads int
}

// New loads the SIMT shared object of a plan compiled into dir; threads
// <= 0 means GOMAXPROCS.
func New(p *plan.Plan, dir string, threads int) (*Engine, error) {
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	e := &Engine{threads: threads}
	if len(p.Kernels) == 0 {
		return e, nil // nothing to launch
	}
	files := p.Modules[Module].Files
	if len(files) != 1 {
		return nil, fmt.Errorf("the plan has no SIMT module (compile it with --emit simt)")
	}
	lib, err := native.OpenModule(p, dir, p.Modules[Module])
	if err != nil {
		return nil, err
	}
	if e.run, err = lib.Symbol("tofuc_simt_run"); err != nil {
		lib.Close()
		return nil, err
	}
	e.lib = lib
	return e, nil
}

// Kind is the devices that run a plan's GPU-flavour kernels under the
// emulator: `tofuc run --backend simt`.
var Kind = executor.Kind{Name: "simt", Module: Module, Summary: "GPU kernels, emulated on the host", Open: open}

// Module is the plan module (the target) of the emulated kernels.
const Module = "simt"

func init() { executor.Register(Kind) }

func open(p *plan.Plan, dir string, opts executor.Options) ([]executor.Device, error) {
	e, err := New(p, dir, opts.Threads)
	if err != nil {
		return nil, err
	}
	return host.Open(p, e, host.ModeOf(opts.DevicesRun(p), opts)), nil
}

// Runs reports whether a GPU launches k (plan.Kernel.OnGPU): the
// emulator runs the GPU flavour.
func (e *Engine) Runs(k *plan.Kernel) bool { return k.OnGPU() }

// Launch runs a kernel's grid, its blocks split over the threads.
func (e *Engine) Launch(k *plan.Kernel, argv uintptr) error {
	entry, err := e.lib.Symbol(k.Name + ".simt")
	if err != nil {
		return err
	}
	synced := uintptr(0)
	if k.Sync {
		synced = 1
	}
	parts := min(int64(e.threads), k.Grid)
	codes := make([]int64, parts)
	var wg sync.WaitGroup
	for i := range parts {
		lo, hi := k.Grid*i/parts, k.Grid*(i+1)/parts
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i] = int64(native.Call(e.run, entry, argv, uintptr(k.Grid), uintptr(k.Block), uintptr(lo), uintptr(hi), synced))
		}()
	}
	wg.Wait()
	for _, c := range codes {
		switch int32(c) {
		case 0:
		case -1:
			return fmt.Errorf("the threads of a block wait at a barrier that some of them never reach")
		case -2:
			return fmt.Errorf("a barrier or warp shuffle in a kernel launched without synchronisation")
		case -4:
			return fmt.Errorf("a warp of fewer than 32 threads at a warp-wide matrix load or product (ldmatrix, mma)")
		case -5:
			return fmt.Errorf("a thread with more asynchronous copies (cp.async) pending than the emulator holds")
		case -6:
			return fmt.Errorf("a 16-byte asynchronous copy (cp.async) or an ldmatrix row at an address that is not 16-byte aligned")
		default:
			return fmt.Errorf("the emulator cannot run a block of %d threads", k.Block)
		}
	}
	return nil
}

// Close unloads the library.
func (e *Engine) Close() error {
	if e.lib == nil {
		return nil
	}
	return e.lib.Close()
}
