package executor

import (
	"unsafe"

	"tofuc/runtime/native"
)

// Args is the argument vector of one launch, outside the Go heap so that
// native code may keep pointers to it: the values (one device address per
// buffer argument, then that of the kernel's status words) followed by a
// pointer to each value, which is what cuLaunchKernel's kernelParams
// wants. The emulator takes the values themselves.
type Args struct {
	mem *native.Memory
	n   int
}

// NewArgs lays out an argument vector holding ptrs.
func NewArgs(ptrs []Ptr) (*Args, error) {
	n := len(ptrs)
	mem, err := native.Alloc(int64(2 * n * 8))
	if err != nil {
		return nil, err
	}
	a := &Args{mem: mem, n: n}
	words := a.words()
	for i, p := range ptrs {
		words[i] = uint64(p)
		words[n+i] = uint64(mem.Addr(int64(i * 8)))
	}
	return a, nil
}

func (a *Args) words() []uint64 {
	if a.n == 0 {
		return nil
	}
	return unsafe.Slice((*uint64)(unsafe.Pointer(&a.mem.Bytes()[0])), 2*a.n)
}

// Len is the number of arguments.
func (a *Args) Len() int { return a.n }

// Values is the address of the argument values.
func (a *Args) Values() uintptr { return a.mem.Addr(0) }

// Params is the address of the array of pointers to the values.
func (a *Args) Params() uintptr { return a.mem.Addr(int64(a.n * 8)) }

// Value is argument i.
func (a *Args) Value(i int) Ptr { return Ptr(a.words()[i]) }

// Free releases the vector.
func (a *Args) Free() error { return a.mem.Free() }
