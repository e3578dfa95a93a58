package cuda

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"

	"github.com/ebitengine/purego"

	"tofuc/lang/precision"
	"tofuc/runtime/executor"
	"tofuc/runtime/plan"
)

// cuBLAS's enumerations (cublas_api.h).
const (
	cublasOpN             = 0 // CUBLAS_OP_N
	cublasOpT             = 1 // CUBLAS_OP_T
	cublasDefaultMath     = 0 // CUBLAS_DEFAULT_MATH: no TF32
	cublasTF32TensorMath  = 3 // CUBLAS_TF32_TENSOR_OP_MATH
	cublasStatusSuccess   = 0
	cublasStatusNotInited = 1
)

// cublasFiles are the libraries tried in turn, where $TOFUC_LIBCUBLAS
// names none: CUDA 12's, then 11's (PyTorch's CUDA wheels ship them,
// under site-packages/nvidia/cublas/lib, which LD_LIBRARY_PATH must
// name).
var cublasFiles = []string{"libcublas.so.12", "libcublas.so.11"}

// cublasAPI is the loaded cuBLAS library: the functions a plan's GEMM
// steps call. Each takes at most 14 arguments: purego passes 15
// (cublasSgemmStridedBatched's 18 are too many, so a batch is a loop).
type cublasAPI struct {
	Path    string
	Version string

	create      func(h *uintptr) int32
	destroy     func(h uintptr) int32
	setStream   func(h, stream uintptr) int32
	setMathMode func(h uintptr, mode int32) int32
	getVersion  func(h uintptr, v *int32) int32
	sgemm       func(h uintptr, ta, tb, m, n, k int32, alpha *float32, a uint64, lda int32, b uint64, ldb int32, beta *float32, c uint64, ldc int32) int32
}

var (
	cublasMu sync.Mutex
	// cublasLoads is, per list of files tried, the library loaded or
	// why none was: each list is tried once per process.
	cublasLoads = map[string]cublasLoad{}
)

type cublasLoad struct {
	api *cublasAPI
	err error
}

// loadCUBLAS loads cuBLAS: $TOFUC_LIBCUBLAS, else the first of
// cublasFiles that loads.
func loadCUBLAS() (*cublasAPI, error) {
	files := cublasFiles
	if p := os.Getenv("TOFUC_LIBCUBLAS"); p != "" {
		files = []string{p}
	}
	key := strings.Join(files, "\x00")
	cublasMu.Lock()
	defer cublasMu.Unlock()
	if l, ok := cublasLoads[key]; ok {
		return l.api, l.err
	}
	var errs []string
	for _, f := range files {
		api, err := openCUBLAS(f)
		if err == nil {
			cublasLoads[key] = cublasLoad{api: api}
			return api, nil
		}
		errs = append(errs, err.Error())
	}
	err := fmt.Errorf("backend %s: no cuBLAS (%s); the CUDA toolkit's lib64 and PyTorch's wheels (site-packages/nvidia/cublas/lib) have it, for LD_LIBRARY_PATH", plan.CUBLAS, strings.Join(errs, "; "))
	cublasLoads[key] = cublasLoad{err: err}
	return nil, err
}

// openCUBLAS loads the cuBLAS library at path and binds its functions.
func openCUBLAS(path string) (*cublasAPI, error) {
	runtime.LockOSThread() // dlerror's message is the thread's
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
	runtime.UnlockOSThread()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	api := &cublasAPI{Path: path}
	for _, s := range []struct {
		fn   any
		name string
	}{
		{&api.create, "cublasCreate_v2"}, {&api.destroy, "cublasDestroy_v2"},
		{&api.setStream, "cublasSetStream_v2"}, {&api.setMathMode, "cublasSetMathMode"},
		{&api.getVersion, "cublasGetVersion_v2"}, {&api.sgemm, "cublasSgemm_v2"},
	} {
		addr, err := purego.Dlsym(h, s.name)
		if err != nil {
			return nil, fmt.Errorf("%s has no %s", path, s.name)
		}
		purego.RegisterFunc(s.fn, addr)
	}
	return api, nil
}

// cublasStatus is an error for a cuBLAS status other than success.
func cublasStatus(call string, st int32) error {
	names := map[int32]string{1: "not initialized", 3: "allocation failed", 7: "invalid value",
		8: "architecture mismatch", 11: "mapping error", 13: "execution failed", 14: "internal error", 15: "not supported"}
	if st == cublasStatusSuccess {
		return nil
	}
	if name, ok := names[st]; ok {
		return fmt.Errorf("%s: %s (%d)", call, name, st)
	}
	return fmt.Errorf("%s: status %d", call, st)
}

// cublasMath is the math mode of a plan's precision: TF32 tensor cores
// in tf32, none in f32 (cuBLAS then rounds as the generated f32
// kernels do, within the mode's tolerance). The modes that round
// operands to 16 bits get no cuBLAS step (codegen.GPULibraries).
func cublasMath(mode precision.Mode) int32 {
	if mode == precision.TF32 {
		return cublasTF32TensorMath
	}
	return cublasDefaultMath
}

// handle is the cuBLAS handle of c's GPU, made on first use with c's
// context current (a handle belongs to the context it was made in), in
// the plan's math mode.
func (c *context) handle(api *cublasAPI) (uintptr, error) {
	if c.blas != 0 && c.blasAPI == api {
		return c.blas, nil
	}
	if err := c.destroyHandle(); err != nil {
		return 0, err
	}
	if err := cublasStatus("cublasCreate", api.create(&c.blas)); err != nil {
		c.blas = 0
		return 0, err
	}
	c.blasAPI = api
	if err := cublasStatus("cublasSetMathMode", api.setMathMode(c.blas, cublasMath(c.plan.Precision))); err != nil {
		return 0, err
	}
	if api.Version == "" {
		var v int32
		if err := cublasStatus("cublasGetVersion", api.getVersion(c.blas, &v)); err != nil {
			return 0, err
		}
		api.Version = fmt.Sprintf("cuBLAS %d.%d.%d", v/10000, v%10000/100, v%100)
	}
	return c.blas, nil
}

// destroyHandle destroys c's cuBLAS handle, if it has one, with c's
// context current.
func (c *context) destroyHandle() error {
	if c.blas == 0 {
		return nil
	}
	err := cublasStatus("cublasDestroy", c.blasAPI.destroy(c.blas))
	c.blas, c.blasAPI = 0, nil
	return err
}

// gemm enqueues GEMM call g on v's stream, its operands in the device
// buffers at a, b and out. cuBLAS is column-major: a row-major C = A·B
// is the column-major Cᵀ = Bᵀ·Aᵀ, and a row-major matrix with leading
// dimension ld is its transpose, column-major, with the same ld.
func (v *device) gemm(api *cublasAPI, g *plan.GEMMCall, a, b, out uint64) error {
	ops := g.Operands()
	A, B, C := ops[0], ops[1], ops[2]
	if trans, _, _ := C.Layout(); trans {
		A, B, C = B.Transposed(), A.Transposed(), C.Transposed()
		a, b = b, a
	}
	ta, lda, _ := A.Layout()
	tb, ldb, _ := B.Layout()
	_, ldc, _ := C.Layout()
	op := func(t bool) int32 {
		if t {
			return cublasOpT
		}
		return cublasOpN
	}
	return v.c.do(func() error {
		h, err := v.c.handle(api)
		if err != nil {
			return err
		}
		if err := cublasStatus("cublasSetStream", api.setStream(h, v.stream)); err != nil {
			return err
		}
		alpha, beta := float32(1), float32(0)
		var failed error
		g.ForEachEntry(func(idx []int) {
			if failed != nil {
				return
			}
			pa, pb, pc := at(a, A.Matrix, idx), at(b, B.Matrix, idx), at(out, C.Matrix, idx)
			failed = cublasStatus("cublasSgemm", api.sgemm(h, op(tb), op(ta), int32(C.Cols), int32(C.Rows), int32(A.Cols),
				&alpha, pb, int32(ldb), pa, int32(lda), &beta, pc, int32(ldc)))
		})
		runtime.KeepAlive(&alpha)
		runtime.KeepAlive(&beta)
		return failed
	})
}

// at is the device address of matrix m's batch entry idx in the buffer
// at base (f32 elements).
func at(base uint64, m *plan.Matrix, idx []int) uint64 {
	return base + uint64(m.EntryOffset(idx))*4
}

// LoadLibrary loads backend's library for the device: cuBLAS or cuDNN;
// a host library is executor.ErrOtherDevice.
func (v *device) LoadLibrary(backend string) error {
	var err error
	switch backend {
	case plan.CUBLAS:
		_, err = loadCUBLAS()
	case plan.CUDNN:
		_, err = loadCUDNN()
	default:
		err = fmt.Errorf("backend %s: %w", backend, executor.ErrOtherDevice)
	}
	return err
}

// Library enqueues library step s on the device's stream, its operands
// at ptrs: a GEMM on cuBLAS, a convolution on cuDNN.
func (v *device) Library(s *plan.Step, ptrs []executor.Ptr) error {
	switch {
	case s.GEMM != nil && s.GEMM.Backend == plan.CUBLAS:
		api, err := loadCUBLAS()
		if err != nil {
			return err
		}
		return v.gemm(api, s.GEMM, uint64(ptrs[0]), uint64(ptrs[1]), uint64(ptrs[2]))
	case s.Conv != nil && s.Conv.Backend == plan.CUDNN:
		api, err := loadCUDNN()
		if err != nil {
			return err
		}
		return v.conv(api, s.Conv, uint64(ptrs[0]), uint64(ptrs[1]), uint64(ptrs[2]))
	}
	c := s.LibraryCall()
	return fmt.Errorf("a GPU runs cuBLAS's products and cuDNN's convolutions, not %s's %s", c.Library(), c.Name())
}
