package parser

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tofuc/lang"
)

// seedFiles returns the standard library and the examples, read from the
// repository, as fuzzing seeds (testdata/fuzz/FuzzParse holds snippets and
// regressions).
func seedFiles(tb testing.TB) map[string][]byte {
	out := map[string][]byte{}
	for _, pat := range []string{"../stdlib/*.tdl", "../examples/*.tdl"} {
		paths, _ := filepath.Glob(pat)
		for _, p := range paths {
			src, err := os.ReadFile(p)
			if err != nil {
				tb.Fatal(err)
			}
			out[p] = src
		}
	}
	return out
}

func FuzzParse(f *testing.F) {
	for _, src := range seedFiles(f) {
		f.Add(src)
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		file, err := Parse("fuzz.tdl", src)
		if err != nil {
			errs, ok := err.(lang.ErrorList)
			if !ok || len(errs) == 0 {
				t.Fatalf("Parse returned %T %v, want a non-empty lang.ErrorList", err, err)
			}
			for _, e := range errs {
				if strings.Contains(e.Msg, "internal parser error") {
					t.Fatalf("Parse panicked: %v", e)
				}
				if !e.Pos.IsValid() || e.Pos.File != "fuzz.tdl" {
					t.Fatalf("diagnostic without a position: %v", e)
				}
			}
			return
		}
		if file == nil {
			t.Fatal("Parse returned neither a file nor an error")
		}
		// What parses formats, and the formatted text parses to the same
		// canonical text (Format is a fixed point).
		out := lang.Format(file, src)
		again, err := Parse("fuzz.tdl", out)
		if err != nil {
			t.Fatalf("formatted text does not parse: %v\ninput:\n%s\nformatted:\n%s", err, src, out)
		}
		if out2 := lang.Format(again, out); !bytes.Equal(out, out2) {
			t.Fatalf("formatting is not idempotent\ninput:\n%s\nonce:\n%s\ntwice:\n%s", src, out, out2)
		}
	})
}
