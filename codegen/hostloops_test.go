package codegen_test

import (
	"testing"
	"time"

	"tofuc/codegen"
	"tofuc/lang"
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
