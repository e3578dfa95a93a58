package plan

import (
	"fmt"
	"path/filepath"
	"slices"

	"tofuc/lang"
)

// Validate checks that a plan is consistent, so that a runtime can trust
// every index and size in it: a plan edited by hand or corrupted is an
// error, never a crash.
func (p *Plan) Validate() error {
	if p.Version != Version {
		return fmt.Errorf("plan version %d, this tofuc reads version %d", p.Version, Version)
	}
	if p.Devices < 1 || len(p.ArenaBytes) != p.Devices || len(p.Steps) != p.Devices || len(p.Init) != p.Devices {
		return fmt.Errorf("plan for %d devices has %d arenas, %d step lists and %d init lists", p.Devices, len(p.ArenaBytes), len(p.Steps), len(p.Init))
	}
	for i, b := range p.Buffers {
		if err := p.checkBuffer(i, b); err != nil {
			return fmt.Errorf("buffer %d (%s): %w", i, b.Name, err)
		}
	}
	for name, m := range p.Modules {
		if err := checkModule(m); err != nil {
			return fmt.Errorf("modules of %s: %w", name, err)
		}
	}
	for i, k := range p.Kernels {
		if k.Module < 0 {
			return fmt.Errorf("kernel %s: module %d does not exist", k.Name, k.Module)
		}
		for name, m := range p.Modules {
			if len(m.Files) > 1 && k.Module >= len(m.Files) {
				return fmt.Errorf("kernel %s: module %d of %s does not exist", k.Name, k.Module, name)
			}
		}
		if k.Elements < 0 || k.Grid < 0 || k.Grid > MaxGrid || k.Block < 0 || k.Block > MaxBlock || k.Shared < 0 || k.Shared > MaxShared {
			return fmt.Errorf("kernel %d (%s): a launch of %d blocks of %d threads with %d bytes of shared memory, beyond the %d, %d and %d a plan may ask", i, k.Name, k.Grid, k.Block, k.Shared, MaxGrid, MaxBlock, MaxShared)
		}
		if k.HostOnly && (k.GPUOnly || k.Grid != 0) || k.GPUOnly && k.HostRange != 0 {
			return fmt.Errorf("kernel %d (%s): host_only with a grid, gpu_only with a host range, or both", i, k.Name)
		}
		if k.HostRange < 0 || k.HostPhase < 0 || k.HostPhase > k.HostRange {
			return fmt.Errorf("kernel %d (%s): host_phase %d outside its host_range %d", i, k.Name, k.HostPhase, k.HostRange)
		}
		// Every item of a host range computes some of the kernel's
		// elements (a row, a block of rows, a tile), or of the rows of
		// an empty output: items are no more than the arguments' cells,
		// empty dimensions counted as one.
		var cells int64
		for _, a := range k.Args {
			if _, err := elements(a.DType, a.Shape); err != nil {
				return fmt.Errorf("kernel %s: %w", k.Name, err)
			}
			n := int64(1)
			for _, d := range a.Shape {
				n *= max(d, 1)
			}
			cells += n
		}
		if k.HostRange > max(cells, 1) {
			return fmt.Errorf("kernel %d (%s): host_range %d, more items than the %d elements of its arguments", i, k.Name, k.HostRange, cells)
		}
	}
	for _, list := range []struct {
		name string
		b    []Binding
	}{{"input", p.Inputs}, {"parameter", p.Params}, {"output", p.Outputs}} {
		for _, b := range list.b {
			if err := p.checkBinding(b); err != nil {
				return fmt.Errorf("%s %s: %w", list.name, b.Name, err)
			}
		}
	}
	for _, steps := range [][][]Step{p.Init, p.Steps} {
		for d, list := range steps {
			for i, s := range list {
				if err := p.checkStep(d, s, len(list), steps); err != nil {
					return fmt.Errorf("device %d step %d (%s): %w", d, i, s.Op, err)
				}
			}
		}
		if _, err := Order(steps); err != nil {
			return err
		}
	}
	return p.checkOverlap()
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
// block (CUDA's), static shared memory (CUDA's without opting in).
const (
	MaxGrid   = 65535
	MaxBlock  = 1024
	MaxShared = 48 << 10
)

func elements(dtype string, shape []int64) (int64, error) {
	if lang.ParseDType(dtype) == lang.Invalid {
		return 0, fmt.Errorf("unknown dtype %q", dtype)
	}
	n := int64(1)
	for _, d := range shape {
		if d < 0 || (d > 0 && n > (1<<50)/d) {
			return 0, fmt.Errorf("bad shape %v", shape)
		}
		n *= d
	}
	return n, nil
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
	if b.Offset < 0 || b.Offset+b.Bytes > p.ArenaBytes[b.Device] {
		return fmt.Errorf("bytes [%d, %d) outside the arena of %d", b.Offset, b.Offset+b.Bytes, p.ArenaBytes[b.Device])
	}
	if b.ViewOf >= len(p.Buffers) || b.ViewOf < -1 {
		return fmt.Errorf("view of buffer %d", b.ViewOf)
	}
	for v, n := b.ViewOf, 0; v >= 0; v, n = p.Buffers[v].ViewOf, n+1 {
		if n >= len(p.Buffers) || p.Buffers[v].ViewOf >= len(p.Buffers) || p.Buffers[v].ViewOf < -1 {
			return fmt.Errorf("a view of itself, or of a buffer that does not exist")
		}
		if p.Buffers[v].Device != b.Device {
			return fmt.Errorf("a view of buffer %d of device %d", v, p.Buffers[v].Device)
		}
	}
	return nil
}

func (p *Plan) buffer(id int) (Buffer, error) {
	if id < 0 || id >= len(p.Buffers) {
		return Buffer{}, fmt.Errorf("buffer %d does not exist", id)
	}
	return p.Buffers[id], nil
}

func (p *Plan) checkBinding(b Binding) error {
	if _, err := elements(b.DType, b.Shape); err != nil {
		return err
	}
	if len(b.Tiles) == 0 {
		return fmt.Errorf("no tiles")
	}
	for _, t := range b.Tiles {
		buf, err := p.buffer(t.Buffer)
		if err != nil {
			return err
		}
		if buf.DType != b.DType || len(t.Box) != len(b.Shape) || len(buf.Shape) != len(b.Shape) {
			return fmt.Errorf("tile in buffer %d does not match %s%v", t.Buffer, b.DType, b.Shape)
		}
		for d, r := range t.Box {
			if r.Lo < 0 || r.Hi > b.Shape[d] || r.Hi-r.Lo != buf.Shape[d] {
				return fmt.Errorf("tile box %v does not fit buffer %d of shape %v", t.Box, t.Buffer, buf.Shape)
			}
		}
	}
	return nil
}

func (p *Plan) checkStep(d int, s Step, n int, all [][]Step) error {
	for _, r := range s.After {
		if r.Device < 0 || r.Device >= p.Devices || r.Step < 0 || r.Step >= len(all[r.Device]) {
			return fmt.Errorf("depends on a missing step %v", r)
		}
	}
	switch s.Op {
	case Launch:
		if s.Kernel < 0 || s.Kernel >= len(p.Kernels) {
			return fmt.Errorf("kernel %d does not exist", s.Kernel)
		}
		k := p.Kernels[s.Kernel]
		if len(s.Args) != len(k.Args) {
			return fmt.Errorf("%d arguments for kernel %s of %d", len(s.Args), k.Name, len(k.Args))
		}
		for i, id := range s.Args {
			b, err := p.buffer(id)
			if err != nil {
				return err
			}
			if b.Device != d || b.DType != k.Args[i].DType || fmt.Sprint(b.Shape) != fmt.Sprint(k.Args[i].Shape) {
				return fmt.Errorf("argument %d of kernel %s: buffer %d is %s%v on device %d", i, k.Name, id, b.DType, b.Shape, b.Device)
			}
		}
	case Copy:
		from, err := p.buffer(s.From)
		if err != nil {
			return err
		}
		to, err := p.buffer(s.To)
		if err != nil {
			return err
		}
		if to.Device != d || from.DType != to.DType || len(s.Src) != len(from.Shape) || len(s.At) != len(to.Shape) || len(from.Shape) != len(to.Shape) {
			return fmt.Errorf("copy from buffer %d to %d does not match", s.From, s.To)
		}
		for i, r := range s.Src {
			if r.Lo < 0 || r.Hi < r.Lo || r.Hi > from.Shape[i] || s.At[i] < 0 || s.At[i]+r.Hi-r.Lo > to.Shape[i] {
				return fmt.Errorf("copy box %v at %v out of buffers %v and %v", s.Src, s.At, from.Shape, to.Shape)
			}
		}
	case Reduce:
		to, err := p.buffer(s.To)
		if err != nil {
			return err
		}
		if to.Device != d || len(s.Parts) == 0 {
			return fmt.Errorf("reduction into buffer %d on device %d", s.To, to.Device)
		}
		switch s.Reducer {
		case "sum", "prod", "max", "min":
		default:
			return fmt.Errorf("unknown reducer %q", s.Reducer)
		}
		if s.Kernel < 0 || s.Kernel >= len(p.Kernels) || len(p.Kernels[s.Kernel].Args) != len(s.Parts)+1 {
			return fmt.Errorf("reduction kernel %d does not take %d parts", s.Kernel, len(s.Parts))
		}
		for _, id := range s.Parts {
			b, err := p.buffer(id)
			if err != nil {
				return err
			}
			if b.DType != to.DType || fmt.Sprint(b.Shape) != fmt.Sprint(to.Shape) {
				return fmt.Errorf("part %d is %s%v, the result %s%v", id, b.DType, b.Shape, to.DType, to.Shape)
			}
		}
	case Opaque:
		if s.Call == nil {
			return fmt.Errorf("no call")
		}
		if _, err := p.buffer(s.To); err != nil {
			return err
		}
		if len(s.Call.Fixed) != len(s.Call.Args) {
			return fmt.Errorf("%d fixed lists for %d arguments", len(s.Call.Fixed), len(s.Call.Args))
		}
		for i, id := range s.Call.Args {
			b, err := p.buffer(id)
			if err != nil {
				return err
			}
			if b.Device != d || len(s.Call.Fixed[i]) != len(b.Shape) {
				return fmt.Errorf("argument %d does not match buffer %d", i, id)
			}
			for _, f := range s.Call.Fixed[i] {
				if f < -1 || f >= int64(len(s.Call.Batch)) {
					return fmt.Errorf("argument %d fixes a dimension to batch index %d of %d", i, f, len(s.Call.Batch))
				}
			}
		}
	default:
		return fmt.Errorf("unknown step")
	}
	return nil
}
