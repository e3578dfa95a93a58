package executor_test

import (
	"strings"
	"testing"

	"tofuc/lang"
	"tofuc/runtime/executor"
	"tofuc/runtime/host"
	"tofuc/runtime/plan"
	"tofuc/runtime/tensor"
)

// noKernels is an engine for plans without launches.
type noKernels struct{}

func (noKernels) Runs(*plan.Kernel) bool             { return false }
func (noKernels) Launch(*plan.Kernel, uintptr) error { return nil }
func (noKernels) Close() error                       { return nil }

// TestOpaquePanics: a panic of an opaque step's host code (a plan
// changed after Validate, which refuses such steps, here after Load)
// is an error naming the step, not a crash.
func TestOpaquePanics(t *testing.T) {
	box := []plan.Dim{{Lo: 0, Hi: 2}, {Lo: 0, Hi: 2}}
	p := &plan.Plan{Version: plan.Version, Devices: 1, ArenaBytes: []int64{64},
		Buffers: []plan.Buffer{
			{ID: 0, Name: "m", DType: "f32", Shape: []int64{2, 2}, Bytes: 16, Role: plan.RoleInput, ViewOf: -1},
			{ID: 1, Name: "inv", DType: "f64", Shape: []int64{2, 2}, Bytes: 32, Role: plan.RoleOutput, Offset: 32, ViewOf: -1},
		},
		Inputs:  []plan.Binding{{Name: "m", DType: "f32", Shape: []int64{2, 2}, Tiles: []plan.Tile{{Buffer: 0, Box: box}}}},
		Outputs: []plan.Binding{{Name: "inv", DType: "f64", Shape: []int64{2, 2}, Tiles: []plan.Tile{{Buffer: 1, Box: box}}}},
		Init:    [][]plan.Step{nil},
		Steps: [][]plan.Step{{{Op: plan.Opaque, To: 1, Label: "inverse of m",
			Call: &plan.OpaqueCall{Fn: "inverse", Args: []int{0}, Fixed: [][]int64{{-1, -1}}, Shape: []int64{2, 2}}}}},
	}
	pr, err := executor.Load(p, host.Open(p, noKernels{}, host.Inline))
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	m := map[string]*tensor.Tensor{"m": tensor.FromFloats(lang.F32, []int{2, 2}, []float64{2, 0, 0, 4})}
	if _, err := pr.Run(m, nil); err != nil {
		t.Fatalf("the plan as loaded: %v", err)
	}
	call := p.Steps[0][0].Call
	call.Batch = []int64{30} // results beyond the 4 elements of inv
	_, err = pr.Run(m, nil)
	if err == nil || !strings.Contains(err.Error(), "device 0, step 0 (opaque inverse of m): the host code of the step failed: ") || strings.Count(err.Error(), "\n") > 0 {
		t.Errorf("got %v, want one line naming the step", err)
	}
}
