package conform

import (
	"strings"
	"testing"

	"tofuc/codegen/backend"
	"tofuc/codegen/toolchain"
)

// TestCompiledBackends runs every ONNX test of ../shared (node tests,
// node-random, the light and light-random models; simt all but light) on
// the compiled backends: each passes exactly what the interpreter passes (no node
// test fails, the unsupported ones are refused at import, and the light
// models fail only as documented). `tofuc onnx-test --backend cpu|simt`
// runs the same.
func TestCompiledBackends(t *testing.T) {
	if _, err := toolchain.Find(); err != nil {
		t.Skip(err)
	}
	if testing.Short() {
		t.Skip("compiling every ONNX test takes minutes")
	}
	paths := glob(t, "onnx/node/*")
	paths = append(paths, glob(t, "onnx/node-random/*")...)
	paths = append(paths, glob(t, "onnx/light-random/*.onnx")...)
	// The light models are the light-random ones with trained weights:
	// the same kernels, so the emulator (minutes per model) skips them.
	withLight := append(glob(t, "onnx/light/*.onnx"), paths...)
	for _, name := range []string{"cpu", "simt"} {
		t.Run(name, func(t *testing.T) {
			paths := paths
			if name == "cpu" {
				paths = withLight
			}
			b, err := backend.ByName(name, 0)
			if err != nil {
				t.Fatal(err)
			}
			passed := 0
			for _, o := range runOn(t, paths, b) {
				want, known := knownLightFailures[o.Name]
				switch {
				case o.Status == Pass:
					passed++
				case known && o.Status == Fail && strings.Contains(o.Detail, want):
				case o.Status == Unsupported && !strings.HasPrefix(o.Name, "light"):
				default:
					t.Error(o.Line())
				}
			}
			t.Logf("%s: %d of %d tests pass", name, passed, len(paths))
		})
	}
}
