package mpi_test

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"tofuc/internal/mpitest"
	"tofuc/runtime/mpi"
)

// TestMain runs this test binary as a rank when mpirun starts it with a
// role (TOFUC_MPI_ROLE): the ranks' side of the tests below.
func TestMain(m *testing.M) {
	if role := os.Getenv("TOFUC_MPI_ROLE"); role != "" && mpi.Launched() {
		os.Exit(runRole(role))
	}
	os.Exit(m.Run())
}

// runRole is a rank's part in a test under mpirun.
func runRole(role string) int {
	w, err := mpi.Init(time.Second)
	if err != nil {
		fmt.Println(err)
		return 1
	}
	switch role {
	case "allreduce-stuck":
		if w.Rank() == 1 {
			time.Sleep(10 * time.Second) // never joins
			return 0
		}
		part, sum := make([]byte, 1<<20), make([]byte, 1<<20)
		err := w.AllReduce([]int{0, 1, 2}, part, sum, "f32")
		fmt.Printf("rank %d: %v\n", w.Rank(), err)
	}
	return 0 // no MPI_Finalize: a rank is gone
}

// TestAllReduceStuck: rank 1 of 3 never joins an all-reduce; ranks 0
// and 2 give up after the timeout, each with a line naming the call,
// and MPI does not abort the job (a collective's request cannot be
// cancelled: abandoning one must not try).
func TestAllReduceStuck(t *testing.T) {
	mpitest.Path(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := mpitest.Command(ctx, t, "-np", "3", "-x", "TOFUC_MPI_ROLE", self, "-test.run", "^$")
	cmd.Env = append(cmd.Env, "TOFUC_MPI_ROLE=allreduce-stuck")
	out, _ := cmd.CombinedOutput()
	for _, r := range []int{0, 2} {
		if !regexp.MustCompile(fmt.Sprintf(`(?m)^rank %d: an all-reduce of 1048576 bytes among the ranks \[0 1 2\]: not done in 1s: `, r)).Match(out) {
			t.Errorf("rank %d did not give up as it should:\n%s", r, out)
		}
	}
	if strings.Contains(string(out), "MPI_ERR") || strings.Contains(string(out), "fatal error") {
		t.Errorf("MPI or Go failed:\n%s", out)
	}
}
