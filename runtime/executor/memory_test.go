package executor_test

import (
	"strings"
	"testing"

	"tofuc/runtime/executor"
	"tofuc/runtime/native"
	"tofuc/runtime/plan"
)

// TestCopyRowsCounted: the strided copies of copy steps count in a run's
// host memory. A box of 20 dimensions of 2 out of 3 is 2^18 copies of 2
// bytes, 18 MiB of descriptions; 2^17 such steps, of a plan of a few
// megabytes, would need terabytes (the run died of running out of
// memory).
func TestCopyRowsCounted(t *testing.T) {
	if _, ok := native.AvailableMemory(); !ok {
		t.Skip("this machine does not say how much memory it has available")
	}
	const rank = 20
	from, to := make([]int64, rank), make([]int64, rank)
	box, at := make([]plan.Dim, rank), make([]int64, rank)
	for d := range rank {
		from[d], to[d], box[d] = 3, 2, plan.Dim{Lo: 0, Hi: 2}
	}
	p := &plan.Plan{Devices: 1, ArenaBytes: []int64{0},
		Buffers: []plan.Buffer{{ID: 0, DType: "i8", Shape: from}, {ID: 1, DType: "i8", Shape: to}}}
	steps := make([]plan.Step, 1<<17)
	for i := range steps {
		steps[i] = plan.Step{Op: plan.Copy, From: 0, Src: box, To: 1, At: at}
	}
	p.Init, p.Steps = [][]plan.Step{nil}, [][]plan.Step{steps}
	err := executor.CheckHostMemory(p, nil)
	if err == nil || !strings.Contains(err.Error(), "for its copies' strided rows") {
		t.Errorf("got %v, want the copies' rows counted", err)
	}
}
