package parser

import (
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkParseStdlib parses every standard-library file once per
// iteration; docs/performance.md records the figure.
func BenchmarkParseStdlib(b *testing.B) {
	files, _ := filepath.Glob("../stdlib/*.tdl")
	srcs := make([][]byte, len(files))
	n := 0
	for i, f := range files {
		srcs[i], _ = os.ReadFile(f)
		n += len(srcs[i])
	}
	b.SetBytes(int64(n))
	for range b.N {
		for i, src := range srcs {
			if _, err := Parse(files[i], src); err != nil {
				b.Fatal(err)
			}
		}
	}
}
