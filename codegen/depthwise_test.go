package codegen_test

import (
	"strings"
	"testing"

	"tofuc/codegen"
	"tofuc/lang"
	"tofuc/lang/precision"
	"tofuc/runtime/tensor"
)

// depthwiseModel has the grouped convolutions of mobile networks:
// depthwise 3 × 3 ones (MobileNet's) at row lengths below, at and above
// a vector, at strides 1 and 2, one 7 × 7 (ConvNeXt's) and one whose
// rows are 3 values (shorter than any vectorised run), each with a bias
// and a clip as a fused epilogue; and a grouped convolution of 4 groups
// of 6 channels (RegNet's), which reads its weights as a depthwise one
// does: an output channel's own row.
const depthwiseModel = `
model dw(x14: f32[2, 24, 14, 14], x7: f32[1, 24, 7, 7], x5: f32[1, 24, 5, 5], x3: f32[1, 24, 3, 19], x21: f32[1, 24, 21, 21],
         w3: f32[24, 1, 3, 3], w7: f32[24, 1, 7, 7], wg: f32[24, 6, 3, 3], b: f32[24]) {
    d14 = clip<min = 0.0, max = 6.0>(conv2d_bias<pads = [1, 1, 1, 1], group = 24>(x14, w3, b))
    d14s = conv2d_bias<strides = [2, 2], pads = [1, 1, 1, 1], group = 24>(x14, w3, b)
    d7 = clip<min = 0.0, max = 6.0>(conv2d_bias<pads = [1, 1, 1, 1], group = 24>(x7, w3, b))
    d5 = conv2d_bias<pads = [1, 1, 1, 1], group = 24>(x5, w3, b)
    d3 = conv2d<pads = [1, 1, 1, 1], group = 24>(x3, w3)
    d21 = conv2d_bias<pads = [3, 3, 3, 3], group = 24>(x21, w7, b)
    g14 = conv2d_bias<pads = [1, 1, 1, 1], group = 4>(x14, wg, b)
    return d14, d14s, d7, d5, d3, d21, g14
}
`

// TestDepthwiseConvolutions: depthwise and grouped convolutions are
// computed element by element (kernel.GEMM describes none of them: a
// batch of single rows), except depthwise ones in the f32 modes, which
// take the planes form, with the interpreter's results.
func TestDepthwiseConvolutions(t *testing.T) {
	g := modelFromSource(t, depthwiseModel)
	inEachMode(t, g, codegen.Options{Tools: tools(t)}, func(t *testing.T, mode precision.Mode, c *codegen.Compiled, dir string) {
		for _, k := range c.Plan.Kernels {
			want := "threads"
			if mode != precision.Exact && !strings.HasPrefix(k.Label, "g14") {
				want = "planes" // depthwise, in an f32 mode
			}
			if k.Form != want {
				t.Errorf("%s: form %s, want %s", k.Label, k.Form, want)
			}
		}
		matchInterp(t, "dw", g, c.Plan, dir, true, func(dt lang.DType) tensor.Tolerance { return tensor.Reordered(dt, 49) })
	})
}

// TestVectorProductsKeepTheirGEMM: batches of one-row products stay
// tiled where the element-wise form could not vectorise them (one
// query's attention scores read the keys D floats apart), and where a
// weight is broadcast over the batch (its batch is the other factor's
// rows), whatever the weight's dtype.
func TestVectorProductsKeepTheirGEMM(t *testing.T) {
	g := modelFromSource(t, `
model vp(q: f32[2, 4, 1, 16], k: f32[2, 4, 30, 16], x: f16[16, 1, 64], w: f16[64, 90], y: f32[16, 1, 64], v: bf16[64, 90]) {
    scores = batch_matmul_nt(q, k)
    h = matmul_broadcast(x, w)
    hb = matmul_broadcast(y, v)
    return scores, h, hb
}
`)
	c, err := codegen.Compile(g, t.TempDir(), codegen.Options{Tools: tools(t), Precision: precision.F32, Emit: []string{"host"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range c.Plan.Kernels {
		if k.Form == "threads" {
			t.Errorf("%s: form %s, want a tiled form", k.Label, k.Form)
		}
	}
}
