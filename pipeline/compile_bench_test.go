package pipeline_test

import (
	"path/filepath"
	"testing"
	"time"

	"tofuc/internal/shared"
	"tofuc/pipeline"
)

// BenchmarkColdCompile times `tofuc compile` of light-random ResNet-50,
// optimiser on, with an empty compile cache each time (issue 34: at most
// 15 s on two cores; docs/performance.md): loading and importing the
// model, the rewrite search, code generation for every target, the
// parameters and the report.
func BenchmarkColdCompile(b *testing.B) {
	path := filepath.Join(shared.Dir(b), "onnx", "light-random", "light_resnet50_random.onnx")
	start := time.Now()
	for range b.N {
		b.Setenv("TOFUC_CACHE", b.TempDir())
		m, err := pipeline.Load(path, "", nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := pipeline.Compile(m, filepath.Join(b.TempDir(), "out"), pipeline.Options{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(time.Since(start).Seconds()/float64(b.N), "s/compile")
}
