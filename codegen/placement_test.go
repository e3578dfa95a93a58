package codegen_test

import (
	"slices"
	"strings"
	"testing"

	"tofuc/analysis/rounding"
	"tofuc/codegen"
	"tofuc/lang"
	"tofuc/lang/precision"
	"tofuc/runtime/hostlib"
	"tofuc/runtime/plan"
	"tofuc/runtime/tensor"
)

// placementModel has contractions of every layout a library's product
// takes: a plain matmul (the product is the output), a linear layer
// whose bias and ReLU become the epilogue, matmul_nt and matmul_tn
// (transposed operands), a batched matmul, an attention's scaled Q·Kᵀ
// over two batch dimensions, a 1×1 convolution over a batch of images
// (the image's columns merge into one dimension), a broadcast batched
// matmul (its operands read through broadcasting views), a product of
// every other row of a (a view whose rows are twice as far apart), a
// weight broadcast over 16 tokens of one row each (the tokens are the
// product's rows, not a batch of 16 products of one row); and, not
// offered as products, a 1×1 convolution of stride 2 (its image's
// columns are 2 apart: no BLAS layout) and a 3×3 padded convolution
// (oneDNN's convolutions take them), and a tiny matmul.
const placementModel = `
op mid_batch(x: [B, M, K], w: [B, K, N]) -> [M, B, N] = lambda i, b, j: sum(lambda k: x[b, i, k] * w[b, k, j])

op reversed_batch(x: [B, M, K], w: [B, K, N]) -> [B, M, N] = lambda b, i, j: sum(lambda k: x[B - 1 - b, i, k] * w[b, k, j])

op even_rows_mm(a: [M2, K], b: [K, N]) -> [M2 / 2, N] =
    let a2: [M2 / 2, K] = lambda i, k: a[2 * i, k] in
    lambda i, j: sum(lambda k: a2[i, k] * b[k, j])

model lib(a: f32[70, 64], b: f32[64, 90], w: f32[90, 64], bias: f32[90], bt: f32[90, 64], at: f32[64, 70],
          x: f32[3, 20, 48], y: f32[3, 48, 36], q: f32[2, 4, 24, 16], k: f32[2, 4, 30, 16],
          img: f32[2, 32, 14, 14], w1: f32[48, 32, 1, 1], w3: f32[8, 32, 3, 3], s: f32[4, 4], t: f32[4, 4],
          ba: f32[1, 4, 20, 48], bb: f32[3, 1, 48, 36], tokens: f32[16, 1, 64]) {
    mm = matmul(a, b)
    lin = relu(matmul(a, b) + bias)
    nt = matmul_nt(a, bt)
    tn = matmul_tn(at, b)
    bmm = batch_matmul(x, y)
    att = batch_matmul_nt(q, k) * 0.25
    c1 = conv2d(img, w1)
    c1s = conv2d<strides = [2, 2]>(img, w1)
    c3 = conv2d<pads = [1, 1, 1, 1]>(img, w3)
    tiny = matmul(s, t)
    bc = matmul_broadcast(ba, bb)
    ev = even_rows_mm(bt, b)
    bx = matmul_broadcast(tokens, b)
    mb = mid_batch(x, y)
    rb = reversed_batch(x, y)
    c1r = relu(conv2d<strides = [2, 2]>(img, w1))
    return mm, lin, nt, tn, bmm, att, c1, c1s, c3, tiny, bc, ev, bx, mb, rb, c1r
}
`

// TestLibraryPlacement: every contraction of placementModel that is a
// strided matrix product gets a placement group, with the library's call
// and, where the output is more than the product, its epilogue; the plan
// run with each variant in force (the generated kernels, each library)
// matches the interpreter under the f32 mode's tolerance.
func TestLibraryPlacement(t *testing.T) {
	backends := hostlib.Available()
	if len(backends) == 0 {
		t.Skip("no library backend on this machine (libopenblas0-pthread, libdnnl2)")
	}
	g := modelFromSource(t, placementModel)
	dir := t.TempDir()
	c, err := codegen.Compile(g, dir, codegen.Options{Emit: []string{"host"}, Tools: tools(t), Precision: precision.F32, Backends: backends})
	if err != nil {
		t.Fatal(err)
	}
	var offered []string
	for _, pg := range c.Plan.Placement {
		offered = append(offered, strings.FieldsFunc(pg.Label, func(r rune) bool { return r == '.' || r == ' ' })[0])
	}
	slices.Sort(offered)
	want, wantEpilogues := []string{"att", "bc", "bmm", "bx", "c1", "ev", "lin", "mm", "nt", "tn"}, 2 // lin's bias and ReLU, att's scale
	if slices.Contains(backends, "onednn") {
		// convolutions that are no strided product (TestConvPlacement)
		want = append(want, "c1r", "c1s", "c3") // c1r's ReLU: a post-op of oneDNN's call
		slices.Sort(want)
	}
	if !slices.Equal(offered, want) {
		t.Errorf("placement groups %v, want %v", offered, want)
	}
	for _, s := range c.Plan.Steps[0] {
		if g := s.GEMM; g != nil && strings.HasPrefix(s.Label, "bx") && (g.M != 16 || len(g.Batch) != 0) {
			t.Errorf("bx: %d rows and batch %v, want 16 rows and no batch", g.M, g.Batch)
		}
	}
	for _, buf := range c.Plan.Buffers {
		if name, ok := strings.CutSuffix(buf.Name, " product"); ok && !slices.ContainsFunc(c.Plan.Placement, func(pg plan.PlaceGroup) bool { return pg.Label == name }) {
			t.Errorf("buffer %s: a product buffer of a kernel not offered", buf.Name)
		}
	}
	for _, s := range c.Plan.Steps[0] {
		if s.Conv == nil {
			continue
		}
		post, want := s.Conv.Post, strings.HasPrefix(s.Label, "c1r")
		if want != (post != nil) || want && !slices.Equal(post.Acts, []plan.Activation{{Kind: plan.ActMax, Value: 0}}) {
			t.Errorf("%s: post-ops %+v", s.Label, post)
		}
	}
	epilogues := 0
	for _, k := range c.Plan.Kernels {
		if strings.HasSuffix(k.Label, "(epilogue)") {
			epilogues++
			if k.FLOPs > 3*k.Elements { // lin's bias and ReLU, att's scale: no sum
				t.Errorf("%s: %d FLOPs for %d elements: the library's sum counted", k.Label, k.FLOPs, k.Elements)
			}
		}
	}
	if epilogues != wantEpilogues {
		t.Errorf("%d epilogue kernels, want %d", epilogues, wantEpilogues)
	}
	for _, variant := range append([]string{plan.Generated}, backends...) {
		for i, pg := range c.Plan.Placement {
			if slices.Contains(pg.Candidates, variant) {
				c.Plan.Placement[i].Chosen = variant
			}
		}
		matchInterp(t, variant, g, c.Plan, dir, false, func(lang.DType) tensor.Tolerance {
			return rounding.ModelTolerance(precision.F32, 1)
		})
	}
}

// TestNoPlacementInExact: the exact mode, bit for bit with the
// interpreter's order, offers no library.
func TestNoPlacementInExact(t *testing.T) {
	g := modelFromSource(t, placementModel)
	c, err := codegen.Compile(g, t.TempDir(), codegen.Options{Emit: []string{"host"}, Tools: tools(t), Backends: []string{"openblas"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Plan.Placement) != 0 {
		t.Errorf("%d placement groups in the exact mode", len(c.Plan.Placement))
	}
}
