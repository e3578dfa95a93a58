package native

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"syscall"
	"unsafe"

	"github.com/ebitengine/purego"
	"golang.org/x/sys/unix"

	"tofuc/runtime/plan"
)

// Library is a loaded shared object.
type Library struct {
	Path   string // what messages call it
	handle uintptr
	fd     int // its sealed copy (OpenBytes)
	mu     sync.Mutex
	syms   map[string]uintptr
}

// OpenModule loads the shared object of module m (a target's) of plan p
// compiled into dir: after checking its length and SHA-256 (a truncated
// or overwritten file is an error naming it, never loaded), that it is a
// whole shared object, and the CPU extensions it was compiled for
// (checkRequires); it is loaded from the bytes checked (OpenBytes); then
// every kernel of the plan is checked against the record of what the
// object was compiled for (plan.Plan.CheckKernels).
func OpenModule(p *plan.Plan, dir string, m plan.Module) (*Library, error) {
	if len(m.Files) != 1 {
		return nil, fmt.Errorf("%d files for a shared object", len(m.Files))
	}
	f := m.Files[0]
	data, err := f.Read(dir)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, f.Path)
	if err := checkELF(path, data); err != nil {
		return nil, err
	}
	if err := checkRequires(m, path, data); err != nil {
		return nil, err
	}
	lib, err := OpenBytes(path, data)
	if err != nil {
		return nil, err
	}
	if err := p.CheckKernels(f.Path, func(sym string) ([]byte, error) { return lib.String(sym, builtMax) }); err != nil {
		lib.Close()
		return nil, err
	}
	return lib, nil
}

// builtMax bounds a kernel's record (plan.Built) in an object.
const builtMax = 1 << 20

// OpenBytes loads the shared object so (called name in messages) from a
// private copy of its bytes: a file in memory (memfd) sealed against
// every change, so that nothing can truncate or rewrite what the loader
// maps, as another process could the file the bytes were read from
// (the loader's mappings of a file cut short die of SIGBUS). The object
// is checked first (checkELF). The copy stays open while the library is
// loaded: the loader knows a library by its path, /proc/self/fd/N,
// which no other copy may take meanwhile (Close).
func OpenBytes(name string, so []byte) (*Library, error) {
	if err := checkELF(name, so); err != nil {
		return nil, err
	}
	fd, err := sealedCopy(name, so)
	if err != nil {
		return nil, fmt.Errorf("loading %s: a sealed copy in memory: %w", name, err)
	}
	h, err := purego.Dlopen(fmt.Sprintf("/proc/self/fd/%d", fd), purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("loading %s: %w", name, err)
	}
	return &Library{Path: name, handle: h, fd: fd, syms: map[string]uintptr{}}, nil
}

// rtldNoload is dlopen's RTLD_NOLOAD (glibc): the handle of a library
// already loaded, else none.
const rtldNoload = 0x4

// Close unloads the library and closes its sealed copy, so that a
// process that loads many plans (the Python package's) does not run out
// of file descriptors. If the loader keeps the library loaded (an
// object marked not to be unloaded), the copy stays open: its path
// /proc/self/fd/N must not name another library, which dlopen would
// take for this one. Nothing of the library may be called after.
func (l *Library) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.handle == 0 {
		return nil
	}
	err := purego.Dlclose(l.handle)
	l.handle, l.syms = 0, nil
	if err != nil { // the loader may still hold it: its path stays taken
		return fmt.Errorf("unloading %s: %w", l.Path, err)
	}
	if h, err := purego.Dlopen(fmt.Sprintf("/proc/self/fd/%d", l.fd), purego.RTLD_NOW|purego.RTLD_LOCAL|rtldNoload); err == nil && h != 0 {
		purego.Dlclose(h)
		return nil // still loaded: its path stays taken
	}
	return unix.Close(l.fd)
}

// mfdExec is Linux 6.3's MFD_EXEC (a memfd that may be executed where
// vm.memfd_noexec makes them not by default), which this x/sys predates.
const mfdExec = 0x10

// sealedCopy is a file in memory holding data, sealed: it can no longer
// be written, grown or shrunk.
func sealedCopy(name string, data []byte) (int, error) {
	flags := unix.MFD_CLOEXEC | unix.MFD_ALLOW_SEALING
	fd, err := unix.MemfdCreate(name, flags|mfdExec)
	if errors.Is(err, unix.EINVAL) { // a kernel before 6.3
		fd, err = unix.MemfdCreate(name, flags)
	}
	if err != nil {
		return -1, err
	}
	for rest := data; len(rest) > 0 && err == nil; {
		var n int
		n, err = unix.Write(fd, rest)
		rest = rest[max(n, 0):]
	}
	if err == nil {
		_, err = unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_WRITE|unix.F_SEAL_SEAL)
	}
	if err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// Symbol returns the address of a function of the library.
func (l *Library) Symbol(name string) (uintptr, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if p, ok := l.syms[name]; ok {
		return p, nil
	}
	if l.handle == 0 { // closed: dlsym of 0 would search every library
		return 0, fmt.Errorf("%s: closed", l.Path)
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
