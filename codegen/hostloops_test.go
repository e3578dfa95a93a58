package codegen_test

import (
	"testing"
	"time"

	"tofuc/codegen"
	"tofuc/lang"
	"tofuc/lang/precision"
	"tofuc/runtime/tensor"
)

// hostLoopsModel has three nested reductions of 16 (unrolled at most 16
// copies in all, not 16³), a window of 16 read with a default, and
// element-wise kernels whose innermost extent is 3 and 1 (a flat loop,
// not runs shorter than a vector).
const hostLoopsModel = `
op n3(x: [A, B]) -> [A, B] = lambda a, b: sum(lambda k < 16: sum(lambda l < 16: sum(lambda m < 16: x[a, (b + k + l + m) % B])))
op window(x: [A, B]) -> [A, B] = lambda a, b: max(lambda k < 16: x[a, b + k - 8] else 0.0)
model loops(x: f32[20, 30], y: f32[500, 3], s: f32[500, 3], z: f32[700, 1]) {
    return n3(x), window(x), max(y * s + 1.0, 0.0), relu(z * 2.0)
}
`

// TestHostLoops compiles hostLoopsModel for the host within a minute (the
// nested reductions once took minutes of opt, every level unrolled) and
// compares the cpu runtime with the interpreter.
func TestHostLoops(t *testing.T) {
	tl := tools(t)
	g := modelFromSource(t, hostLoopsModel)
	dir := t.TempDir()
	start := time.Now()
	c, err := codegen.Compile(g, dir, codegen.Options{Emit: []string{"host"}, Tools: tl})
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > time.Minute {
		t.Errorf("compiling took %v", d)
	}
	matchInterp(t, "loops", g, c.Plan, dir, false, func(dt lang.DType) tensor.Tolerance { return tensor.Exact })
}

// mergedRunsModel has element-wise kernels over rows shorter than a
// vector, which the host runs as merged runs of their last variables
// (mergedRuns): a SiLU over 14 × 14 images, a squeeze-and-excitation
// scale read as [N, C, 1, 1], a bias read by channel over 7 × 7
// images (merged with the channels), a transposed read, and an output
// of one row.
const mergedRunsModel = `
op scale(x: [N, C, H, W], s: [N, C, 1, 1]) -> [N, C, H, W] = lambda n, c, h, w: x[n, c, h, w] * s[n, c, 0, 0]
op chanbias(x: [N, C, H, W], b: [C]) -> [N, C, H, W] = lambda n, c, h, w: x[n, c, h, w] + b[c]
op swap(x: [N, C, H, H]) -> [N, C, H, H] = lambda n, c, h, w: x[n, c, h, w] - 2.0 * x[n, c, w, h]
model merged(x: f32[2, 24, 14, 14], s: f32[2, 24, 1, 1], y: f32[3, 40, 7, 7], b: f32[40], r: f32[1, 5]) {
    return mul(x, sigmoid(x)), scale(x, s), chanbias(y, b), swap(x), relu(r)
}
`

// TestMergedRuns compares mergedRunsModel's kernels, in the exact and
// f32 modes, with the interpreter.
func TestMergedRuns(t *testing.T) {
	tl := tools(t)
	g := modelFromSource(t, mergedRunsModel)
	for _, mode := range []precision.Mode{precision.Exact, precision.F32} {
		dir := t.TempDir()
		c, err := codegen.Compile(g, dir, codegen.Options{Emit: []string{"host"}, Tools: tl, Precision: mode})
		if err != nil {
			t.Fatal(err)
		}
		tol := func(dt lang.DType) tensor.Tolerance { return tensor.Exact }
		if mode != precision.Exact {
			tol = func(dt lang.DType) tensor.Tolerance { return tensor.Reordered(dt, 4) }
		}
		matchInterp(t, "merged "+mode.String(), g, c.Plan, dir, false, tol)
	}
}
