package mpi

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
)

// Start replaces this process with mpirun starting n ranks on this
// machine, each running this program with args: what `--nproc-per-node`
// does. The ranks are not bound to cores (each runs threads of its own:
// LocalThreads), may outnumber the cores, and may run as root when this
// process does (mpirun refuses root unless told), and have StopGrace
// seconds to say why they stop before mpirun kills them.
func Start(n int, args []string) error {
	mpirun, err := exec.LookPath("mpirun")
	if err != nil {
		return fmt.Errorf("starting %d ranks needs Open MPI's mpirun (Debian's openmpi-bin): %w", n, err)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	argv := append([]string{mpirun, "-np", strconv.Itoa(n), "--oversubscribe", "--bind-to", "none", self}, args...)
	env := os.Environ()
	if _, set := os.LookupEnv(sigkillTimeoutEnv); !set {
		env = append(env, sigkillTimeoutEnv+"="+StopGrace)
	}
	if os.Geteuid() == 0 {
		env = append(env, "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
	}
	return syscall.Exec(mpirun, argv, env)
}

// StopGrace is the seconds between mpirun's SIGTERM and its SIGKILL
// that Start gives ranks, and docs/distributed.md recommends: Open MPI's
// default, 1, leaves a stopped rank on a busy machine too little time to
// find and name the rank that holds it.
const StopGrace = "2"

// LocalThreads is a rank's share of this machine's cores: the cores over
// the ranks the launcher started on it (at least 1).
func LocalThreads() int {
	local, err := strconv.Atoi(os.Getenv("OMPI_COMM_WORLD_LOCAL_SIZE"))
	if err != nil || local < 1 {
		local = 1
	}
	return max(1, runtime.NumCPU()/local)
}
