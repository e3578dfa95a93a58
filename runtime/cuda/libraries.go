package cuda

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"

	"github.com/ebitengine/purego"

	"tofuc/runtime/executor"
	"tofuc/runtime/plan"
)

// A GPU's vendor libraries (cuBLAS, cuDNN), loaded at run time through
// purego like the driver, run a plan's library steps on the logical
// device's stream (docs/placement.md, "GPU libraries"); NCCL (nccl.go)
// is loaded the same way.

// toolkitOrWheels is where cuBLAS and cuDNN are found.
const toolkitOrWheels = "the CUDA toolkit's lib64 and PyTorch's wheels (site-packages/nvidia/*/lib)"

// symbol is a library function to bind: the Go function's address (or
// a *uintptr that takes the function's own, for a call purego cannot
// make: ncclCommInitRank's) and the symbol's name.
type symbol struct {
	fn   any
	name string
}

// gpuLibrary is how to load one library: the environment variable that
// names its file, else the files tried in turn, and the functions of an
// API value (T) to bind. A missing library is an error that starts with
// label and says where the library is found.
type gpuLibrary[T any] struct {
	label, what, env, where string
	files                   []string
	symbols                 func(api *T) []symbol

	mu sync.Mutex
	// loads is, per list of files tried, the library loaded or why none
	// was: each list is tried once per process.
	loads map[string]libraryLoad[T]
}

type libraryLoad[T any] struct {
	api *T
	err error
}

// load loads the library: $env, else the first of files that loads.
func (l *gpuLibrary[T]) load() (*T, error) {
	files := l.files
	if p := os.Getenv(l.env); p != "" {
		files = []string{p}
	}
	key := strings.Join(files, "\x00")
	l.mu.Lock()
	defer l.mu.Unlock()
	if r, ok := l.loads[key]; ok {
		return r.api, r.err
	}
	if l.loads == nil {
		l.loads = map[string]libraryLoad[T]{}
	}
	var errs []string
	for _, f := range files {
		api := new(T)
		err := bind(f, l.symbols(api))
		if err == nil {
			l.loads[key] = libraryLoad[T]{api: api}
			return api, nil
		}
		errs = append(errs, err.Error())
	}
	err := fmt.Errorf("%s: no %s (%s); %s have it, for LD_LIBRARY_PATH or $%s", l.label, l.what, strings.Join(errs, "; "), l.where, l.env)
	l.loads[key] = libraryLoad[T]{err: err}
	return nil, err
}

// bind loads the library at path and binds symbols to its functions.
func bind(path string, symbols []symbol) error {
	runtime.LockOSThread() // dlerror's message is the thread's
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
	runtime.UnlockOSThread()
	if err != nil {
		return err // dlerror's message names the file
	}
	for _, s := range symbols {
		addr, err := purego.Dlsym(h, s.name)
		if err != nil {
			return fmt.Errorf("%s has no %s", path, s.name)
		}
		if p, ok := s.fn.(*uintptr); ok {
			*p = addr
		} else {
			purego.RegisterFunc(s.fn, addr)
		}
	}
	return nil
}

// LoadLibrary loads backend's library for the device: cuBLAS or cuDNN;
// a host library is executor.ErrOtherDevice.
func (v *device) LoadLibrary(backend string) error {
	var err error
	switch backend {
	case plan.CUBLAS:
		_, err = cublasLib.load()
	case plan.CUDNN:
		_, err = cudnnLib.load()
	default:
		err = fmt.Errorf("backend %s: %w", backend, executor.ErrOtherDevice)
	}
	return err
}

// PrepareLibrary makes what library step s needs on the device's GPU:
// the library's handle and, for a convolution, its descriptors,
// algorithm and workspace. An error says why the GPU cannot run it.
func (v *device) PrepareLibrary(s *plan.Step) error {
	return v.c.do(func() error {
		switch {
		case s.GEMM != nil && s.GEMM.Backend == plan.CUBLAS:
			api, err := cublasLib.load()
			if err != nil {
				return err
			}
			_, err = v.c.cublasHandle(api)
			return err
		case s.Conv != nil && s.Conv.Backend == plan.CUDNN:
			api, err := cudnnLib.load()
			if err != nil {
				return err
			}
			h, err := v.c.cudnnHandle(api)
			if err != nil {
				return err
			}
			_, err = v.c.convolution(api, h, s.Conv)
			return err
		}
		c := s.LibraryCall()
		return fmt.Errorf("a GPU runs cuBLAS's products and cuDNN's convolutions, not %s's %s", c.Library(), c.Name())
	})
}

// Library enqueues library step s, prepared (PrepareLibrary), on the
// device's stream, its operands at ptrs: a GEMM's A, B and C, or a
// convolution's X, W and Y.
func (v *device) Library(s *plan.Step, ptrs []executor.Ptr) error {
	switch {
	case s.GEMM != nil && v.c.blasAPI != nil:
		return v.gemm(s.GEMM, uint64(ptrs[0]), uint64(ptrs[1]), uint64(ptrs[2]))
	case s.Conv != nil && v.c.dnnAPI != nil:
		return v.conv(s.Conv, uint64(ptrs[0]), uint64(ptrs[1]), uint64(ptrs[2]))
	}
	return fmt.Errorf("the library step %s was not prepared on %s", s.Label, v.Name())
}
