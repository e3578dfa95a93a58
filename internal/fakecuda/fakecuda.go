// Package fakecuda builds a fake CUDA driver library for tests on
// machines without a GPU (see csrc/fakecuda.c): runtime/cuda loads it as it
// would load libcuda.so.1, and it runs kernels under tofuc's SIMT
// emulator, from the plan's SIMT module named by $FAKECUDA_SIMT.
package fakecuda

import (
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

//go:embed csrc/fakecuda.c
var source []byte

// Build compiles the fake driver into dir with the C compiler ($CC, else
// cc) and returns the library's path.
func Build(dir string) (string, error) {
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	if _, err := exec.LookPath(cc); err != nil {
		return "", fmt.Errorf("no C compiler to build the fake CUDA driver: %w", err)
	}
	src := filepath.Join(dir, "fakecuda.c")
	if err := os.WriteFile(src, source, 0o644); err != nil {
		return "", err
	}
	lib := filepath.Join(dir, "libcuda.so.1")
	out, err := exec.Command(cc, "-std=c11", "-O1", "-Wall", "-Werror", "-shared", "-fPIC", "-o", lib, src, "-ldl").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("building the fake CUDA driver: %w\n%s", err, out)
	}
	return lib, nil
}
