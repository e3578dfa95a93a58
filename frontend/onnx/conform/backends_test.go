package conform

import (
	"strings"
	"testing"

	"tofuc/codegen/toolchain"
	"tofuc/pipeline"
)

// TestCompiledBackends runs every ONNX test of ../shared (node tests,
// node-random, the light and light-random models; simt the node tests and
// two CNNs) on the compiled backends: each passes exactly what the interpreter passes (no node
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
	nodes := append(glob(t, "onnx/node/*"), glob(t, "onnx/node-random/*")...)
	all := append(append(glob(t, "onnx/light/*.onnx"), glob(t, "onnx/light-random/*.onnx")...), nodes...)
	// The emulator runs the node tests and the two smallest CNNs: its
	// flavour is compiled apart (minutes of llc for the large CNNs with
	// a cold cache), and the stdlib-wide and partitioned-plan tests of
	// codegen already run large kernels on it.
	emulated := append(glob(t, "onnx/light-random/light_squeezenet_random.onnx"), glob(t, "onnx/light-random/light_inception_v1_random.onnx")...)
	emulated = append(emulated, nodes...)
	for _, name := range []string{"cpu", "simt"} {
		t.Run(name, func(t *testing.T) {
			paths := all
			if name == "simt" {
				paths = emulated
			}
			// The graphs as imported: the verified rewrites have tests of
			// their own against the interpreter (rewrite/search).
			b, err := pipeline.NewBackend(name, nil, pipeline.Options{NoOptimize: true}, 0)
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
