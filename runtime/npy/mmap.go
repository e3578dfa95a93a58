package npy

import (
	"fmt"
	"os"
	"syscall"

	"tofuc/lang"
	"tofuc/runtime/tensor"
)

// Rows is a dataset array read a sample at a time: its first dimension
// indexes the samples (rows).
type Rows interface {
	DType() lang.DType
	// Shape is the array's shape; Shape()[0] is the number of rows.
	Shape() []int
	// Gather stacks the rows at indices, in order, into one tensor.
	Gather(indices []int) (*tensor.Tensor, error)
}

// Mapped is a .npy file mapped into memory: rows are decoded when
// gathered, so that a dataset larger than memory can be read in batches.
type Mapped struct {
	path string
	h    *header
	data []byte // the mapping: the header, then the elements
	off  int    // where the elements start
}

// Map maps the .npy file at path (little- or big-endian, C order, at
// least one dimension).
func Map(path string) (*Mapped, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h, off, err := readHeader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(h.shape) == 0 {
		return nil, fmt.Errorf("%s: a scalar array has no rows", path)
	}
	size := int64(off) + int64(h.count)*int64(h.size)
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if info.Size() < size {
		return nil, fmt.Errorf("%s: %d bytes, its header says %d", path, info.Size(), size)
	}
	m := &Mapped{path: path, h: h, off: off}
	if size > 0 {
		if m.data, err = syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED); err != nil {
			return nil, fmt.Errorf("%s: mapping: %w", path, err)
		}
	}
	return m, nil
}

func (m *Mapped) DType() lang.DType { return m.h.dtype }
func (m *Mapped) Shape() []int      { return m.h.shape }

// Gather decodes the rows at indices.
func (m *Mapped) Gather(indices []int) (*tensor.Tensor, error) {
	rowBytes := m.h.count / max(m.h.shape[0], 1) * m.h.size
	shape := append([]int{len(indices)}, m.h.shape[1:]...)
	buf := make([]byte, 0, len(indices)*rowBytes)
	for _, i := range indices {
		if i < 0 || i >= m.h.shape[0] {
			return nil, fmt.Errorf("%s: row %d of %d", m.path, i, m.h.shape[0])
		}
		start := m.off + i*rowBytes
		buf = append(buf, m.data[start:start+rowBytes]...)
	}
	h := *m.h
	h.shape, h.count = shape, tensor.NumElements(shape)
	return decode(&h, buf), nil
}

// Close unmaps the file.
func (m *Mapped) Close() error {
	if m.data == nil {
		return nil
	}
	err := syscall.Munmap(m.data)
	m.data = nil
	return err
}

// InMemory is a tensor read as rows (an .npz member).
type InMemory struct{ T *tensor.Tensor }

func (r InMemory) DType() lang.DType { return r.T.DType }
func (r InMemory) Shape() []int      { return r.T.Shape }

// Gather copies the rows at indices.
func (r InMemory) Gather(indices []int) (*tensor.Tensor, error) {
	if len(r.T.Shape) == 0 {
		return nil, fmt.Errorf("a scalar array has no rows")
	}
	row := r.T.Len() / max(r.T.Shape[0], 1)
	out := tensor.New(r.T.DType, append([]int{len(indices)}, r.T.Shape[1:]...))
	for k, i := range indices {
		if i < 0 || i >= r.T.Shape[0] {
			return nil, fmt.Errorf("row %d of %d", i, r.T.Shape[0])
		}
		if out.F != nil {
			copy(out.F[k*row:(k+1)*row], r.T.F[i*row:(i+1)*row])
		} else {
			copy(out.I[k*row:(k+1)*row], r.T.I[i*row:(i+1)*row])
		}
	}
	return out, nil
}
