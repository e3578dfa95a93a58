package codegen_test

import (
	"testing"

	"tofuc/codegen"
	"tofuc/runtime/exec"
	"tofuc/runtime/executor"
	"tofuc/runtime/plan"
	"tofuc/runtime/simt"
	"tofuc/runtime/tensor"
)

// TestAnyGrid: every GPU form strides over what its grid does not cover,
// so a kernel computes the same for any grid. Grids are capped at 65535
// blocks, which the tests' small tensors never reach (but
// TestTiledGridStride's), so the strides would go untested: here the
// plan's kernels run under the SIMT emulator with grids of 1 and 3
// blocks and must equal the planned grids' run bit for bit (a block's
// order of additions does not depend on the grid), which must match the
// interpreter.
func TestAnyGrid(t *testing.T) {
	tl := tools(t)
	g := modelFromSource(t, `
model strided(x: f32[70, 300], idx: i64[50], a: f32[130, 40], b: f32[40, 150], q: f32[2, 2, 20, 8], k: f32[2, 2, 45, 8], kb: f32[45], a2: f32[100, 8], b2: f32[8, 40], c2: f32[40, 6]) {
    e = sigmoid(x) * 2.0 - 0.5
    tr = transpose<perm = [1, 0]>(x)
    s = reduce_sum<axes = [1]>(x)
    gt = gather(x, idx)
    mm = matmul(a, b)
    sm = softmax(x)
    aw = attention_weights<causal = true>(q, k, kb)
    ch = matmul(relu(matmul(a2, b2)), c2)
    return e, tr, s, gt, mm, sm, aw, ch
}
`)
	dir := t.TempDir()
	c, err := codegen.Compile(g, dir, codegen.Options{Emit: []string{"simt"}, Tools: tl})
	if err != nil {
		t.Fatal(err)
	}
	in := randomInputs(g, 10)
	want, err := exec.Run(g, exec.Interp{}, in, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	run := func(p *plan.Plan) map[string]*tensor.Tensor {
		t.Helper()
		sp, err := executor.Open(p, dir, simt.Kind.Name, executor.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer sp.Close()
		out, err := sp.Run(in, want.Params)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	planned := run(c.Plan)
	for k, w := range want.Outputs {
		if err := tensor.Compare(planned[k], w, tensor.Reordered(w.DType, 300)); err != nil {
			t.Errorf("planned grids, output %s: %v", k, err)
		}
	}
	for _, grid := range []int64{1, 3} {
		p := *c.Plan
		p.Kernels = append([]plan.Kernel(nil), c.Plan.Kernels...)
		shrunk := map[string]bool{}
		for i := range p.Kernels {
			k := &p.Kernels[i]
			switch k.Form {
			case "threads", "blocks", "rows", "tiled":
				if k.Grid > grid {
					k.Grid = grid
					shrunk[k.Form] = true
				}
			}
		}
		for _, form := range []string{"threads", "blocks", "rows", "tiled"} {
			if !shrunk[form] {
				t.Errorf("grid %d: no %s kernel had a larger grid", grid, form)
			}
		}
		got := run(&p)
		for k, w := range planned {
			if err := tensor.Compare(got[k], w, tensor.Exact); err != nil {
				t.Errorf("grid %d, output %s: %v", grid, k, err)
			}
		}
	}
}
