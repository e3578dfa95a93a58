package executor

import (
	"fmt"
	"unsafe"

	"tofuc/runtime/hostlib"
	"tofuc/runtime/plan"
)

// LibraryDevice is a device that runs the vendor libraries' steps of a
// plan's placement groups (runtime/hostlib) when RunsLibraries says so:
// the host, not an emulated or a real GPU, which run the generated
// variant of every group.
type LibraryDevice interface {
	HostDevice
	RunsLibraries() bool
}

// chooseVariants sets the variant of every placement group that the
// program runs: the plan's choice where every device runs libraries and
// that library loads, the generated kernels elsewhere (with a note
// saying why, where the plan chose a library).
func (pr *Program) chooseVariants() {
	hosts := true
	for _, d := range pr.devs {
		ld, ok := d.(LibraryDevice)
		hosts = hosts && ok && ld.RunsLibraries()
	}
	missing := map[string]error{}
	pr.inForce = pr.Plan.InForce(func(backend string) bool {
		if !hosts {
			return false
		}
		if _, err := hostlib.Open(backend); err != nil {
			missing[backend] = err
			return false
		}
		return true
	})
	for backend, err := range missing {
		pr.Notes = append(pr.Notes, fmt.Sprintf("%v: the plan's steps placed on %s run tofuc's generated kernels instead", err, backend))
	}
}

// library returns the call of library step s on device dev, run on the
// host in the device's order.
func (pr *Program) library(d Device, s *plan.Step, where string) (func() error, error) {
	dev, ok := d.(HostDevice)
	if !ok { // a validated plan runs its library steps on a host only
		return nil, fmt.Errorf("the library step runs on a host, not on %s", d.Name())
	}
	lib, err := hostlib.Open(s.LibraryCall().Library())
	if err != nil {
		return nil, err
	}
	var buffers []int
	fixedWeights := false // W holds parameters: only a binding changes it
	if c := s.GEMM; c != nil {
		buffers = []int{c.A.Buffer, c.B.Buffer, c.C.Buffer}
	} else {
		buffers = []int{s.Conv.X.Buffer, s.Conv.W.Buffer, s.Conv.Y.Buffer}
		fixedWeights = pr.Plan.HoldsParameter(s.Conv.W.Buffer)
		release, err := lib.AcquireConv(s.Conv)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", lib.Version, err)
		}
		pr.releases = append(pr.releases, release)
	}
	return func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("%s: %s failed: %v", where, lib.Version, r)
			}
		}()
		var ptrs [3]unsafe.Pointer
		for i, id := range buffers {
			mem, err := dev.Bytes(pr.addr(id), pr.Plan.Buffers[id].Bytes)
			if err != nil {
				return fmt.Errorf("%s: %w", where, err)
			}
			ptrs[i] = unsafe.Pointer(unsafe.SliceData(mem))
		}
		if s.Conv != nil {
			var binding uint64 // 0: the weights may have changed
			if fixedWeights {
				binding = pr.binding
			}
			if err := lib.Conv(s.Conv, ptrs[0], ptrs[1], ptrs[2], binding); err != nil {
				return fmt.Errorf("%s: %w", where, err)
			}
			return nil
		}
		lib.GEMM(s.GEMM, ptrs[0], ptrs[1], ptrs[2])
		return nil
	}, nil
}

// libraryTiming describes the timing s of library step ref, which runs
// call c: its FLOPs and the bytes of its operands.
func (pr *Program) libraryTiming(ref plan.StepRef, c plan.LibraryCall, s Stats) KernelTiming {
	return KernelTiming{Device: ref.Device, Step: ref.Step, Label: pr.steps.steps[ref.Device][ref.Step].Label,
		Kernel: c.Library() + " " + c.Name(), Kind: "library", FLOPs: c.FLOPs(), Bytes: c.Bytes(), Time: s}
}
