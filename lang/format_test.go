package lang_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"tofuc/analysis/check"
	"tofuc/lang"
	"tofuc/parser"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/format")

func format(t *testing.T, path string, src []byte) []byte {
	t.Helper()
	f, err := parser.Parse(path, src)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return lang.Format(f, src)
}

// TestFormatGolden formats testdata/format/NAME.in.tdl and compares the
// result with NAME.golden.tdl (go test -run FormatGolden -update rewrites
// the goldens; read the diff before committing it).
func TestFormatGolden(t *testing.T) {
	ins, _ := filepath.Glob("testdata/format/*.in.tdl")
	if len(ins) == 0 {
		t.Fatal("no testdata/format/*.in.tdl")
	}
	for _, in := range ins {
		golden := strings.TrimSuffix(in, ".in.tdl") + ".golden.tdl"
		t.Run(filepath.Base(in), func(t *testing.T) {
			src, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			got := format(t, in, src)
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("format(%s) differs from %s:\n%s", in, golden, lineDiff(string(want), string(got)))
			}
		})
	}
}

// lineDiff shows the first differing line of two texts.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return "line " + strconv.Itoa(i+1) + ":\n  want " + quote(wl) + "\n  got  " + quote(gl) + "\n--- got in full:\n" + got
		}
	}
	return ""
}

func quote(s string) string { return "`" + s + "`" }

// sources returns the goldens, the standard library and the examples.
func sources(t *testing.T) []string {
	var out []string
	for _, pat := range []string{"testdata/format/*.golden.tdl", "../stdlib/*.tdl", "../examples/*.tdl"} {
		ps, _ := filepath.Glob(pat)
		out = append(out, ps...)
	}
	if len(out) == 0 {
		t.Fatal("no sources")
	}
	return out
}

// TestFormatIdempotent: formatting formatted text changes nothing, and a
// golden file is its own formatting.
func TestFormatIdempotent(t *testing.T) {
	for _, path := range sources(t) {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		once := format(t, path, src)
		twice := format(t, path, once)
		if !bytes.Equal(once, twice) {
			t.Errorf("%s: format(format(x)) != format(x):\n%s", path, lineDiff(string(once), string(twice)))
		}
		if strings.HasSuffix(path, ".golden.tdl") && !bytes.Equal(once, src) {
			t.Errorf("%s is not formatted:\n%s", path, lineDiff(string(src), string(once)))
		}
	}
}

// TestFormatPreservesMeaning: the formatted standard library and examples
// parse to the same canonical text, keep every comment, and check clean.
func TestFormatPreservesMeaning(t *testing.T) {
	for _, pat := range []string{"../stdlib/*.tdl", "../examples/*.tdl"} {
		paths, _ := filepath.Glob(pat)
		for _, path := range paths {
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			orig, err := parser.Parse(path, src)
			if err != nil {
				t.Fatal(err)
			}
			out := lang.Format(orig, src)
			name := "formatted/" + filepath.Base(path)
			f, err := parser.Parse(name, out)
			if err != nil {
				t.Errorf("%s: formatted text does not parse: %v", path, err)
				continue
			}
			if a, b := declStrings(orig), declStrings(f); a != b {
				t.Errorf("%s: formatting changed the declarations:\n%s\n---\n%s", path, a, b)
			}
			if len(f.Comments) != len(orig.Comments) {
				t.Errorf("%s: %d comments before formatting, %d after", path, len(orig.Comments), len(f.Comments))
			}
			p, err := check.NewProgram(parser.Parse)
			if err != nil {
				t.Fatal(err)
			}
			m, err := p.LoadSource(name, out)
			if err == nil {
				err = m.Check("", nil)
			}
			if err != nil {
				t.Errorf("%s: formatted text does not check: %v", path, err)
			}
		}
	}
}

// declStrings prints every declaration on one line, without comments or
// layout: the meaning formatting must keep.
func declStrings(f *lang.File) string {
	var b strings.Builder
	for _, d := range f.Order {
		one := &lang.File{Order: []lang.Decl{d}}
		switch d := d.(type) {
		case *lang.OpDecl:
			one.Ops = []*lang.OpDecl{d}
		case *lang.ModelDecl:
			one.Models = []*lang.ModelDecl{d}
		case *lang.RuleDecl:
			one.Rules = []*lang.RuleDecl{d}
		case *lang.Import:
			one.Imports = []*lang.Import{d}
		}
		text := string(lang.Format(one, nil))
		b.WriteString(strings.Join(strings.Fields(text), " "))
		b.WriteString("\n")
	}
	return b.String()
}
