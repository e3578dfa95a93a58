package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The malformed inputs of testdata/errors: every *.tdl file there (not its
// subfolders) is checked with `tofuc check`, and its diagnostics compared
// with the `// ERROR "regexp"` markers written in it. See
// testdata/errors/README.md for the conventions.

const errorsDir = "../../testdata/errors"

// diagLine is one line of `tofuc check` output.
var diagLine = regexp.MustCompile(`^(.+?):(\d+):(\d+): (.+)$`)

// marker is `// ERROR "re" ...` or `// ERROR@+N "re" ...` (@-N too).
var marker = regexp.MustCompile(`//\s*ERROR(@[+-]\d+)?((?:\s+"(?:[^"\\]|\\.)*")+)\s*$`)

var quoted = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

type expectation struct {
	file string // cleaned path
	line int
	re   *regexp.Regexp
	src  string // file:line of the marker, for messages
	used bool
}

type diag struct {
	file      string
	line, col int
	msg       string
}

func (d diag) String() string { return fmt.Sprintf("%s:%d:%d: %s", d.file, d.line, d.col, d.msg) }

// readMarkers parses the expectations written in path.
func readMarkers(t *testing.T, path string) []*expectation {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out, errs := parseMarkers(path, string(src))
	for _, err := range errs {
		t.Error(err)
	}
	return out
}

func parseMarkers(path, src string) ([]*expectation, []error) {
	var out []*expectation
	var errs []error
	for i, line := range strings.Split(src, "\n") {
		m := marker.FindStringSubmatch(line)
		if m == nil {
			if strings.Contains(line, "// ERROR") {
				errs = append(errs, fmt.Errorf("%s:%d: malformed ERROR marker: %s", path, i+1, line))
			}
			continue
		}
		target := i + 1
		if m[1] != "" {
			off, _ := strconv.Atoi(m[1][1:])
			target += off
		}
		for _, q := range quoted.FindAllString(m[2], -1) {
			s := unquoteMarker(q)
			re, err := regexp.Compile(s)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s:%d: bad regexp %q: %v", path, i+1, s, err))
				continue
			}
			out = append(out, &expectation{file: filepath.Clean(path), line: target, re: re, src: fmt.Sprintf("%s:%d", path, i+1)})
		}
	}
	return out, errs
}

// unquoteMarker returns the regexp between the quotes of q: the text as
// written, except that \" stands for a quote (so \( is the regexp \( and
// \\ a literal backslash).
func unquoteMarker(q string) string {
	q = q[1 : len(q)-1]
	var b strings.Builder
	for i := 0; i < len(q); i++ {
		if q[i] == '\\' && i+1 < len(q) {
			if q[i+1] != '"' {
				b.WriteByte('\\')
			}
			i++
		}
		b.WriteByte(q[i])
	}
	return b.String()
}

// helpers lists the files an entry owns in imports/: those named after it,
// NAME_*.tdl for NAME.tdl.
func helpers(entry string) []string {
	base := strings.TrimSuffix(filepath.Base(entry), ".tdl")
	hs, _ := filepath.Glob(filepath.Join(filepath.Dir(entry), "imports", base+"_*.tdl"))
	return hs
}

// parseDiagnostics splits `tofuc check` stderr into diagnostics; every line
// must have the form file:line:col: message with a column inside the line.
func parseDiagnostics(t *testing.T, stderr string) []diag {
	t.Helper()
	var out []diag
	lines := map[string][]string{}
	for _, l := range strings.Split(strings.TrimRight(stderr, "\n"), "\n") {
		if l == "" {
			continue
		}
		m := diagLine.FindStringSubmatch(l)
		if m == nil {
			t.Errorf("diagnostic not of the form file:line:col: message: %q", l)
			continue
		}
		d := diag{file: filepath.Clean(m[1]), msg: m[4]}
		d.line, _ = strconv.Atoi(m[2])
		d.col, _ = strconv.Atoi(m[3])
		if d.line < 1 || d.col < 1 {
			t.Errorf("diagnostic with a bad position: %q", l)
		}
		src, ok := lines[d.file]
		if !ok {
			b, err := os.ReadFile(d.file)
			if err != nil {
				t.Errorf("diagnostic in a file that cannot be read (%v): %q", err, l)
			}
			src = strings.Split(string(b), "\n")
			lines[d.file] = src
		}
		if src != nil && (d.line > len(src) || d.col > len(src[d.line-1])+1) {
			t.Errorf("diagnostic position outside the file: %q", l)
		}
		out = append(out, d)
	}
	return out
}

// matchDiagnostics pairs diagnostics with expectations on the same line.
func matchDiagnostics(t *testing.T, diags []diag, want []*expectation) {
	t.Helper()
	for _, d := range diags {
		found := false
		for _, w := range want {
			if !w.used && w.file == d.file && w.line == d.line && w.re.MatchString(d.msg) {
				w.used, found = true, true
				break
			}
		}
		if !found {
			t.Errorf("unexpected diagnostic: %s", d)
		}
	}
	for _, w := range want {
		if !w.used {
			t.Errorf("%s: no diagnostic on line %d matching %q", w.src, w.line, w.re)
		}
	}
}

func errorFiles(t *testing.T) []string {
	files, err := filepath.Glob(filepath.Join(errorsDir, "*.tdl"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 40 {
		t.Fatalf("found %d files in %s, expected at least 40", len(files), errorsDir)
	}
	return files
}

func TestErrorFiles(t *testing.T) {
	for _, path := range errorFiles(t) {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".tdl"), func(t *testing.T) {
			t.Parallel()
			want := readMarkers(t, path)
			for _, h := range helpers(path) {
				want = append(want, readMarkers(t, h)...)
			}
			if len(want) == 0 {
				t.Fatalf("%s has no ERROR markers", path)
			}
			var stdout, stderr bytes.Buffer
			status := run([]string{"check", path}, &stdout, &stderr)
			if status != exitUser {
				t.Errorf("exit status %d, want %d", status, exitUser)
			}
			if stdout.Len() > 0 {
				t.Errorf("unexpected output on stdout: %q", stdout.String())
			}
			if strings.Contains(stderr.String(), "more errors)") {
				t.Errorf("too many diagnostics: %s", stderr.String())
			}
			matchDiagnostics(t, parseDiagnostics(t, stderr.String()), want)
			if t.Failed() {
				t.Logf("tofuc check %s:\n%s", path, stderr.String())
			}
		})
	}
}

// The runner itself: markers are read as documented.
func TestErrorMarkers(t *testing.T) {
	src := `a // ERROR "x\(\"q\""
// ERROR@+1 "y" "z\d\\\""
b
c // ERROR@-2 "w"
d // ERROR x
`
	got, errs := parseMarkers("m.tdl", src)
	var s []string
	for _, e := range got {
		s = append(s, fmt.Sprintf("%d:%s", e.line, e.re))
	}
	if want := `1:x\("q" 3:y 3:z\d\\" 2:w`; strings.Join(s, " ") != want {
		t.Errorf("markers = %q, want %q", strings.Join(s, " "), want)
	}
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "m.tdl:5: malformed") {
		t.Errorf("errors = %v, want one for line 5", errs)
	}
}

func TestCheckJSON(t *testing.T) {
	path := filepath.Join(errorsDir, "shape_matmul.tdl")
	var stdout, stderr bytes.Buffer
	status := run([]string{"check", "--json", path}, &stdout, &stderr)
	if status != exitUser {
		t.Errorf("exit status %d, want %d", status, exitUser)
	}
	if stderr.Len() > 0 {
		t.Errorf("unexpected output on stderr: %q", stderr.String())
	}
	var out struct {
		Diagnostics []struct {
			File    string `json:"file"`
			Line    int    `json:"line"`
			Col     int    `json:"col"`
			Message string `json:"message"`
		} `json:"diagnostics"`
	}
	dec := json.NewDecoder(bytes.NewReader(stdout.Bytes()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&out); err != nil {
		t.Fatalf("--json output does not decode: %v\n%s", err, stdout.String())
	}
	if len(out.Diagnostics) != 1 {
		t.Fatalf("got %d diagnostics, want 1:\n%s", len(out.Diagnostics), stdout.String())
	}
	d := out.Diagnostics[0]
	if d.File != path || d.Line != 5 || d.Col != 12 || !strings.HasPrefix(d.Message, "matmul(f32[64, 128], f32[100, 32]): ") {
		t.Errorf("diagnostic = %+v", d)
	}
	// The keys, as written.
	var raw map[string][]map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &raw); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range raw["diagnostics"][0] {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if got := strings.Join(keys, ","); got != "col,file,line,message" {
		t.Errorf("keys = %s", got)
	}

	// A clean file: an empty list (not null) and status 0.
	clean := filepath.Join(t.TempDir(), "ok.tdl")
	os.WriteFile(clean, []byte("op id(x: [N]) -> [N] = lambda i: x[i]\n"), 0o644)
	stdout.Reset()
	stderr.Reset()
	if status := run([]string{"check", "--json", clean}, &stdout, &stderr); status != exitOK {
		t.Errorf("clean file: exit status %d, stderr %q", status, stderr.String())
	}
	if got := strings.Join(strings.Fields(stdout.String()), ""); got != `{"diagnostics":[]}` {
		t.Errorf("clean file: --json printed %q", stdout.String())
	}
}
