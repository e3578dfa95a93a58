package codegen_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"tofuc/codegen"
	"tofuc/lang"
	"tofuc/lang/precision"
	"tofuc/runtime/tensor"
)

// depthwiseCase is one random depthwise convolution of
// TestPlanesForm: its TDL lines and the form it should take in f32.
type depthwiseCase struct {
	inputs, body string
	planes       bool
}

// randomDepthwise draws depthwise convolution i: image sizes from 1 to
// 33 (rows shorter and longer than a vector), kernels from 1 × 1 to
// 7 × 7 and uneven ones, strides 1 to 3 along each axis, dilations,
// asymmetric pads (some wider than the kernel reads), one or two
// outputs per channel, a batch of one or two, and an epilogue: none, a
// bias and a clip, or a residual.
func randomDepthwise(r *rand.Rand, i int) depthwiseCase {
	n, c, mult := 1+r.IntN(2), 1+r.IntN(9), 1+r.IntN(2)
	h, w := 1+r.IntN(33), 1+r.IntN(33)
	kh, kw := 1+r.IntN(4)*2, 1+r.IntN(4)*2
	if r.IntN(4) == 0 {
		kh, kw = 3, 1
	}
	sh, sw, dh, dw := 1+r.IntN(2), 1+r.IntN(2), 1+r.IntN(2), 1+r.IntN(2)
	if r.IntN(8) == 0 {
		sw = 3 // not the planes form's: a strided read it does not make
	}
	pads := []int{r.IntN(kh), r.IntN(kw), r.IntN(kh + 1), r.IntN(kw)}
	if dh*(kh-1)+1 > h+pads[0]+pads[2] {
		pads[2] = dh*(kh-1) + 1 - h - pads[0]
	}
	if dw*(kw-1)+1 > w+pads[1]+pads[3] {
		pads[3] = dw*(kw-1) + 1 - w - pads[1]
	}
	x, wt, b := fmt.Sprintf("x%d", i), fmt.Sprintf("w%d", i), fmt.Sprintf("b%d", i)
	in := fmt.Sprintf("%s: f32[%d, %d, %d, %d], %s: f32[%d, 1, %d, %d], %s: f32[%d]", x, n, c, h, w, wt, c*mult, kh, kw, b, c*mult)
	conv := fmt.Sprintf("conv2d_bias<strides = [%d, %d], pads = [%d, %d, %d, %d], dilations = [%d, %d], group = %d>(%s, %s, %s)",
		sh, sw, pads[0], pads[1], pads[2], pads[3], dh, dw, c, x, wt, b)
	switch r.IntN(3) {
	case 1:
		conv = fmt.Sprintf("clip<min = 0.0, max = 6.0>(%s)", conv)
	case 2:
		if mult == 1 && sh == 1 && sw == 1 && pads[0]+pads[2] == dh*(kh-1) && pads[1]+pads[3] == dw*(kw-1) {
			conv = fmt.Sprintf("add(%s, %s)", conv, x) // the output's shape is x's
		}
	}
	return depthwiseCase{inputs: in, body: fmt.Sprintf("    y%d = %s\n", i, conv), planes: sw <= 2}
}

// TestPlanesForm: depthwise convolutions of random geometry take the
// planes form in the f32 modes (the threads form in the exact mode and
// where the column stride is 3) and give the interpreter's results, on
// the host and the SIMT emulator (the threads form's code).
func TestPlanesForm(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 30))
	const count = 40
	var ins, body, outs []string
	want := map[string]bool{}
	for i := range count {
		c := randomDepthwise(r, i)
		ins, body, outs = append(ins, c.inputs), append(body, c.body), append(outs, fmt.Sprintf("y%d", i))
		want[fmt.Sprintf("y%d", i)] = c.planes
	}
	src := fmt.Sprintf("model dws(%s) {\n%s    return %s\n}\n", strings.Join(ins, ", "), strings.Join(body, ""), strings.Join(outs, ", "))
	g := modelFromSource(t, src)
	inEachMode(t, g, codegen.Options{Tools: tools(t), Emit: []string{"host", "simt"}, Backends: []string{"none"}}, func(t *testing.T, mode precision.Mode, c *codegen.Compiled, dir string) {
		planes := 0
		for _, k := range c.Plan.Kernels {
			out := strings.SplitN(k.Label, " ", 2)[0]
			out = strings.SplitN(out, ".", 2)[0]
			wantPlanes := mode != precision.Exact && want[out]
			if got := k.Form == "planes"; got != wantPlanes {
				t.Errorf("%s: form %s, want planes %v", k.Label, k.Form, wantPlanes)
			}
			if k.Form == "planes" {
				planes++
			}
		}
		if mode != precision.Exact && planes < count/2 {
			t.Errorf("%d kernels of the planes form, want at least %d", planes, count/2)
		}
		matchInterp(t, "dws", g, c.Plan, dir, true, func(dt lang.DType) tensor.Tolerance { return tensor.Reordered(dt, 49) })
	})
}
