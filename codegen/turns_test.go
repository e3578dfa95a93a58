package codegen_test

import (
	"fmt"
	"testing"

	"tofuc/codegen"
	"tofuc/codegen/emit"
	"tofuc/internal/examplegraph"
	"tofuc/runtime/exec"
	"tofuc/runtime/executor"
	"tofuc/runtime/plan"
	"tofuc/runtime/simt"
	"tofuc/runtime/tensor"
)

// TestTurns: an element-wise kernel large enough to take several elements
// a turn (kernel.Turn) gets the turns' grid, and under the emulator it
// equals the interpreter bit for bit on its planned grid and on a grid of
// 5 blocks (many whole turns, then a last one taken element by element).
func TestTurns(t *testing.T) {
	if testing.Short() {
		t.Skip("8.6 million elements under the emulator")
	}
	n := emit.TurnMin + 777
	g := modelFromSource(t, fmt.Sprintf("model m(x: f32[%d]) {\n    return relu(x * 2.0 - 1.0) + x\n}\n", n))
	dir := t.TempDir()
	c, err := codegen.Compile(g, dir, codegen.Options{Emit: []string{"simt"}, Tools: tools(t)})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Plan.Kernels) != 1 || c.Plan.Kernels[0].Grid != emit.TurnGrid {
		t.Fatalf("kernels %+v: want one on a grid of %d", c.Plan.Kernels, emit.TurnGrid)
	}
	in := examplegraph.RandomInputs(g, 10)
	want, err := exec.Run(g, exec.Interp{}, in, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, grid := range []int64{emit.TurnGrid, 5} {
		p := *c.Plan
		p.Kernels = append([]plan.Kernel(nil), c.Plan.Kernels...)
		p.Kernels[0].Grid = grid
		sp, err := executor.Open(&p, dir, simt.Kind.Name, executor.Options{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := sp.Run(in, want.Params)
		sp.Close()
		if err != nil {
			t.Fatal(err)
		}
		for k, w := range want.Outputs {
			if err := tensor.Compare(got[k], w, tensor.Exact); err != nil {
				t.Errorf("grid %d, output %s: %v", grid, k, err)
			}
		}
	}
}
