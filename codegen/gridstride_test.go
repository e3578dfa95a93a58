package codegen_test

import (
	"slices"
	"testing"

	"tofuc/analysis/rounding"
	"tofuc/codegen"
	"tofuc/internal/examplegraph"
	"tofuc/lang/precision"
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
// interpreter; in the tf32, bf16 and f16 modes too, whose contractions
// run on tensor cores.
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
	in := examplegraph.RandomInputs(g, 10)
	want, err := exec.Run(g, exec.Interp{}, in, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []struct {
		p     precision.Mode
		forms []string
	}{{precision.Exact, []string{"threads", "blocks", "rows", "tiled"}}, {precision.F32, []string{"threads", "blocks", "rows", "tiled"}}, {precision.TF32, []string{"tiled-tf32"}}, {precision.BF16, []string{"tiled-bf16"}}, {precision.F16, []string{"tiled-f16"}}} {
		dir := t.TempDir()
		c, err := codegen.Compile(g, dir, codegen.Options{Emit: []string{"simt"}, Tools: tl, Precision: mode.p})
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
			tol := tensor.Reordered(w.DType, 300)
			if mode.p != precision.Exact {
				tol = rounding.ModelTolerance(mode.p, rounding.ContractionDepth(g))
			}
			if err := tensor.Compare(planned[k], w, tol); err != nil {
				t.Errorf("%s, planned grids, output %s: %v", mode.p, k, err)
			}
		}
		for _, grid := range []int64{1, 3} {
			p := *c.Plan
			p.Kernels = append([]plan.Kernel(nil), c.Plan.Kernels...)
			shrunk := map[string]bool{}
			for i := range p.Kernels {
				k := &p.Kernels[i]
				if k.Grid > grid && slices.Contains(mode.forms, k.Form) {
					k.Grid = grid
					shrunk[k.Form] = true
				}
			}
			for _, form := range mode.forms {
				if !shrunk[form] {
					t.Errorf("%s, grid %d: no %s kernel had a larger grid", mode.p, grid, form)
				}
			}
			got := run(&p)
			for k, w := range planned {
				if err := tensor.Compare(got[k], w, tensor.Exact); err != nil {
					t.Errorf("%s, grid %d, output %s: %v", mode.p, grid, k, err)
				}
			}
		}
	}
}
