package codegen_test

import (
	"debug/elf"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"tofuc/codegen"
	"tofuc/codegen/blocking"
	"tofuc/lang"
	"tofuc/runtime/tensor"
)

// hostGEMMModel has contractions whose columns split into uneven chunks
// on the host (docs/codegen.md, the host GEMM): 196 columns (1, 2, 2
// and 2 panels of 32: B shared by tasks of rows), 784 (four chunks, one
// wider), 3136 (eight), 49 (one chunk, rows split), 5 (less than a
// panel), and a batch of six with two chunks each; the wider ones also
// fuse a batch norm, a residual add and a ReLU into the epilogue, whose
// loop is vectorised. big and wide have a depth of three blocks (the
// last 88 deep, not a whole number of vectors) and A packed by vector
// transposes; big shares B (columns of 2, 3, 2 and 3 panels), wide has
// 250 rows in one task (two blocks of packed A: 240 and 10); tn reads A
// across the depth; few has three strips of rows by 196 columns, which
// sharing B would leave in fewer than four tasks, so it does not; nt
// reads B along the depth (an input gradient's transposed weights), its
// 300 columns nine panels of 32 packed by vector transposes and 12 one
// at a time, its last block of depth 88 deep (not a whole number of
// vectors).
const hostGEMMModel = `
model chunks(a: f32[70, 64], b196: f32[64, 196], b784: f32[64, 784], b3136: f32[16, 3136], w: f32[100, 16], b49: f32[16, 49],
             b5: f32[64, 5], x: f32[6, 9, 20], y: f32[6, 20, 600], res: f32[70, 784],
             s: f32[70, 1], m: f32[70, 1], p: f32[250, 600], q: f32[600, 300], q2: f32[600, 512], r: f32[600, 24], f24: f32[24, 64],
             ant: f32[40, 600], bnt: f32[300, 600]) {
    c196 = matmul(a, b196)
    c784 = relu((matmul(a, b784) - m) * s + res)
    c3136 = relu(matmul(w, b3136))
    c49 = matmul(w, b49)
    c5 = matmul(a, b5)
    bmm = batch_matmul(x, y)
    big = matmul(p, q)
    wide = matmul(p, q2)
    tn = matmul_tn(r, q)
    few = matmul(f24, b196)
    nt = matmul_nt(ant, bnt)
    return c196, c784, c3136, c49, c5, bmm, big, wide, tn, few, nt
}
`

// TestHostGEMMChunks runs contractions whose column chunks differ in
// width on the cpu runtime against the interpreter.
func TestHostGEMMChunks(t *testing.T) {
	tl := tools(t)
	g := modelFromSource(t, hostGEMMModel)
	dir := t.TempDir()
	c, err := codegen.Compile(g, dir, codegen.Options{Emit: []string{"host"}, Tools: tl})
	if err != nil {
		t.Fatal(err)
	}
	contractions, sharing := 0, 0
	for _, k := range c.Plan.Kernels {
		if k.Kind == "contraction" {
			contractions++
			if k.HostPhase > 0 {
				sharing++
			}
			if tasks := k.HostRange - k.HostPhase; strings.HasPrefix(k.Label, "few") && tasks < 4 {
				t.Errorf("%s: %d tasks, want 4 (its column chunks)", k.Label, tasks)
			}
			if strings.HasPrefix(k.Label, "c784") && !strings.Contains(k.Label, "relu") {
				t.Errorf("%s: the epilogue is not fused", k.Label)
			}
		}
	}
	if contractions != 11 {
		t.Fatalf("%d contraction kernels, want 11", contractions)
	}
	if sharing == 0 || sharing == contractions {
		t.Errorf("%d of %d contractions share a packed B: both ways should be covered", sharing, contractions)
	}
	matchInterp(t, "chunks", g, c.Plan, dir, false, func(dt lang.DType) tensor.Tolerance { return tensor.Reordered(dt, 600) })
}

// TestConvEpilogues: a convolution's epilogue runs over its output
// image's columns as one flat run per batch index (the columns are the
// output's last variables), reading a residual at the output's index, a
// broadcast bias and a batch norm; with a batch of two, columns split
// across batch indices and images whose rows are shorter than a vector;
// equal to the interpreter.
func TestConvEpilogues(t *testing.T) {
	tl := tools(t)
	compileMatching(t, tl, "conv epilogues", `model m(x: f32[2, 8, 9, 11], r: f32[2, 16, 9, 11], b: f32[16, 1, 1], s: f32[40], z: f32[3, 40, 7, 7]) {
    w = param f32[16, 8, 3, 3] init he()
    v = param f32[40, 40, 1, 1] init he()
    y = relu(conv2d<pads = [1, 1, 1, 1]>(x, w) + r + b)
    u = batch_norm(conv2d(z, v), s, s, s, s) + z
    return y, u
}`, 360)
}

// TestNarrowGEMM: contractions of one to four columns (a fully
// connected layer at batch 1 to 4) take the narrow kernel on hosts whose
// vectors hold two depth values of a strip (AVX-512): weights packed
// once or not, an odd depth over three blocks, rows not a whole number
// of strips; equal to the interpreter.
func TestNarrowGEMM(t *testing.T) {
	tl := tools(t)
	compileMatching(t, tl, "narrow", `model m(x1: f32[1, 603], x3: f32[3, 603], a: f32[77, 603], b: f32[603, 2]) {
    w = param f32[603, 77] init glorot()
    bias = param f32[77] init zeros()
    y1 = relu(linear(x1, w, bias))
    y3 = linear(x3, w, bias)
    z = matmul(a, b)
    return y1, y3, z
}`, 603)
}

// TestPackKernelsDistinct: the kernels packing two square weights of
// one shape, read along different axes (w1[k, j] for matmul, w2[j, k]
// for mt), are two kernels. Kernels are named by their GPU flavour,
// which is empty for a kernel only the host runs: both once got the
// first one's name, and mt computed with the matmul's packing.
func TestPackKernelsDistinct(t *testing.T) {
	const src = `op mt(x: [M, K], w: [N, K]) -> [M, N] = lambda i, j: sum(lambda k: x[i, k] * w[j, k])
model m(x: f32[64, 64]) {
    w1 = param f32[64, 64] init glorot()
    w2 = param f32[64, 64] init glorot()
    return matmul(x, w1), mt(x, w2)
}`
	c := compileMatching(t, tools(t), "two packings", src, 64)
	packs := 0
	for _, k := range c.Plan.Kernels {
		if k.HostOnly {
			packs++
		}
	}
	if packs != 2 {
		t.Errorf("%d packing kernels, want 2", packs)
	}
}

// TestPackedWeightsShared: contractions that pack the same weight alike
// (an unrolled recurrence's steps, each multiplying by R) share one
// packed copy, packed once; another weight of the same shape, packed by
// the same kernel, gets its own. Equal to the interpreter.
func TestPackedWeightsShared(t *testing.T) {
	const src = `model m(x1: f32[8, 64], x2: f32[8, 64], x3: f32[8, 64]) {
    w = param f32[64, 96] init glorot()
    v = param f32[64, 96] init glorot()
    return matmul(x1, w), relu(matmul(x2, w)), matmul(x3, v)
}`
	c := compileMatching(t, tools(t), "shared packing", src, 64)
	packs, buffers := 0, 0
	for _, steps := range c.Plan.Init {
		for _, st := range steps {
			if strings.HasSuffix(st.Label, "(packed weights)") {
				packs++
			}
		}
	}
	for _, b := range c.Plan.Buffers {
		if strings.HasSuffix(b.Name, " packed") {
			buffers++
		}
	}
	if packs != 2 || buffers != 2 {
		t.Errorf("%d packing launches and %d packed buffers, want 2 of each (w once, v once)", packs, buffers)
	}
}

// TestPackedWeightsPerBatch: a weight that differs along the batch (a
// stack of recurrent cells' R, read w[d, k, j]) is packed once with the
// weights, every batch index's panels, not at every call; as B (its
// columns end the output) whichever side it is written on. Equal to the
// interpreter.
func TestPackedWeightsPerBatch(t *testing.T) {
	_, nr, _ := blocking.HostTile()
	for _, tc := range []struct{ name, src string }{
		{"weight second", `op bmm(x: [D, M, K], w: [D, K, N]) -> [D, M, N] = lambda d, i, j: sum(lambda k: x[d, i, k] * w[d, k, j])
model m(x: f32[3, 20, 70]) {
    w = param f32[3, 70, 50] init glorot()
    return bmm(x, w)
}`},
		{"weight first", `op bmm(w: [D, N, K], x: [D, M, K]) -> [D, M, N] = lambda d, i, j: sum(lambda k: w[d, j, k] * x[d, i, k])
model m(x: f32[3, 60, 70]) {
    w = param f32[3, 50, 70] init glorot()
    return bmm(w, x)
}`},
	} {
		c := compileMatching(t, tools(t), tc.name, tc.src, 70)
		packs := 0
		for _, steps := range c.Plan.Init {
			for _, st := range steps {
				if strings.HasSuffix(st.Label, "(packed weights)") {
					packs++
				}
			}
		}
		var packed []int64
		for _, b := range c.Plan.Buffers {
			if strings.HasSuffix(b.Name, " packed") {
				packed = append(packed, b.Shape[0])
			}
		}
		want := 3 * 70 * blocking.CeilDiv(50, nr) * nr
		if packs != 1 || len(packed) != 1 || packed[0] != want {
			t.Errorf("%s: %d packing launches, packed buffers of %v floats; want 1 of %d", tc.name, packs, packed, want)
		}
	}
}

// TestWeightsPackedAsB: a layer's weights whose columns end the output
// (x · W) are packed once as B, in the panels of NR columns, where the
// other factor fills a strip of rows; beside a single row (batch 1) as A
// for the narrow kernel; a convolution's as A (its output channels come
// before the pixels). Equal to the interpreter.
func TestWeightsPackedAsB(t *testing.T) {
	mr, nr, _ := blocking.HostTile()
	for _, tc := range []struct {
		name, src string
		want      int64
	}{
		{"linear", `model m(x: f32[2, 20, 64]) {
    w = param f32[64, 100] init glorot()
    b = param f32[100] init glorot()
    return linear(x, w, b)
}`, 64 * blocking.CeilDiv(100, nr) * nr},
		{"batch 1", `model m(x: f32[1, 64]) {
    w = param f32[64, 100] init glorot()
    b = param f32[100] init glorot()
    return linear(x, w, b)
}`, blocking.CeilDiv(100, mr) * mr * 64},
		{"convolution", `model m(x: f32[1, 8, 12, 12]) {
    w = param f32[20, 8, 3, 3] init glorot()
    return conv2d(x, w)
}`, blocking.CeilDiv(20, mr) * mr * 72},
	} {
		c := compileMatching(t, tools(t), tc.name, tc.src, 72)
		var packed []int64
		for _, b := range c.Plan.Buffers {
			if strings.HasSuffix(b.Name, " packed") {
				packed = append(packed, b.Shape[0])
			}
		}
		if len(packed) != 1 || packed[0] != tc.want {
			t.Errorf("%s: packed buffers of %v floats, want one of %d", tc.name, packed, tc.want)
		}
	}
}

// TestPackedWeightsNotCopiedPerBatch: a weight broadcast over a batch
// (matmul_broadcast reads it through a local at every batch index,
// naming the batch without depending on it) is packed once, not once per
// batch index; the weights of a chained launch's halves, whose tasks
// pack B themselves a block of rows at a time, stay A. Equal to the
// interpreter.
func TestPackedWeightsNotCopiedPerBatch(t *testing.T) {
	mr, nr, _ := blocking.HostTile()
	for _, tc := range []struct {
		name, src string
		want      []int64
	}{
		{"broadcast", `model m(x: f32[16, 20, 64], y: f32[16, 1, 64]) {
    w = param f32[64, 90] init glorot()
    return matmul_broadcast(x, w)
}`, []int64{64 * blocking.CeilDiv(90, nr) * nr}},
		{"chained", chainedMLP, []int64{blocking.CeilDiv(200, mr) * mr * 40, blocking.CeilDiv(300, mr) * mr * 200}},
	} {
		c := compileMatching(t, tools(t), tc.name, tc.src, 200)
		var packed []int64
		for _, b := range c.Plan.Buffers {
			if strings.HasSuffix(b.Name, " packed") {
				packed = append(packed, b.Shape[0])
			}
		}
		slices.Sort(packed)
		if !slices.Equal(packed, tc.want) {
			t.Errorf("%s: packed buffers of %v floats, want %v", tc.name, packed, tc.want)
		}
	}
}

// TestVectorProductsElementwise: a batch of vector products is computed
// element by element (the threads form) where its sums are short (a
// depthwise 3 × 3 convolution) or its batch is wide (grouped and 9 × 9
// depthwise convolutions, whose channels are the batch), and as packed
// products where a few long sums (a stack of two cells' state times R at
// batch 1) would stream their weights.
func TestVectorProductsElementwise(t *testing.T) {
	for _, tc := range []struct{ name, src, form string }{
		{"depthwise 3 × 3", `model m(x: f32[1, 32, 14, 14]) {
    w = param f32[32, 1, 3, 3] init glorot()
    return conv2d<group = 32>(x, w)
}`, "threads"},
		{"depthwise 9 × 9", `model m(x: f32[1, 32, 14, 14]) {
    w = param f32[32, 1, 9, 9] init glorot()
    return conv2d<group = 32, pads = [4, 4, 4, 4]>(x, w)
}`, "threads"},
		{"grouped", `model m(x: f32[1, 24, 10, 10]) {
    w = param f32[24, 8, 3, 3] init glorot()
    return conv2d<group = 3>(x, w)
}`, "threads"},
		{"stacked cells", `op bmv(h: [D, K], r: [D, K, N]) -> [D, N] = lambda d, j: sum(lambda k: h[d, k] * r[d, k, j])
model m(h: f32[2, 128]) {
    r = param f32[2, 128, 512] init glorot()
    return bmv(h, r)
}`, "tiled"},
	} {
		c := compileMatching(t, tools(t), tc.name, tc.src, 128)
		var forms []string
		for _, k := range c.Plan.Kernels {
			if !k.HostOnly {
				forms = append(forms, k.Form)
			}
		}
		if len(forms) != 1 || forms[0] != tc.form {
			t.Errorf("%s: forms %v, want %s", tc.name, forms, tc.form)
		}
	}
}

// TestEmptyDepthGEMM: a contraction over an empty depth runs no block
// of the micro-kernel, so its tasks zero their sums (f32, as for every
// depth of one block) before the epilogue; equal to the interpreter.
func TestEmptyDepthGEMM(t *testing.T) {
	tl := tools(t)
	compileMatching(t, tl, "empty depth", `model m(a: f32[40, 0], b: f32[0, 50]) {
    c = matmul(a, b) + 1.0
    return c
}`, 1)
}

// TestGEMMBlockSums: a depth of four blocks, whose block sums the host
// adds in f32, and one of five, which it adds in double (the sums' type,
// docs/codegen.md), each ending in a block of one value (shorter than
// the tile's rows, which the micro-kernel's last values fetch): the
// compiled library holds the micro-kernels of that type only, and both
// equal the interpreter within the reordered tolerance of their depth.
func TestGEMMBlockSums(t *testing.T) {
	tl := tools(t)
	for _, tc := range []struct {
		depth      int
		sum, other string
	}{{769, "float", "double"}, {1025, "double", "float"}} {
		c := compileMatching(t, tl, fmt.Sprintf("depth %d", tc.depth), fmt.Sprintf(`model m(a: f32[24, %d], b: f32[%d, 80], c: f32[80]) {
    y = matmul(a, b) + c
    return y
}`, tc.depth, tc.depth), tc.depth)
		micro := microKernels(t, c.Dir)
		if !micro[tc.sum] || micro[tc.other] {
			t.Errorf("depth %d: micro-kernels by sum type %v, want %s only", tc.depth, micro, tc.sum)
		}
	}
}

// microKernels reports the sum types of the GEMM micro-kernels in the
// host libraries under dir (their symbols tofuc.gemm.microMRxNR.TYPE).
func microKernels(t *testing.T, dir string) map[string]bool {
	t.Helper()
	libs, err := filepath.Glob(filepath.Join(dir, "*.so"))
	if err != nil || len(libs) == 0 {
		t.Fatalf("no host library in %s", dir)
	}
	types := map[string]bool{}
	for _, lib := range libs {
		f, err := elf.Open(lib)
		if err != nil {
			t.Fatal(err)
		}
		syms, err := f.Symbols()
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range syms {
			if rest, ok := strings.CutPrefix(s.Name, "tofuc.gemm.micro"); ok {
				parts := strings.Split(rest, ".")
				types[parts[1]] = true
			}
		}
	}
	return types
}

// TestElementGrainByWork: a kernel of a few operations an element keeps
// the host grain of 4,096 elements (one thread for an addition of 4,096),
// kernels of exponentials a grain small enough that two threads share
// 4,096 elements; equal to the interpreter.
func TestElementGrainByWork(t *testing.T) {
	const src = `model m(x: f32[16, 256]) {
    return add(x, x), tanh(sigmoid(x) * tanh(x) + sigmoid(tanh(x)))
}`
	c := compileMatching(t, tools(t), "grains", src, 1)
	grains := map[string]int64{}
	for _, k := range c.Plan.Kernels {
		grains[k.Label] = k.HostGrain
	}
	for label, g := range grains {
		plain := label == "add (add)"
		if plain && g != 4096 || !plain && (g <= 0 || g > 2048) {
			t.Errorf("host grains %v: want 4096 for the addition, at most 2048 for the exponentials", grains)
			break
		}
	}
}

// TestSmallContractionOneThread: a contraction of under 128 kFLOP (a GRU
// step at batch 1) is one piece of work, its tasks all in one grain; a
// larger one splits its tasks among the threads. Equal to the
// interpreter.
func TestSmallContractionOneThread(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		one       bool
	}{
		{"small", `model m(h: f32[1, 64]) {
    r = param f32[64, 192] init glorot()
    return matmul(h, r)
}`, true},
		{"large", `model m(h: f32[16, 256]) {
    r = param f32[256, 512] init glorot()
    return matmul(h, r)
}`, false},
	} {
		c := compileMatching(t, tools(t), tc.name, tc.src, 256)
		for _, k := range c.Plan.Kernels {
			if k.HostOnly || k.Form != "tiled" {
				continue
			}
			if one := k.HostGrain >= k.HostRange; one != tc.one || k.HostRange < 2 {
				t.Errorf("%s: host range %d, grain %d; want one grain %v", tc.name, k.HostRange, k.HostGrain, tc.one)
			}
		}
	}
}
