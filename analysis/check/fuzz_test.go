package check

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"tofuc/parser"

	"tofuc/lang"
	"tofuc/lang/ir"
)

// FuzzCheck parses and checks arbitrary input: the checker must neither
// panic nor hang, and must report every failure with a position.
func FuzzCheck(f *testing.F) {
	for _, pat := range []string{"../../stdlib/*.tdl", "../../examples/*.tdl", "../../testdata/errors/*.tdl"} {
		paths, _ := filepath.Glob(pat)
		for _, p := range paths {
			src, err := os.ReadFile(p)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(src)
		}
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		done := make(chan error, 1)
		go func() { done <- checkSource("fuzz.tdl", src) }()
		var err error
		select {
		case err = <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("checking did not finish in 20s:\n%s", src)
		}
		assertDiagnostics(t, "fuzz.tdl", err)
	})
}

var (
	baseOnce sync.Once
	base     *Program
	baseErr  error
)

// freshProgram is NewProgram without parsing the standard library again
// (which takes most of the time of a small check): a new program sharing
// the parsed standard-library modules of one made once.
func freshProgram() (*Program, error) {
	baseOnce.Do(func() { base, baseErr = NewProgram(parser.Parse) })
	if baseErr != nil {
		return nil, baseErr
	}
	p := &Program{parse: base.parse, modules: map[string]*Module{}, loading: map[string]bool{}, prelude: base.prelude, cache: map[string]*ir.Instance{}}
	for k, m := range base.modules {
		p.modules[k] = m
	}
	return p, nil
}

// checkSource runs what `tofuc check` runs on one file.
func checkSource(name string, src []byte) error {
	p, err := freshProgram()
	if err != nil {
		return err
	}
	m, err := p.LoadSource(name, src)
	if err != nil {
		return err
	}
	return m.Check("", nil)
}

// assertDiagnostics fails unless err is nil or a list of diagnostics, each
// with a file:line:col position (in name or in the standard library).
func assertDiagnostics(t *testing.T, name string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	errs, ok := err.(lang.ErrorList)
	if !ok || len(errs) == 0 {
		t.Fatalf("got %T %v, want a non-empty lang.ErrorList", err, err)
	}
	for _, e := range errs {
		if strings.Contains(e.Msg, "internal parser error") {
			t.Fatalf("the parser panicked: %v", e)
		}
		if !e.Pos.IsValid() || e.Pos.Col < 1 || (e.Pos.File != name && !strings.HasPrefix(e.Pos.File, StdPrefix)) {
			t.Fatalf("diagnostic without a file:line:col position in %s: %q", name, e)
		}
	}
}
