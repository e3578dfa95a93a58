package codegen_test

import (
	"strings"
	"testing"

	"tofuc/codegen"
	"tofuc/internal/examplegraph"
	"tofuc/runtime/exec"
	"tofuc/runtime/executor"
	"tofuc/runtime/plan"
	"tofuc/runtime/simt"
	"tofuc/runtime/tensor"
)

// tiledModel has contractions at shapes that are not multiples of the
// tile: a matmul (67×130 by 130×45), one of several tiles each way
// (130×150 by 150×100), a batch matmul, a strided and padded
// convolution, and a matmul whose launch also computes a bias, a
// residual and a ReLU (the tiled form's epilogue).
const tiledModel = `
model tiled(a: f32[67, 130], b: f32[130, 45], c: f32[130, 150], d: f32[150, 100], x: f32[3, 37, 70], y: f32[3, 70, 29],
            img: f32[2, 5, 13, 11], w: f32[7, 5, 3, 3], bias: f32[45], res: f32[67, 45]) {
    mm = matmul(a, b)
    big = matmul(c, d)
    bmm = batch_matmul(x, y)
    conv = conv2d<strides = [2, 2], pads = [1, 1, 1, 1]>(img, w)
    fused = relu(matmul(a, b) + bias + res)
    return mm, big, bmm, conv, fused
}
`

// TestTiledContractions runs the tiled GPU form (kernel.Tiled) under the
// SIMT emulator against the interpreter and checks that every
// contraction uses the tiled form.
func TestTiledContractions(t *testing.T) {
	runTiled(t, tiledModel, []string{"mm", "big", "bmm", "conv", "+relu"})
}

// TestTiledGridStride has more tiles (66000 batch indices) than a grid
// has blocks (65535): the blocks stride over the tiles.
func TestTiledGridStride(t *testing.T) {
	runTiled(t, `
model many(x: f32[66000, 3, 5], y: f32[66000, 5, 2]) {
    return batch_matmul(x, y)
}
`, []string{"batch_matmul"})
}

// runTiled compiles the model src, checks that every contraction is tiled
// and that one computes each of the named nodes, and compares the simt
// runtime's outputs with the interpreter's: equal, the factors being f32
// reads (each thread sums its results' products in the interpreter's
// order, in double; docs/codegen.md).
func runTiled(t *testing.T, src string, nodes []string) *plan.Plan {
	tl := tools(t)
	g := modelFromSource(t, src)
	dir := t.TempDir()
	c, err := codegen.Compile(g, dir, codegen.Options{Emit: []string{"ptx", "simt"}, Tools: tl})
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
	for _, node := range nodes {
		found := false
		for l := range tiled {
			found = found || strings.Contains(l, node)
		}
		if !found {
			t.Errorf("no tiled kernel computes %s (tiled: %v)", node, tiled)
		}
	}
	in := examplegraph.RandomInputs(g, 10)
	want, err := exec.Run(g, exec.Interp{}, in, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := executor.Open(c.Plan, dir, simt.Kind.Name, executor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	got, err := sp.Run(in, want.Params)
	if err != nil {
		t.Fatal(err)
	}
	for name, w := range want.Outputs {
		if err := tensor.Compare(got[name], w, tensor.Exact); err != nil {
			t.Errorf("simt %s: %v", name, err)
		}
	}
	return c.Plan
}

// TestTiledLarge has outputs with enough 128-wide tiles for the large
// tiles (blocking.GPUTile): a batch matmul with a residual and a ReLU in
// 128 × 128 tiles of 8 × 8 (129 × 131 outputs, so the second tile of
// each side has one or three positions inside), and a padded
// convolution of 70 channels in 64 × 128 tiles of 4 × 8.
func TestTiledLarge(t *testing.T) {
	p := runTiled(t, `
model large(x: f32[32, 129, 20], y: f32[32, 20, 131], r: f32[32, 129, 131], img: f32[10, 3, 30, 30], w: f32[70, 3, 3, 3], a: f32[70, 200, 33], b: f32[70, 33, 100]) {
    fused = relu(batch_matmul(x, y) + r)
    conv = conv2d<pads = [1, 1, 1, 1]>(img, w)
    tall = batch_matmul(a, b)
    return fused, conv, tall
}
`, []string{"batch_matmul", "conv", "tall"})
	// The tiles' shared bytes: 128 x 128 of 8 x 8, else 128 x 64 or
	// 64 x 128 of 8 x 4 (a stage of K values of each factor in double,
	// rows padded by two).
	for label, want := range map[string]int64{"fused": 33280, "conv": 25088, "tall": 25088} {
		found := false
		for _, k := range p.Kernels {
			if strings.HasPrefix(k.Label, label) || strings.Contains(k.Label, "+"+label) || strings.Contains(k.Label, label+" (") {
				found = true
				if k.Shared != want {
					t.Errorf("%s: %d bytes of shared memory, want %d (its tile)", k.Label, k.Shared, want)
				}
			}
		}
		if !found {
			t.Errorf("no kernel for %s", label)
		}
	}
}
