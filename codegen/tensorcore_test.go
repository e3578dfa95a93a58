package codegen_test

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tofuc/analysis/rounding"
	"tofuc/codegen"
	"tofuc/internal/examplegraph"
	"tofuc/lang"
	"tofuc/lang/precision"
	"tofuc/runtime/exec"
	"tofuc/runtime/executor"
	"tofuc/runtime/plan"
	"tofuc/runtime/simt"
	"tofuc/runtime/tensor"
)

// TestTiledArithmetic runs contractions' tiled kernels on the SIMT
// emulator in the f32 mode and in each tensor-core mode and checks their
// results bit for bit against the arithmetic the forms document
// (docs/codegen.md): in f32 one fused multiply-add a product, in depth
// order; on tensor cores, per product depth (8 in TF32, 16 in BF16 and
// F16), the factors rounded to the mode's format, their products
// summed exactly in depth order in double and added to the f32 sum, the
// total rounded once to f32 (the emulator's model of a tensor core).
// A stage copied before its wait, a wrong ldmatrix lane, a lost product
// or a narrower accumulator changes some result. The factors span
// twelve binary orders of magnitude, so that every rounding matters. A
// matmul (depth 200, no multiple of a stage's) and two contractions
// whose factors lie the other way (A contiguous along its rows, B along
// the depth), one at odd sizes (rows of the factors off 16-byte
// boundaries: 16-byte copies fall back to 4-byte ones as they run), one
// at even ones.
func TestTiledArithmetic(t *testing.T) {
	tl := tools(t)
	r := rand.New(rand.NewPCG(3, 4))
	type factors struct {
		a, b func(in map[string]*tensor.Tensor, i, d int) float64 // A[i, d], B[d, j] (j as i)
	}
	straight := factors{
		a: func(in map[string]*tensor.Tensor, i, d int) float64 { return in["a"].At(i, d) },
		b: func(in map[string]*tensor.Tensor, j, d int) float64 { return in["b"].At(d, j) },
	}
	turned := factors{
		a: func(in map[string]*tensor.Tensor, i, d int) float64 { return in["a"].At(d, i) },
		b: func(in map[string]*tensor.Tensor, j, d int) float64 { return in["b"].At(j, d) },
	}
	const turnedOp = "op mm_t(a: [K, M], b: [N, K]) -> [M, N] = lambda m, n: sum(lambda k: a[k, m] * b[n, k])\n"
	for _, tc := range []struct {
		name    string
		src     string
		m, n, k int
		f       factors
		shapes  [2][]int
	}{
		{"matmul", "model mm(a: f32[70, 200], b: f32[200, 60]) {\n    return matmul(a, b)\n}\n", 70, 60, 200, straight, [2][]int{{70, 200}, {200, 60}}},
		{"turned-odd", turnedOp + "model mm(a: f32[83, 37], b: f32[45, 83]) {\n    return mm_t(a, b)\n}\n", 37, 45, 83, turned, [2][]int{{83, 37}, {45, 83}}},
		{"turned", turnedOp + "model mm(a: f32[96, 64], b: f32[48, 96]) {\n    return mm_t(a, b)\n}\n", 64, 48, 96, turned, [2][]int{{96, 64}, {48, 96}}},
	} {
		g := modelFromSource(t, tc.src)
		in := map[string]*tensor.Tensor{"a": tensor.New(lang.F32, tc.shapes[0]), "b": tensor.New(lang.F32, tc.shapes[1])}
		for _, x := range []*tensor.Tensor{in["a"], in["b"]} {
			for i := range x.Len() {
				x.SetFlat(i, float64(float32((2*r.Float64()-1)*math.Ldexp(1, r.IntN(12)-6))))
			}
		}
		for _, mode := range []struct {
			p     precision.Mode
			form  string
			round func(float64) float64 // a factor's rounding
			ptx   []string              // instructions the kernel must have
		}{
			{precision.F32, "tiled", nil, []string{"cp.async.wait_group", "cp.async.cg.shared.global"}},
			{precision.TF32, "tiled-tf32", roundTF32, []string{"cp.async.wait_group", "cp.async.cg.shared.global", "ldmatrix", "mma.sync"}},
			{precision.BF16, "tiled-bf16", lang.BF16.RoundFloat, []string{"ldmatrix", "mma.sync"}},
			{precision.F16, "tiled-f16", lang.F16.RoundFloat, []string{"ldmatrix", "mma.sync"}},
		} {
			t.Run(tc.name+"-"+mode.p.String(), func(t *testing.T) {
				dir := t.TempDir()
				c, err := codegen.Compile(g, dir, codegen.Options{Emit: []string{"ptx", "simt"}, Tools: tl, Precision: mode.p})
				if err != nil {
					t.Fatal(err)
				}
				if k := c.Plan.Kernels; len(k) != 1 || k[0].Form != mode.form {
					t.Fatalf("kernels %+v, want one of the %s form", k, mode.form)
				}
				ptx := modulesText(t, dir, "ptx")
				for _, ins := range append(mode.ptx, fmt.Sprintf(".maxntid %d, 1, 1", c.Plan.Kernels[0].Block)) {
					if !strings.Contains(ptx, ins) {
						t.Errorf("the kernel has no %s", ins)
					}
				}
				out := runSimt(t, c.Plan, dir, in)
				var got *tensor.Tensor
				for _, v := range out {
					got = v
				}
				a := func(i, d int) float64 { return tc.f.a(in, i, d) }
				b := func(j, d int) float64 { return tc.f.b(in, j, d) }
				if err := tensor.Compare(got, tiledProduct(a, b, tc.m, tc.n, tc.k, mode.p, mode.round), tensor.Exact); err != nil {
					t.Error(err)
				}
			})
		}
	}
}

// tiledProduct is the m × n product of A (a(i, d)) and B (b(j, d)), depth
// k, as the tiled forms compute it in mode p (f32, or a tensor-core mode
// with its factors' rounding round).
func tiledProduct(a, b func(i, d int) float64, m, n, k int, p precision.Mode, round func(float64) float64) *tensor.Tensor {
	out := tensor.New(lang.F32, []int{m, n})
	step := 8
	if p != precision.TF32 {
		step = 16
	}
	for i := range m {
		for j := range n {
			acc := float32(0)
			if round == nil {
				for d := range k {
					acc = fma32(float32(a(i, d)), float32(b(j, d)), acc)
				}
			} else {
				for d0 := 0; d0 < k; d0 += step {
					sum := 0.0
					for d := d0; d < min(d0+step, k); d++ {
						sum += round(a(i, d)) * round(b(j, d))
					}
					acc = float32(sum + float64(acc))
				}
			}
			out.SetFlat(i*n+j, float64(acc))
		}
	}
	return out
}

// fma32 is x·y + z rounded once to f32.
func fma32(x, y, z float32) float32 {
	exact := new(big.Float).SetPrec(200).SetFloat64(float64(x))
	exact.Mul(exact, new(big.Float).SetFloat64(float64(y)))
	exact.Add(exact, new(big.Float).SetFloat64(float64(z)))
	f, _ := exact.Float32()
	return f
}

// roundTF32 is cvt.rna.tf32.f32: 10 bits of fraction, to nearest, ties
// away from zero (finite x).
func roundTF32(x float64) float64 {
	return float64(math.Float32frombits((math.Float32bits(float32(x)) + 0x1000) &^ 0x1fff))
}

// modulesText is the text of every kernels/*.ext file of a plan's folder.
func modulesText(t *testing.T, dir, ext string) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "kernels", "*."+ext))
	if err != nil || len(files) == 0 {
		t.Fatalf("no kernels/*.%s in %s (%v)", ext, dir, err)
	}
	var b strings.Builder
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(text)
	}
	return b.String()
}

// TestModelToleranceDepth: a deep contraction of unit-normal factors on
// tensor cores (depth 1024) errs by about √1024 units of the factors'
// format, beyond a whole-model tolerance fixed per element, and within
// the policy's (rounding.ModelTolerance), whose part relative to the
// output's root mean square grows with the depth as the error does.
func TestModelToleranceDepth(t *testing.T) {
	tl := tools(t)
	g := modelFromSource(t, `
model deep(a: f32[64, 1024], b: f32[1024, 64]) {
    return matmul(a, b)
}
`)
	r := rand.New(rand.NewPCG(5, 6))
	in := map[string]*tensor.Tensor{"a": tensor.New(lang.F32, []int{64, 1024}), "b": tensor.New(lang.F32, []int{1024, 64})}
	for _, x := range in {
		for i := range x.Len() {
			x.SetFlat(i, float64(float32(r.NormFloat64())))
		}
	}
	want, err := exec.Run(g, exec.Interp{}, in, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []precision.Mode{precision.TF32, precision.BF16, precision.F16} {
		dir := t.TempDir()
		c, err := codegen.Compile(g, dir, codegen.Options{Emit: []string{"simt"}, Tools: tl, Precision: p})
		if err != nil {
			t.Fatal(err)
		}
		got := runSimt(t, c.Plan, dir, in)
		for name, w := range want.Outputs {
			if err := rounding.CompareModel(p, 1, got[name], w); err != nil {
				t.Errorf("%s: %v", p, err)
			}
			fixed := rounding.ModelTolerance(p, 1)
			fixed.RMS = 0
			if tensor.Compare(got[name], w, fixed) == nil {
				t.Errorf("%s: within a tolerance fixed per element: the test no longer needs the part relative to the spread", p)
			}
		}
	}
}

// TestF16Overflow: in the f16 mode a factor that f16 would make
// infinite (65520 and above) stops the run with an error naming its
// value, where the products would silently be infinite; 65519, which
// rounds to f16's largest value, does not.
func TestF16Overflow(t *testing.T) {
	tl := tools(t)
	g := modelFromSource(t, `
model mm(a: f32[20, 40], b: f32[40, 24]) {
    return matmul(a, b)
}
`)
	dir := t.TempDir()
	c, err := codegen.Compile(g, dir, codegen.Options{Emit: []string{"simt"}, Tools: tl, Precision: precision.F16})
	if err != nil {
		t.Fatal(err)
	}
	sp, err := executor.Open(c.Plan, dir, simt.Kind.Name, executor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	for _, tc := range []struct {
		big     float64
		refused bool
	}{{65519, false}, {65520, true}, {-1e6, true}, {math.Inf(1), false}} {
		in := examplegraph.RandomInputs(g, 1)
		in["b"].SetFlat(17, tc.big)
		_, err := sp.Run(in, nil)
		switch {
		case tc.refused && (err == nil || !strings.Contains(err.Error(), "beyond f16's range") || !strings.Contains(err.Error(), fmt.Sprint(float32(tc.big)))):
			t.Errorf("a factor %g: %v, want an error naming it beyond f16's range", tc.big, err)
		case !tc.refused && err != nil:
			t.Errorf("a factor %g: %v", tc.big, err)
		}
	}
}

// TestStageShared: a tiled kernel's shared memory per mode
// (docs/codegen.md): stages of doubles, one buffer, in exact; of f32,
// copied asynchronously four buffers deep where they fit in 80 KB, in
// f32 and tf32 (tf32's side-major rows padded to 20 values), dynamic
// above 48 KB; of 16-bit values, one buffer, in bf16. A 128 × 128 tile
// (matmul 4096³) and a 64 × 64 one (256 × 256).
func TestStageShared(t *testing.T) {
	for _, tc := range []struct {
		n       int
		p       precision.Mode
		shared  int64
		dynamic bool
	}{
		{4096, precision.Exact, 8 * 16 * (128 + 2 + 128 + 2), false},
		{4096, precision.F32, 4 * 4 * 16 * (128 + 4 + 128 + 4), true},
		{4096, precision.TF32, 4 * 4 * (128 + 128) * (16 + 4), true},
		{4096, precision.BF16, 2 * (128 + 128) * (16 + 8), false},
		{256, precision.F32, 4 * 4 * 16 * (64 + 4 + 64 + 4), false},
		{256, precision.TF32, 4 * 4 * (64 + 64) * (16 + 4), false},
	} {
		g := modelFromSource(t, fmt.Sprintf("model mm(a: f32[%[1]d, %[1]d], b: f32[%[1]d, %[1]d]) {\n    return matmul(a, b)\n}\n", tc.n))
		c, err := codegen.Compile(g, t.TempDir(), codegen.Options{Emit: []string{"llvm"}, Tools: tools(t), Precision: tc.p})
		if err != nil {
			t.Fatal(err)
		}
		if k := c.Plan.Kernels; len(k) != 1 || k[0].Shared != tc.shared || k[0].DynamicShared != tc.dynamic {
			t.Errorf("matmul %d³ in %s: kernels %+v, want one with %d bytes of shared memory, dynamic %v", tc.n, tc.p, k, tc.shared, tc.dynamic)
		}
	}
}

// TestStored16BitFactors: a contraction of a model's f16 (bf16)
// tensors runs on tensor cores in the f16 (bf16) format in every mode
// that computes in f32, the other 16-bit mode's included, the factors
// taken exactly, and its result is the documented arithmetic's
// (TestTiledArithmetic) rounded to the output's format; the exact mode
// keeps the tiled form. The bf16 factors reach 2²⁰, beyond f16's range.
func TestStored16BitFactors(t *testing.T) {
	tl := tools(t)
	for _, dt := range []lang.DType{lang.F16, lang.BF16} {
		g := modelFromSource(t, fmt.Sprintf("model mm(a: %[1]s[70, 200], b: %[1]s[200, 60]) {\n    return matmul(a, b)\n}\n", dt))
		r := rand.New(rand.NewPCG(7, 8))
		in := map[string]*tensor.Tensor{"a": tensor.New(dt, []int{70, 200}), "b": tensor.New(dt, []int{200, 60})}
		for _, x := range in {
			for i := range x.Len() {
				x.SetFlat(i, dt.RoundFloat((2*r.Float64()-1)*math.Ldexp(1, r.IntN(6)-3)))
			}
			if dt == lang.BF16 {
				x.SetFlat(5, 0x1p20)
			}
		}
		exact := func(x float64) float64 { return x }
		a := func(i, d int) float64 { return in["a"].At(i, d) }
		b := func(j, d int) float64 { return in["b"].At(d, j) }
		sum := tiledProduct(a, b, 70, 60, 200, precision.F16, exact) // 16 deep a product in both formats
		want := tensor.New(dt, sum.Shape)
		for i := range want.Len() {
			want.SetFlat(i, dt.RoundFloat(sum.Flat(i)))
		}
		for _, p := range []precision.Mode{precision.Exact, precision.F32, precision.TF32, precision.BF16, precision.F16} {
			dir := t.TempDir()
			c, err := codegen.Compile(g, dir, codegen.Options{Emit: []string{"simt"}, Tools: tl, Precision: p})
			if err != nil {
				t.Fatal(err)
			}
			form := "tiled-" + strings.ToLower(dt.String())
			if p == precision.Exact {
				form = "tiled"
			}
			if k := c.Plan.Kernels; len(k) != 1 || k[0].Form != form {
				t.Fatalf("%s in %s: kernels %+v, want one of the %s form", dt, p, k, form)
			}
			if p == precision.Exact {
				continue
			}
			out := runSimt(t, c.Plan, dir, in)
			for _, got := range out {
				if err := tensor.Compare(got, want, tensor.Exact); err != nil {
					t.Errorf("%s in %s: %v", dt, p, err)
				}
			}
		}
	}
}

// TestTiledLargeTiles (TOFUC_LONG=1: about two minutes): 128 × 128
// tiles, whose four asynchronous stages take more than 48 KB of shared
// memory, dynamic, compute the documented arithmetic
// bit for bit on the emulator (TestTiledArithmetic); a batch of 128
// products of 128 × 128 results, depth 48 (three stages).
func TestTiledLargeTiles(t *testing.T) {
	if os.Getenv("TOFUC_LONG") == "" {
		t.Skip("TOFUC_LONG is not set")
	}
	tl := tools(t)
	const batch, m, n, k = 128, 128, 128, 48
	g := modelFromSource(t, fmt.Sprintf("model bmm(a: f32[%[1]d, %[2]d, %[4]d], b: f32[%[1]d, %[4]d, %[3]d]) {\n    return batch_matmul(a, b)\n}\n", batch, m, n, k))
	r := rand.New(rand.NewPCG(9, 10))
	in := map[string]*tensor.Tensor{"a": tensor.New(lang.F32, []int{batch, m, k}), "b": tensor.New(lang.F32, []int{batch, k, n})}
	for _, x := range []*tensor.Tensor{in["a"], in["b"]} {
		for i := range x.Len() {
			x.SetFlat(i, float64(float32((2*r.Float64()-1)*math.Ldexp(1, r.IntN(12)-6))))
		}
	}
	for _, mode := range []struct {
		p     precision.Mode
		round func(float64) float64
	}{{precision.F32, nil}, {precision.TF32, roundTF32}} {
		dir := t.TempDir()
		c, err := codegen.Compile(g, dir, codegen.Options{Emit: []string{"simt"}, Tools: tl, Precision: mode.p})
		if err != nil {
			t.Fatal(err)
		}
		if k := c.Plan.Kernels; len(k) != 1 || !k[0].DynamicShared || k[0].Shared <= 48<<10 {
			t.Fatalf("%s: kernels %+v, want one with more than 48 KB of dynamic shared memory", mode.p, k)
		}
		out := runSimt(t, c.Plan, dir, in)
		for _, got := range out {
			for z := range batch {
				a := func(i, d int) float64 { return in["a"].At(z, i, d) }
				b := func(j, d int) float64 { return in["b"].At(z, d, j) }
				want := tiledProduct(a, b, m, n, k, mode.p, mode.round)
				part := tensor.New(lang.F32, []int{m, n})
				for i := range part.Len() {
					part.SetFlat(i, got.Flat(z*m*n+i))
				}
				if err := tensor.Compare(part, want, tensor.Exact); err != nil {
					t.Fatalf("%s, batch %d: %v", mode.p, z, err)
				}
			}
		}
	}
}

// TestContractionDepth: the whole-model tolerance's depth counts the
// contractions on the longest path (a matmul after a matmul, beside
// one, then an operator whose locals chain two: four), not the
// element-wise operators or a reduction that is no contraction.
func TestContractionDepth(t *testing.T) {
	g := modelFromSource(t, `
op chain2(a: [M, K], b: [K, K]) -> [M, K] =
    let h: [M, K] = lambda m, n: sum(lambda k: a[m, k] * b[k, n]) in
    lambda m, n: sum(lambda k: h[m, k] * b[k, n])
model m(x: f32[4, 8], w1: f32[8, 8], w2: f32[8, 8], w3: f32[8, 8]) {
    y = matmul(relu(matmul(x, w1)), w2)
    return chain2(softmax(y + matmul(x, w3) + reduce_sum<axes = [1], keepdims = true>(x)), w3)
}
`)
	if d := rounding.ContractionDepth(g); d != 4 {
		t.Errorf("depth %d, want 4", d)
	}
}

// runSimt runs a compiled plan once on the SIMT emulator, failing the
// test on an error.
func runSimt(t *testing.T, p *plan.Plan, dir string, in map[string]*tensor.Tensor) map[string]*tensor.Tensor {
	t.Helper()
	sp, err := executor.Open(p, dir, simt.Kind.Name, executor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	out, err := sp.Run(in, nil)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
