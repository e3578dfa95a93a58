package codegen_test

import (
	"strings"
	"testing"

	"tofuc/analysis/check"
	"tofuc/codegen"
	"tofuc/runtime/exec"
	"tofuc/runtime/simt"
	"tofuc/runtime/tensor"
)

// tiledModel has contractions at shapes that are not multiples of the
// tile: a matmul (67×130 by 130×45), a batch matmul, a strided and padded
// convolution, and a matmul whose launch also computes a bias, a
// residual and a ReLU (the tiled form's epilogue).
const tiledModel = `
model tiled(a: f32[67, 130], b: f32[130, 45], x: f32[3, 37, 70], y: f32[3, 70, 29],
            img: f32[2, 5, 13, 11], w: f32[7, 5, 3, 3], bias: f32[45], res: f32[67, 45]) {
    mm = matmul(a, b)
    bmm = batch_matmul(x, y)
    conv = conv2d<strides = [2, 2], pads = [1, 1, 1, 1]>(img, w)
    fused = relu(matmul(a, b) + bias + res)
    return mm, bmm, conv, fused
}
`

// TestTiledContractions runs the tiled GPU form (kernel.Tiled) under the
// SIMT emulator against the interpreter, within the tolerance for
// reordered sums of the depth (tensor.Reordered, docs/codegen.md), and
// checks that every contraction uses the tiled form.
func TestTiledContractions(t *testing.T) {
	tl := tools(t)
	prog, err := check.NewProgram()
	if err != nil {
		t.Fatal(err)
	}
	m, err := prog.LoadSource("tiled.tdl", []byte(tiledModel))
	if err != nil {
		t.Fatal(err)
	}
	g, err := m.Model("", nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	c, err := codegen.Compile(g, dir, codegen.Options{Emit: codegen.Emit{PTX: true, SIMT: true}, Tools: tl})
	if err != nil {
		t.Fatal(err)
	}
	tiled := map[string]bool{}
	for _, k := range c.Plan.Kernels {
		t.Logf("%s %s %s grid %d block %d shared %d", k.Label, k.Kind, k.Form, k.Grid, k.Block, k.Shared)
		if k.Kind == "contraction" && k.Form != "tiled" {
			t.Errorf("%s: a contraction in the %s form", k.Label, k.Form)
		}
		if k.Form == "tiled" {
			tiled[k.Label] = true
		}
	}
	for _, node := range []string{"mm", "bmm", "conv", "+relu"} {
		found := false
		for l := range tiled {
			found = found || strings.Contains(l, node)
		}
		if !found {
			t.Errorf("no tiled kernel computes %s (tiled: %v)", node, tiled)
		}
	}
	in := randomInputs(g, 10)
	want, err := exec.Run(g, exec.Interp{}, in, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := simt.Load(c.Plan, dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	got, err := sp.Run(in, want.Params)
	if err != nil {
		t.Fatal(err)
	}
	depth := map[string]int{"mm": 130, "bmm": 70, "conv": 5 * 3 * 3, "fused": 130}
	for name, w := range want.Outputs {
		if err := tensor.Compare(got[name], w, tensor.Reordered(w.DType, depth[name])); err != nil {
			t.Errorf("simt %s: %v", name, err)
		}
	}
}
