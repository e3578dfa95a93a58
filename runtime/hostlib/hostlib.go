package hostlib

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// CallsRevision numbers the way this package calls the libraries (the
// layouts it asks for, what it reorders when): a profile database keys
// its times with it, so that times measured the old way are not reused.
// Revision 3: every convolution in oneDNN's layouts, the weights
// reordered once per binding and kept per address. Revision 4: oneDNN's
// products with a parameter as B on its matmul primitive, B reordered
// likewise.
const CallsRevision = 4

// Library is a loaded vendor library.
type Library struct {
	Name    string // the backend's name in plans and on the command line
	Version string // the library's own account of its version
	sgemm   func(transA, transB bool, m, n, k int64, a unsafe.Pointer, lda int64, b unsafe.Pointer, ldb int64, c unsafe.Pointer, ldc int64)
	threads func(n int)
	dnnl    *dnnlAPI // oneDNN's primitives (convolutions); nil in other libraries
}

// spec is how to load one library.
type spec struct {
	name, file, debian string
	load               func(h uintptr, l *Library) error
	convolutions       bool // whether it has Conv
}

// specs are the libraries tofuc knows, in the order placement lists them.
var specs = []spec{
	{"openblas", "libopenblas.so.0", "libopenblas0-pthread", loadOpenBLAS, false},
	{"onednn", "libdnnl.so.2", "libdnnl2", loadOneDNN, true},
}

// Names are the backends this package can call, whether their library
// is present or not.
func Names() []string {
	out := make([]string, len(specs))
	for i, s := range specs {
		out[i] = s.name
	}
	return out
}

// quietThreads is, per library, the environment variable (and value)
// that makes its threads sleep soon after a call instead of spinning,
// unless the user set it or one of its others: spinning, they take the
// cores from the generated kernels that run between the library's
// calls. OpenBLAS's threads spin 2^28 cycles by default, 2^16 (about
// 25 µs) here: on ResNet-50 with its 1×1 convolutions on OpenBLAS the
// whole plan took 150.8 ms against 74.2 ms. oneDNN's OpenMP threads
// spin 10,000 rounds (libgomp counts about 100,000 a millisecond): not
// spinning at all, they slept and woke between a convolution's reorders
// and its kernel, and a 3 × 3 convolution took 1.05 ms against 0.80
// (docs/placement.md).
var quietThreads = map[string]struct {
	name, value string
	others      []string // the user's setting of one of these is kept too
}{
	"openblas": {"OPENBLAS_THREAD_TIMEOUT", "16", nil},
	"onednn":   {"GOMP_SPINCOUNT", "10000", []string{"OMP_WAIT_POLICY"}},
}

var (
	mu      sync.Mutex
	loaded  = map[string]*Library{}
	failed  = map[string]error{}
	threads = runtime.GOMAXPROCS(0)
)

// Open returns the library of backend name, loading it once; a library
// that is missing is an error naming its file and Debian package.
func Open(name string) (*Library, error) {
	mu.Lock()
	defer mu.Unlock()
	if l, ok := loaded[name]; ok {
		return l, nil
	}
	if err, ok := failed[name]; ok {
		return nil, err
	}
	l, err := load(name)
	if err != nil {
		failed[name] = err
		return nil, err
	}
	l.threads(threads)
	loaded[name] = l
	return l, nil
}

// RunsConvolutions reports whether backend name's library has
// convolutions (Library.Conv), whether it is present or not.
func RunsConvolutions(name string) bool {
	for _, s := range specs {
		if s.name == name {
			return s.convolutions
		}
	}
	return false
}

// Available are the backends whose library loads here.
func Available() []string {
	var out []string
	for _, s := range specs {
		if _, err := Open(s.name); err == nil {
			out = append(out, s.name)
		}
	}
	return out
}

// SetThreads makes every library, loaded or to be, use n threads (the
// host runtime's).
func SetThreads(n int) {
	mu.Lock()
	defer mu.Unlock()
	threads = max(1, n)
	for _, l := range loaded {
		l.threads(threads)
	}
}

func load(name string) (*Library, error) {
	for _, s := range specs {
		if s.name != name {
			continue
		}
		if q, ok := quietThreads[s.name]; ok && !slices.ContainsFunc(append([]string{q.name}, q.others...), isSet) {
			os.Setenv(q.name, q.value)
		}
		runtime.LockOSThread() // dlerror's message is the thread's
		h, err := purego.Dlopen(s.file, purego.RTLD_NOW|purego.RTLD_LOCAL)
		runtime.UnlockOSThread()
		if err != nil {
			return nil, fmt.Errorf("backend %s: cannot load %s (Debian package %s): %w", name, s.file, s.debian, err)
		}
		l := &Library{Name: name}
		if err := s.load(h, l); err != nil {
			return nil, fmt.Errorf("backend %s: %s: %w", name, s.file, err)
		}
		return l, nil
	}
	return nil, fmt.Errorf("no backend %q (known: %v)", name, Names())
}

func isSet(name string) bool {
	_, ok := os.LookupEnv(name)
	return ok
}

// register binds fn to the library's function called sym.
func register(h uintptr, fn any, sym string) error {
	addr, err := purego.Dlsym(h, sym)
	if err != nil {
		return fmt.Errorf("no function %s", sym)
	}
	purego.RegisterFunc(fn, addr)
	return nil
}
