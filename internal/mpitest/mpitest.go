// Package mpitest starts ranks under Open MPI's mpirun for tests, and
// skips a test where there is no mpirun (make test installs it).
package mpitest

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"tofuc/runtime/mpi"
)

// Path is mpirun's path; a machine without it skips the test.
func Path(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("mpirun")
	if err != nil {
		t.Skip("no mpirun (Debian's openmpi-bin; make test installs it)")
	}
	return path
}

// Command is mpirun with args, allowed to run as root (tests run as
// root in containers) and to start more ranks than there are cores.
func Command(ctx context.Context, t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.CommandContext(ctx, Path(t), append([]string{"--oversubscribe"}, args...)...)
	cmd.Env = append(os.Environ(), Env...)
	return cmd
}

// Env lets mpirun run as root and gives stopped ranks the time
// docs/distributed.md recommends to say why (mpi.StopGrace).
var Env = []string{"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1", "OMPI_MCA_odls_base_sigkill_timeout=" + mpi.StopGrace}
