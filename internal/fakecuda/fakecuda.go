// Package fakecuda builds fake CUDA libraries for tests on machines
// without a GPU: the driver (csrc/fakecuda.c), which runtime/cuda loads
// as it would load libcuda.so.1 and which runs kernels under tofuc's
// SIMT emulator, from the plan's SIMT module named by $FAKECUDA_SIMT;
// cuBLAS (csrc/fakecublas.c), cuDNN (csrc/fakecudnn.c) and NCCL
// (csrc/fakenccl.c, its ranks threads of one process), on the fake
// driver's memory and streams.
package fakecuda

import (
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

var (
	//go:embed csrc/fakecuda.c
	driverSource []byte
	//go:embed csrc/fakecublas.c
	cublasSource []byte
	//go:embed csrc/fakecudnn.c
	cudnnSource []byte
	//go:embed csrc/fakenccl.c
	ncclSource []byte
)

// Build compiles the fake driver into dir with the C compiler ($CC, else
// cc) and returns the library's path.
func Build(dir string) (string, error) {
	return build(dir, "fakecuda.c", driverSource, "libcuda.so.1")
}

// BuildCUBLAS compiles the fake cuBLAS into dir and returns the
// library's path ($TOFUC_LIBCUBLAS for runtime/cuda). It runs in a
// process that has loaded the fake driver.
func BuildCUBLAS(dir string) (string, error) {
	return build(dir, "fakecublas.c", cublasSource, "libcublas.so.12")
}

// BuildCUDNN compiles the fake cuDNN into dir and returns the library's
// path ($TOFUC_LIBCUDNN for runtime/cuda). It runs in a process that has
// loaded the fake driver.
func BuildCUDNN(dir string) (string, error) {
	return build(dir, "fakecudnn.c", cudnnSource, "libcudnn.so.9")
}

// BuildNCCL compiles the fake NCCL into dir and returns the library's
// path ($TOFUC_LIBNCCL for runtime/cuda). It runs in a process that has
// loaded the fake driver.
func BuildNCCL(dir string) (string, error) {
	return build(dir, "fakenccl.c", ncclSource, "libnccl.so.2")
}

func build(dir, name string, source []byte, lib string) (string, error) {
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	if _, err := exec.LookPath(cc); err != nil {
		return "", fmt.Errorf("no C compiler to build the fake %s: %w", lib, err)
	}
	src := filepath.Join(dir, name)
	if err := os.WriteFile(src, source, 0o644); err != nil {
		return "", err
	}
	out := filepath.Join(dir, lib)
	msg, err := exec.Command(cc, "-std=c11", "-O1", "-Wall", "-Werror", "-shared", "-fPIC", "-pthread", "-o", out, src, "-ldl").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("building the fake %s: %w\n%s", lib, err, msg)
	}
	return out, nil
}
