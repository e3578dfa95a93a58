package native

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"tofuc/runtime/plan"
	"unsafe"

	"github.com/ebitengine/purego"
)

// Library is a loaded shared object.
type Library struct {
	Path   string
	handle uintptr
	mu     sync.Mutex
	syms   map[string]uintptr
}

// Open loads the shared object at path.
func Open(path string) (*Library, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	h, err := purego.Dlopen(abs, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", path, err)
	}
	return &Library{Path: abs, handle: h, syms: map[string]uintptr{}}, nil
}

// OpenModule loads the shared object of module m (a target's) of plan p
// compiled into dir: after checking its length and SHA-256 (a truncated
// or overwritten file is an error naming it, never loaded) and the CPU
// extensions it was compiled for (checkRequires); then every kernel of
// the plan against the record of what the object was compiled for
// (plan.Plan.CheckKernels).
func OpenModule(p *plan.Plan, dir string, m plan.Module) (*Library, error) {
	if len(m.Files) != 1 {
		return nil, fmt.Errorf("%d files for a shared object", len(m.Files))
	}
	f := m.Files[0]
	path, err := f.Check(dir)
	if err != nil {
		return nil, err
	}
	if err := checkRequires(m, path); err != nil {
		return nil, err
	}
	lib, err := Open(path)
	if err != nil {
		return nil, err
	}
	if err := p.CheckKernels(f.Path, func(sym string) ([]byte, error) { return lib.String(sym, builtMax) }); err != nil {
		return nil, err
	}
	return lib, nil
}

// builtMax bounds a kernel's record (plan.Built) in an object.
const builtMax = 1 << 20

// OpenBytes writes a shared object's bytes to dir under name (unless a
// file with that name is there) and loads it. Names must differ for
// different contents: dlopen returns the library already loaded from a
// path.
func OpenBytes(dir, name string, so []byte) (*Library, error) {
	path := filepath.Join(dir, name)
	if _, err := os.Stat(path); err != nil {
		tmp, err := os.CreateTemp(dir, "tmp-*.so")
		if err != nil {
			return nil, err
		}
		_, werr := tmp.Write(so)
		if cerr := tmp.Close(); werr == nil {
			werr = cerr
		}
		if werr == nil {
			werr = os.Rename(tmp.Name(), path)
		}
		if werr != nil {
			os.Remove(tmp.Name())
			return nil, werr
		}
	}
	return Open(path)
}

// Symbol returns the address of a function of the library.
func (l *Library) Symbol(name string) (uintptr, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if p, ok := l.syms[name]; ok {
		return p, nil
	}
	p, err := purego.Dlsym(l.handle, name)
	if err != nil {
		return 0, fmt.Errorf("%s: no function %s: %w", l.Path, name, err)
	}
	l.syms[name] = p
	return p, nil
}

// String returns the NUL-terminated bytes of the library's global
// called name (without the NUL), at most max of them.
func (l *Library) String(name string, max int) ([]byte, error) {
	p, err := l.Symbol(name)
	if err != nil {
		return nil, err
	}
	// The address is the C library's, outside the Go heap: read through
	// its bits as a pointer.
	b := unsafe.Slice(*(**byte)(unsafe.Pointer(&p)), max)
	for i, c := range b {
		if c == 0 {
			return append([]byte(nil), b[:i]...), nil
		}
	}
	return nil, fmt.Errorf("%s: %s is no string of at most %d bytes", l.Path, name, max)
}

// Call calls the native function at fn with integer or pointer
// arguments and returns its integer result.
func Call(fn uintptr, args ...uintptr) uintptr {
	r, _, _ := purego.SyscallN(fn, args...)
	return r
}

// Memory is a region of anonymous memory outside the Go heap.
type Memory struct {
	b []byte
}

// Alloc maps n bytes of zeroed memory (at least one page).
func Alloc(n int64) (*Memory, error) {
	if n < 0 || n > 1<<46 {
		return nil, fmt.Errorf("cannot allocate %d bytes", n)
	}
	size := max(n, 1)
	b, err := syscall.Mmap(-1, 0, int(size), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("allocating %d bytes: %w", n, err)
	}
	return &Memory{b: b[:n]}, nil
}

// Bytes is the memory as a slice.
func (m *Memory) Bytes() []byte { return m.b }

// Addr is the address of byte off.
func (m *Memory) Addr(off int64) uintptr {
	return uintptr(unsafe.Pointer(unsafe.SliceData(m.b[:cap(m.b)]))) + uintptr(off)
}

// Free unmaps the memory.
func (m *Memory) Free() error {
	if m.b == nil {
		return nil
	}
	err := syscall.Munmap(m.b[:cap(m.b)])
	m.b = nil
	return err
}
