package plan

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"

	"tofuc/lang"
)

// Validate checks that a plan is consistent, so that a runtime can trust
// every index and size in it: a plan edited by hand or corrupted is an
// error naming what is wrong, never a crash, a hang or a wrong result
// that its kernels' records or its own parts could have shown. Its cost
// grows with the plan's size, times at most its devices (checkRaces).
func (p *Plan) Validate() error {
	if err := p.checkHeader(); err != nil {
		return err
	}
	roots, err := p.checkBuffers()
	if err != nil {
		return err
	}
	if err := p.checkKernels(); err != nil {
		return err
	}
	if err := p.checkBindings(); err != nil {
		return err
	}
	if err := p.checkPlacement(); err != nil {
		return err
	}
	held := p.heldRoots(roots)
	if _, err := p.checkList(p.Init, roots, held); err != nil {
		return err
	}
	reads, err := p.checkList(p.Steps, roots, held)
	if err != nil {
		return err
	}
	return p.checkOverlap(roots, reads)
}

// checkHeader checks the version, the devices and their arenas.
func (p *Plan) checkHeader() error {
	if p.Version != Version {
		return fmt.Errorf("plan version %d, this tofuc reads version %d", p.Version, Version)
	}
	if p.Devices < 1 || p.Devices > MaxDevices {
		return fmt.Errorf("a plan for %d devices, beyond the 1 to %d a plan may have", p.Devices, MaxDevices)
	}
	if len(p.ArenaBytes) != p.Devices || len(p.Steps) != p.Devices || len(p.Init) != p.Devices {
		return fmt.Errorf("plan for %d devices has %d arenas, %d step lists and %d init lists", p.Devices, len(p.ArenaBytes), len(p.Steps), len(p.Init))
	}
	for d, n := range p.ArenaBytes {
		if n < 0 {
			return fmt.Errorf("device %d: arena_bytes %d", d, n)
		}
	}
	return nil
}

// checkBuffers checks every buffer, then the views, and returns the
// buffer each one's view_of chain ends at (itself when no view).
func (p *Plan) checkBuffers() ([]int, error) {
	for i, b := range p.Buffers {
		if err := p.checkBuffer(i, b); err != nil {
			return nil, fmt.Errorf("buffer %d (%s): %w", i, b.Name, err)
		}
	}
	roots, err := p.viewRoots()
	if err != nil {
		return nil, err
	}
	for i, b := range p.Buffers {
		if err := p.checkView(b); err != nil {
			return nil, fmt.Errorf("buffer %d (%s): %w", i, b.Name, err)
		}
	}
	return roots, nil
}

func (p *Plan) checkBuffer(i int, b Buffer) error {
	if b.ID != i {
		return fmt.Errorf("id %d at position %d", b.ID, i)
	}
	if b.Device < 0 || b.Device >= p.Devices {
		return fmt.Errorf("device %d of %d", b.Device, p.Devices)
	}
	n, err := elements(b.DType, b.Shape)
	if err != nil {
		return err
	}
	if b.Bytes != n*int64(lang.ParseDType(b.DType).Size()) {
		return fmt.Errorf("%d bytes for %s%v", b.Bytes, b.DType, b.Shape)
	}
	if arena := p.ArenaBytes[b.Device]; b.Offset < 0 || b.Bytes > arena || b.Offset > arena-b.Bytes {
		return fmt.Errorf("offset %d: its %d bytes do not lie in the arena of %d bytes of device %d", b.Offset, b.Bytes, arena, b.Device)
	}
	if b.ViewOf >= len(p.Buffers) || b.ViewOf < -1 {
		return fmt.Errorf("view of buffer %d, which does not exist", b.ViewOf)
	}
	return nil
}

// viewRoots returns, for every buffer, the buffer its view_of chain ends
// at (itself when it is no view), each buffer visited once; a chain that
// comes back to a buffer is an error.
func (p *Plan) viewRoots() ([]int, error) {
	const unknown, walking = -1, -2
	roots := make([]int, len(p.Buffers))
	for i := range roots {
		roots[i] = unknown
	}
	var path []int
	for i := range p.Buffers {
		path = path[:0]
		id := i
		for roots[id] == unknown && p.Buffers[id].ViewOf >= 0 {
			roots[id] = walking
			path = append(path, id)
			id = p.Buffers[id].ViewOf
		}
		switch roots[id] {
		case walking:
			return nil, fmt.Errorf("buffer %d (%s): view_of %d makes it a view of itself", id, p.Buffers[id].Name, p.Buffers[id].ViewOf)
		case unknown:
			roots[id] = id
		}
		for _, v := range path {
			roots[v] = roots[id]
		}
	}
	return roots, nil
}

// checkView refuses a view that is not part of the buffer it is a view
// of: of another device, or with bytes outside its bytes.
func (p *Plan) checkView(b Buffer) error {
	if b.ViewOf < 0 {
		return nil
	}
	v := p.Buffers[b.ViewOf]
	if v.Device != b.Device || b.Offset < v.Offset || b.Offset+b.Bytes > v.Offset+v.Bytes {
		return fmt.Errorf("view_of %d: bytes [%d, %d) of device %d are not part of buffer %d (%s), bytes [%d, %d) of device %d",
			b.ViewOf, b.Offset, b.Offset+b.Bytes, b.Device, b.ViewOf, v.Name, v.Offset, v.Offset+v.Bytes, v.Device)
	}
	return nil
}

// checkKernels checks the modules' files and every kernel.
func (p *Plan) checkKernels() error {
	groups := math.MaxInt // the fewest files of a target that has one per group
	for name, m := range p.Modules {
		if err := checkModule(m); err != nil {
			return fmt.Errorf("modules of %s: %w", name, err)
		}
		if len(m.Files) > 1 {
			groups = min(groups, len(m.Files))
		}
	}
	for i := range p.Kernels {
		k := &p.Kernels[i]
		if err := k.check(groups); err != nil {
			return fmt.Errorf("kernel %d (%s): %w", i, k.Name, err)
		}
	}
	return nil
}

// checkModule refuses a file outside the plan's folder.
func checkModule(m Module) error {
	for _, f := range append(slices.Clone(m.Files), m.IR...) {
		if !filepath.IsLocal(f.Path) || f.Bytes < 0 {
			return fmt.Errorf("file %q is not inside the plan's folder", f.Path)
		}
	}
	return nil
}

// Bounds of a launch: blocks (the code generator caps its grids there,
// and every form strides over what its grid does not cover), threads per
// block (CUDA's), static shared memory (CUDA's without opting in), and
// dynamic shared memory (the most of a block on sm_90, once opted in).
const (
	MaxGrid          = 65535
	MaxBlock         = 1024
	MaxShared        = 48 << 10
	MaxDynamicShared = 227 << 10
)

// check checks a kernel whose module indexes a target's groups of files.
func (k *Kernel) check(groups int) error {
	if k.Module < 0 || k.Module >= groups {
		return fmt.Errorf("module %d does not exist", k.Module)
	}
	most := int64(MaxShared)
	if k.DynamicShared {
		most = MaxDynamicShared
	}
	if k.Elements < 0 || k.Grid < 0 || k.Grid > MaxGrid || k.Block < 0 || k.Block > MaxBlock || k.Shared < 0 || k.Shared > most {
		return fmt.Errorf("a launch of %d blocks of %d threads with %d bytes of shared memory, beyond the %d, %d and %d a plan may ask", k.Grid, k.Block, k.Shared, MaxGrid, MaxBlock, most)
	}
	if k.HostOnly && (k.GPUOnly || k.Grid != 0) || k.GPUOnly && k.HostRange != 0 {
		return fmt.Errorf("host_only with a grid, gpu_only with a host range, or both")
	}
	if k.HostRange < 0 || k.HostPhase < 0 || k.HostPhase > k.HostRange {
		return fmt.Errorf("host_phase %d outside its host_range %d", k.HostPhase, k.HostRange)
	}
	if err := k.checkHostRange(); err != nil {
		return err
	}
	if err := k.checkWrites(); err != nil {
		return err
	}
	switch k.Reducer {
	case "", "sum", "prod", "max", "min":
		return nil
	}
	return fmt.Errorf("unknown reducer %q", k.Reducer)
}

// checkWrites checks that the written arguments are increasing indexes
// of the arguments ending with the last, which every kernel writes.
func (k *Kernel) checkWrites() error {
	w := k.Writes
	ok := len(w) > 0 && w[0] >= 0 && w[len(w)-1] == len(k.Args)-1
	for i := 1; ok && i < len(w); i++ {
		ok = w[i-1] < w[i]
	}
	if !ok {
		return fmt.Errorf("writes %v: not increasing indexes of its %d arguments ending with the last", w, len(k.Args))
	}
	return nil
}

// checkHostRange checks the arguments' types and that every item of the
// host range computes some of the kernel's elements (a row, a block of
// rows, a tile), or of the rows of an empty output: items are no more
// than the arguments' cells, empty dimensions counted as one.
func (k *Kernel) checkHostRange() error {
	var total int64
	for _, a := range k.Args {
		if _, err := elements(a.DType, a.Shape); err != nil {
			return err
		}
		n, _ := Cells(a.Shape)
		total = min(total+n, math.MaxInt64-MaxCells) // no overflow: n is at most MaxCells
	}
	if k.HostRange > max(total, 1) {
		return fmt.Errorf("host_range %d, more items than the %d elements of its arguments", k.HostRange, total)
	}
	return nil
}

// MaxCells bounds the cells of a shape (its elements, empty dimensions
// counted as one), so that every size derived from it (in bytes, summed
// over a kernel's arguments) fits in 64 bits.
const MaxCells = 1 << 50

// elements is the number of elements of a shape of a known dtype whose
// cells are at most MaxCells.
func elements(dtype string, shape []int64) (int64, error) {
	if lang.ParseDType(dtype) == lang.Invalid {
		return 0, fmt.Errorf("unknown dtype %q", dtype)
	}
	if _, err := Cells(shape); err != nil {
		return 0, err
	}
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	return n, nil
}

// Cells is the product of a shape's extents, empty ones counted as one:
// an error when an extent is negative or the product beyond MaxCells
// (a compile checks its tensors with it before it lowers them).
func Cells(shape []int64) (int64, error) {
	n := int64(1)
	for _, d := range shape {
		if d < 0 || max(d, 1) > MaxCells/n {
			return 0, fmt.Errorf("bad shape %v", shape)
		}
		n *= max(d, 1)
	}
	return n, nil
}

func (p *Plan) buffer(id int) (Buffer, error) {
	if id < 0 || id >= len(p.Buffers) {
		return Buffer{}, fmt.Errorf("buffer %d does not exist", id)
	}
	return p.Buffers[id], nil
}
