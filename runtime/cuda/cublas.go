package cuda

import (
	"errors"
	"fmt"
	"runtime"

	"tofuc/lang/precision"
	"tofuc/runtime/plan"
)

// cuBLAS's enumerations (cublas_api.h).
const (
	cublasOpN            = 0 // CUBLAS_OP_N
	cublasOpT            = 1 // CUBLAS_OP_T
	cublasDefaultMath    = 0 // CUBLAS_DEFAULT_MATH: no TF32
	cublasTF32TensorMath = 3 // CUBLAS_TF32_TENSOR_OP_MATH
)

// cublasAPI is the part of cuBLAS a plan's products call. Each function
// takes at most 14 arguments: purego passes 15
// (cublasSgemmStridedBatched's 18 are too many, so a batch is a loop).
type cublasAPI struct {
	create      func(h *uintptr) int32
	destroy     func(h uintptr) int32
	setStream   func(h, stream uintptr) int32
	setMathMode func(h uintptr, mode int32) int32
	sgemm       func(h uintptr, ta, tb, m, n, k int32, alpha *float32, a uint64, lda int32, b uint64, ldb int32, beta *float32, c uint64, ldc int32) int32
}

// cublasLib loads cuBLAS: $TOFUC_LIBCUBLAS, else CUDA 13's, 12's, then 11's (PyTorch 2.11's cu130 wheels ship 13's, whose v2 calls are those below).
var cublasLib = &gpuLibrary[cublasAPI]{label: "backend " + plan.CUBLAS, where: toolkitOrWheels, what: "cuBLAS", env: "TOFUC_LIBCUBLAS",
	files: []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so.11"},
	symbols: func(api *cublasAPI) []symbol {
		return []symbol{{&api.create, "cublasCreate_v2"}, {&api.destroy, "cublasDestroy_v2"},
			{&api.setStream, "cublasSetStream_v2"}, {&api.setMathMode, "cublasSetMathMode"}, {&api.sgemm, "cublasSgemm_v2"}}
	}}

// cublasStatus is an error for a cuBLAS status other than success.
func cublasStatus(call string, st int32) error {
	names := map[int32]string{1: "not initialized", 3: "allocation failed", 7: "invalid value",
		8: "architecture mismatch", 11: "mapping error", 13: "execution failed", 14: "internal error", 15: "not supported"}
	if st == 0 {
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
// operands to 16 bits get no cuBLAS step (codegen's gpuMode).
func cublasMath(mode precision.Mode) int32 {
	if mode == precision.TF32 {
		return cublasTF32TensorMath
	}
	return cublasDefaultMath
}

// cublasHandle is the cuBLAS handle of c's GPU, in the plan's math
// mode, made on first use with c's context current (a handle belongs
// to the context it was made in).
func (c *context) cublasHandle(api *cublasAPI) (uintptr, error) {
	if c.blas != 0 && c.blasAPI == api {
		return c.blas, nil
	}
	if err := c.destroyCUBLAS(); err != nil {
		return 0, err
	}
	var h uintptr
	if err := cublasStatus("cublasCreate", api.create(&h)); err != nil {
		return 0, err
	}
	if err := cublasStatus("cublasSetMathMode", api.setMathMode(h, cublasMath(c.plan.Precision))); err != nil {
		return 0, errors.Join(err, cublasStatus("cublasDestroy", api.destroy(h)))
	}
	c.blas, c.blasAPI = h, api
	return h, nil
}

// destroyCUBLAS destroys c's cuBLAS handle, if it has one, with c's
// context current.
func (c *context) destroyCUBLAS() error {
	if c.blas == 0 {
		return nil
	}
	err := cublasStatus("cublasDestroy", c.blasAPI.destroy(c.blas))
	c.blas, c.blasAPI = 0, nil
	return err
}

// gemm enqueues GEMM call g on v's stream, its operands in the device
// buffers at a, b and out, through the handle PrepareLibrary made.
// cuBLAS is column-major: a row-major C = A·B is the column-major
// Cᵀ = Bᵀ·Aᵀ, and a row-major matrix with leading dimension ld is its
// transpose, column-major, with the same ld.
func (v *device) gemm(g *plan.GEMMCall, a, b, out uint64) error {
	l := g.BLAS()
	if l.Swapped {
		a, b = b, a
	}
	op := func(t bool) int32 {
		if t {
			return cublasOpT
		}
		return cublasOpN
	}
	api, h := v.c.blasAPI, v.c.blas
	return v.c.do(func() error {
		if err := cublasStatus("cublasSetStream", api.setStream(h, v.stream)); err != nil {
			return err
		}
		alpha, beta := float32(1), float32(0)
		var failed error
		g.ForEachEntry(func(idx []int) {
			if failed != nil {
				return
			}
			pa, pb, pc := at(a, l.A.Matrix, idx), at(b, l.B.Matrix, idx), at(out, l.C.Matrix, idx)
			failed = cublasStatus("cublasSgemm", api.sgemm(h, op(l.TransB), op(l.TransA), int32(l.C.Cols), int32(l.C.Rows), int32(l.A.Cols),
				&alpha, pb, int32(l.LDB), pa, int32(l.LDA), &beta, pc, int32(l.LDC)))
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
