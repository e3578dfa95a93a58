package executor

import (
	"errors"
	"fmt"
	"slices"
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

// StreamLibraryDevice is a device with vendor libraries of its own (a
// GPU's cuBLAS) that run a plan's library steps on its stream.
type StreamLibraryDevice interface {
	Device
	// LoadLibrary loads backend's library for the device, or says why
	// it cannot (another device's library, or missing here).
	LoadLibrary(backend string) error
	// PrepareLibrary makes what library step s needs on the device (a
	// convolution's descriptors, algorithm and workspace), or says why
	// the device cannot run it.
	PrepareLibrary(s *plan.Step) error
	// Library enqueues library step s, prepared, its operands'
	// buffers at ptrs (plan.Step.LibraryBuffers).
	Library(s *plan.Step, ptrs []Ptr) error
}

// ErrOtherDevice is StreamLibraryDevice.LoadLibrary's error for a
// backend of another kind of device (a host library on a GPU): no
// library is missing.
var ErrOtherDevice = errors.New("a library of another kind of device")

// chooseVariants sets the variant of every placement group that the
// program runs. On hosts that run libraries: the plan's choice, where
// that library loads. On devices with libraries of their own (GPUs):
// the group's first candidate that they load, none of which the compile
// could time (docs/placement.md). Elsewhere, and where the library is
// missing, the generated kernels, with a note saying why.
func (pr *Program) chooseVariants() {
	missing := map[string]error{}
	pr.loaded = map[string]bool{plan.Generated: true}
	can := func(backend string) bool {
		for i, d := range pr.devs {
			if !pr.local(i) {
				continue // the rank's own choice (the ranks agree on it when the plan loads)
			}
			if err := runsLibrary(d, backend); err != nil {
				if !errors.Is(err, ErrOtherDevice) {
					missing[backend] = err
				}
				return false
			}
		}
		pr.loaded[backend] = true
		return true
	}
	if pr.onGPUs() {
		pr.inForce = pr.Plan.FirstCandidates(can)
		pr.prepareLibraries()
	} else {
		pr.inForce = pr.Plan.InForce(can)
	}
	for backend, err := range missing {
		pr.Notes = append(pr.Notes, fmt.Sprintf("%v: the plan's steps placed on %s run tofuc's generated kernels instead", err, backend))
	}
}

// onGPUs reports whether the program's devices have libraries of their
// own (a plan's devices are all of one kind; a rank's is its own).
func (pr *Program) onGPUs() bool {
	for d, dev := range pr.devs {
		if pr.local(d) {
			_, ok := dev.(StreamLibraryDevice)
			return ok
		}
	}
	return false
}

// prepareLibraries prepares every library step of the variants in force
// on the devices (StreamLibraryDevice.PrepareLibrary); a group one of
// whose steps the library refuses runs its generated kernels, with a
// note.
func (pr *Program) prepareLibraries() {
	for d, steps := range pr.Plan.Steps {
		if !pr.local(d) {
			continue
		}
		sd := pr.devs[d].(StreamLibraryDevice)
		for i := range steps {
			s := &steps[i]
			if s.Op != plan.Library || !s.Place.Runs(pr.inForce) {
				continue
			}
			if err := sd.PrepareLibrary(s); err != nil {
				pr.Notes = append(pr.Notes, fmt.Sprintf("%s: %v: its placement group runs tofuc's generated kernels", s.Where(d, i), err))
				pr.inForce[s.Place.Group] = plan.Generated
			}
		}
	}
}

// prepared reports whether the program prepares step s: a step of no
// placement group, or of a variant whose library loaded (which
// placeOnDevices may put in force).
func (pr *Program) prepared(s *plan.Step) bool {
	return s.Place == nil || slices.ContainsFunc(s.Place.Variants, func(v string) bool { return pr.loaded[v] })
}

// runsLibrary says why device d cannot run backend's library steps, if
// it cannot.
func runsLibrary(d Device, backend string) error {
	switch ld := d.(type) {
	case StreamLibraryDevice:
		return ld.LoadLibrary(backend)
	case LibraryDevice:
		if !ld.RunsLibraries() {
			return fmt.Errorf("%s runs no library", d.Name())
		}
		_, err := hostlib.Open(backend)
		return err
	}
	return fmt.Errorf("%s runs no library", d.Name())
}

// library returns the call of library step s on device dev, run on the
// host in the device's order.
func (pr *Program) library(d Device, s *plan.Step, where string) (func() error, error) {
	dev, ok := d.(HostDevice)
	if !ok {
		return nil, fmt.Errorf("the library step runs on a host or a GPU, not on %s", d.Name())
	}
	lib, err := hostlib.Open(s.LibraryCall().Library())
	if err != nil {
		return nil, err
	}
	buffers := s.LibraryBuffers()
	// Weights that parameters hold (a convolution's W; a product's B,
	// or else its A) change only with a binding.
	fixedWeights, weightsA := pr.Plan.HoldsParameter(buffers[1]), false
	if s.GEMM != nil && !fixedWeights {
		fixedWeights = pr.Plan.HoldsParameter(buffers[0])
		weightsA = fixedWeights
	}
	var release func()
	switch {
	case s.Conv != nil:
		release, err = lib.AcquireConv(s.Conv)
	case fixedWeights:
		release, err = lib.AcquireGEMM(s.GEMM, weightsA)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", lib.Version, err)
	}
	if release != nil {
		pr.releases = append(pr.releases, release)
	}
	return func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("%s: %s failed: %v", where, lib.Version, r)
			}
		}()
		ptrs := make([]unsafe.Pointer, 4) // a, b, c; a convolution's bias
		for i, id := range buffers {
			mem, err := dev.Bytes(pr.addr(id), pr.Plan.Buffers[id].Bytes)
			if err != nil {
				return fmt.Errorf("%s: %w", where, err)
			}
			ptrs[i] = unsafe.Pointer(unsafe.SliceData(mem))
		}
		var binding uint64 // 0: the weights may have changed
		if fixedWeights {
			binding = pr.binding
		}
		if s.Conv != nil {
			err = lib.Conv(s.Conv, ptrs[0], ptrs[1], ptrs[2], ptrs[3], binding)
		} else {
			err = lib.GEMM(s.GEMM, ptrs[0], ptrs[1], ptrs[2], hostlib.Weights{Binding: binding, A: weightsA})
		}
		if err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		return nil
	}, nil
}

// streamLibrary returns the call that enqueues library step s on
// device d's stream (its errors are named by the step's place, run).
func (pr *Program) streamLibrary(d StreamLibraryDevice, s *plan.Step) func() error {
	buffers := s.LibraryBuffers()
	ptrs := make([]Ptr, len(buffers))
	for i, id := range buffers {
		ptrs[i] = pr.addr(id)
	}
	return func() error { return d.Library(s, ptrs) }
}

// libraryTiming describes the timing s of library step ref, which runs
// call c: its FLOPs and the bytes of its operands.
func (pr *Program) libraryTiming(ref plan.StepRef, c plan.LibraryCall, s Stats) KernelTiming {
	return KernelTiming{Device: ref.Device, Step: ref.Step, Label: pr.steps.steps[ref.Device][ref.Step].Label,
		Kernel: c.Library() + " " + c.Name(), Kind: "library", FLOPs: c.FLOPs(), Bytes: c.Bytes(), Time: s}
}
