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

// convModel has the convolutions of CNNs and mobile networks: padded
// 3 × 3 ones with a bias and ReLU (an epilogue), strided, dilated and
// asymmetrically padded ones, a 7 × 7 stem on 3 channels, depthwise
// ones (one and two outputs per channel, 5 × 5 at 7 × 7), a grouped
// one, 1-D and 3-D ones, one whose input is read at stride 2 where the
// kernel ends before the image does; and, not convolutions a library
// may compute, a transposed convolution, one whose padding reads 1,
// one whose channels rotate, one that reads its images in reverse, and
// two whose image index lacks the output's row (a stride of 0) or the
// kernel's row (a dilation of 0).
const convModel = `
op pad_one(x: [N, C, H, W], w: [O, C, 3, 3]) -> [N, O, H, W] =
    lambda n, o, oh, ow: sum(lambda c, kh, kw: (x[n, c, oh + kh - 1, ow + kw - 1] else 1.0) * w[o, c, kh, kw])

op rotated(x: [N, C, H, W], w: [O, C, 3, 3]) -> [N, O, H - 2, W - 2] =
    lambda n, o, oh, ow: sum(lambda c, kh, kw: x[n, (c + o) % C, oh + kh, ow + kw] * w[o, c, kh, kw])

op reversed(x: [N, C, H, W], w: [O, C, 3, 3]) -> [N, O, H - 2, W - 2] =
    lambda n, o, oh, ow: sum(lambda c, kh, kw: x[N - 1 - n, c, oh + kh, ow + kw] * w[o, c, kh, kw])

op no_oh(x: [N, C, H, W], w: [O, C, 3, 3]) -> [N, O, H - 2, W - 2] =
    lambda n, o, oh, ow: sum(lambda c, kh < 3, kw < 3: x[n, c, kh, ow + kw] * w[o, c, kh, kw])

op no_kh(x: [N, C, H, W], w: [O, C, 3, 3]) -> [N, O, H - 2, W - 2] =
    lambda n, o, oh, ow: sum(lambda c, kh < 3, kw < 3: x[n, c, oh, ow + kw] * w[o, c, kh, kw])

op width_bias(x: [N, C, H, W], w: [O, C, 3, 3], b: [W - 2]) -> [N, O, H - 2, W - 2] =
    lambda n, o, oh, ow: sum(lambda c, kh, kw: x[n, c, oh + kh, ow + kw] * w[o, c, kh, kw]) + b[ow]

model convs(img: f32[2, 16, 15, 15], stem: f32[1, 3, 32, 32], w3: f32[24, 16, 3, 3], b24: f32[24], w7: f32[16, 3, 7, 7],
            dw: f32[16, 1, 3, 3], dw2: f32[32, 1, 3, 3], small: f32[1, 64, 7, 7], dw5: f32[64, 1, 5, 5], wg: f32[24, 4, 3, 3],
            seq: f32[2, 16, 80], w1d: f32[8, 16, 5], vol: f32[1, 8, 6, 7, 8], w3d: f32[8, 8, 3, 3, 3], wt: f32[16, 8, 3, 3],
            b13: f32[13]) {
    c3 = relu(conv2d_bias<pads = [1, 1, 1, 1]>(img, w3, b24))
    cs = conv2d<strides = [2, 2], pads = [1, 1, 1, 1]>(img, w3)
    cd = conv2d<dilations = [2, 2], pads = [2, 2, 2, 2]>(img, w3)
    ca = conv2d<pads = [0, 1, 2, 0]>(img, w3)
    cstem = conv2d<strides = [2, 2], pads = [3, 3, 3, 3]>(stem, w7)
    cdw = clip<min = 0.0, max = 6.0>(conv2d<pads = [1, 1, 1, 1], group = 16>(img, dw))
    cdw2 = conv2d<strides = [2, 2], pads = [1, 1, 1, 1], group = 16>(img, dw2)
    cdw5 = conv2d<pads = [2, 2, 2, 2], group = 64>(small, dw5)
    cg = conv2d_bias<pads = [1, 1, 1, 1], group = 4>(img, wg, b24)
    c1d = conv1d<strides = [2], pads = [2, 1]>(seq, w1d)
    c3d = conv3d<pads = [1, 1, 1, 1, 1, 1]>(vol, w3d)
    ctail = conv2d<strides = [2, 2]>(img, w3)
    ct = conv_transpose2d<pads = [1, 1, 1, 1]>(img, wt)
    p1 = pad_one(img, w3)
    rot = rotated(img, w3)
    rev = reversed(img, w3)
    noh = no_oh(img, w3)
    nkh = no_kh(img, w3)
    clo = clip<min = 0.0>(conv2d_bias<strides = [2, 2]>(img, w3, b24))
    chi = clip<max = 0.5>(conv2d<dilations = [2, 2]>(img, w3))
    csig = sigmoid(conv2d<pads = [1, 1, 1, 1]>(img, w3))
    cwb = relu(width_bias(img, w3, b13))
    return c3, cs, cd, ca, cstem, cdw, cdw2, cdw5, cg, c1d, c3d, ctail, ct, p1, rot, rev, noh, nkh, clo, chi, csig, cwb
}
`

// TestConvPlacement: every convolution of convModel that a library can
// compute gets a placement group on the libraries with convolutions
// (oneDNN) and on no other; the others get none. The plan run with the
// generated kernels and with the library matches the interpreter under
// the f32 mode's tolerance.
func TestConvPlacement(t *testing.T) {
	if _, err := hostlib.Open("onednn"); err != nil {
		t.Skip(err)
	}
	g := modelFromSource(t, convModel)
	dir := t.TempDir()
	c, err := codegen.Compile(g, dir, codegen.Options{Emit: []string{"host"}, Tools: tools(t), Precision: precision.F32, Backends: []string{"openblas", "onednn"}})
	if err != nil {
		t.Fatal(err)
	}
	var offered []string
	for _, pg := range c.Plan.Placement {
		offered = append(offered, strings.FieldsFunc(pg.Label, func(r rune) bool { return r == '.' || r == ' ' })[0])
		if !slices.Equal(pg.Candidates, []string{"onednn", plan.Generated}) {
			t.Errorf("%s: candidates %v, want oneDNN's and the generated kernel", pg.Label, pg.Candidates)
		}
	}
	slices.Sort(offered)
	if want := []string{"c1d", "c3", "c3d", "ca", "cd", "cdw", "cdw2", "cdw5", "cg", "chi", "clo", "cs", "csig", "cstem", "ctail", "cwb"}; !slices.Equal(offered, want) {
		t.Errorf("placement groups %v, want %v", offered, want)
	}
	checkPostOps(t, c.Plan)
	for _, variant := range []string{plan.Generated, "onednn"} {
		for i := range c.Plan.Placement {
			c.Plan.Placement[i].Chosen = variant
		}
		matchInterp(t, variant, g, c.Plan, dir, false, func(lang.DType) tensor.Tolerance {
			return rounding.ModelTolerance(precision.F32, 1)
		})
	}
}

// checkPostOps checks which of convModel's convolutions oneDNN's call
// finishes with post-ops (a bias along the channels, then bounds) and
// which leave an epilogue kernel (a sigmoid, a bias along the width).
func checkPostOps(t *testing.T, p *plan.Plan) {
	t.Helper()
	relu := []plan.Activation{{Kind: plan.ActMax, Value: 0}}
	relu6 := []plan.Activation{{Kind: plan.ActMax, Value: 0}, {Kind: plan.ActMin, Value: 6}}
	want := map[string]struct {
		bias bool
		acts []plan.Activation
	}{"c3": {true, relu}, "cdw": {false, relu6}, "cg": {true, nil},
		"clo": {true, relu}, "chi": {false, []plan.Activation{{Kind: plan.ActMin, Value: 0.5}}}} // a clip's open side dropped
	epilogues := map[string]bool{}
	for _, k := range p.Kernels {
		if name, ok := strings.CutSuffix(k.Label, " (epilogue)"); ok {
			epilogues[strings.FieldsFunc(name, func(r rune) bool { return r == '.' || r == ' ' })[0]] = true
		}
	}
	for _, s := range p.Steps[0] {
		if s.Conv == nil {
			continue
		}
		name := strings.FieldsFunc(s.Label, func(r rune) bool { return r == '.' || r == ' ' })[0]
		w, fused := want[name]
		switch post := s.Conv.Post; {
		case fused != (post != nil):
			t.Errorf("%s: post-ops %+v", name, post)
		case fused && (w.bias != (post.Bias != nil) || !slices.Equal(post.Acts, w.acts)):
			t.Errorf("%s: post-ops %+v (bias %v), want bias %v and %v", name, post, post.Bias, w.bias, w.acts)
		}
		if fused && epilogues[name] {
			t.Errorf("%s: an epilogue kernel beside the call's post-ops", name)
		}
	}
	for _, name := range []string{"csig", "cwb"} {
		if !epilogues[name] {
			t.Errorf("%s: no epilogue kernel", name)
		}
	}
}

// TestNoConvolutionOfNoChannels: a convolution-like kernel over an
// image of no channels compiles (it is no convolution a library can
// compute), where it divided by zero.
func TestNoConvolutionOfNoChannels(t *testing.T) {
	g := modelFromSource(t, `
op pconv(x: [N, C, H, W], w: [O, K, 3, 3]) -> [N, O, H, W] =
    lambda n, o, oh, ow: sum(lambda c < K, kh, kw: (x[n, c, oh + kh - 1, ow + kw - 1] else 0) * w[o, c, kh, kw])

model zc(x: f32[2, 0, 12, 12], w: f32[16, 1, 3, 3]) { return pconv(x, w) }
`)
	c, err := codegen.Compile(g, t.TempDir(), codegen.Options{Emit: []string{"host"}, Tools: tools(t), Precision: precision.F32, Backends: []string{"onednn"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Plan.Placement) != 0 {
		t.Errorf("%d placement groups, want none", len(c.Plan.Placement))
	}
}

// TestTruncatedProductsAreNoContraction: a sum of products each
// truncated to an integer is no sum of products (ir.Product looked
// through every cast, and the kernels summed the products whole).
func TestTruncatedProductsAreNoContraction(t *testing.T) {
	g := modelFromSource(t, `
op imm(a: [M, K], b: [K, N]) -> [M, N] = lambda i, j: sum(lambda k: f32(i32(a[i, k] * b[k, j])))
op icv(x: [N, C, H, W], w: [O, C, 3, 3]) -> [N, O, H - 2, W - 2] =
    lambda n, o, oh, ow: sum(lambda c, kh, kw: f32(i32(x[n, c, oh + kh, ow + kw] * w[o, c, kh, kw])))
model m(a: f32[64, 64], b: f32[64, 64], x: f32[2, 8, 12, 12], w: f32[16, 8, 3, 3]) { return imm(a, b), icv(x, w) }
`)
	for _, mode := range []precision.Mode{precision.Exact, precision.F32} {
		dir := t.TempDir()
		c, err := codegen.Compile(g, dir, codegen.Options{Emit: []string{"host"}, Tools: tools(t), Precision: mode, Backends: []string{"onednn"}})
		if err != nil {
			t.Fatal(err)
		}
		matchInterp(t, mode.String(), g, c.Plan, dir, false, func(lang.DType) tensor.Tolerance {
			return rounding.ModelTolerance(mode, 1)
		})
	}
}
