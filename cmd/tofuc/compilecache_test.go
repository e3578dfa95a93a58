package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tofuc/codegen/toolchain"
)

// TestCompileCache: compiling an unchanged model again writes the first
// compile's outputs (the same files, byte for byte) from the cache and
// says so; a change to the model's source compiles it again.
func TestCompileCache(t *testing.T) {
	tools, err := toolchain.Find()
	if err != nil {
		t.Skip(err)
	}
	if tools.Cache == nil {
		t.Skip("the compile cache is off (TOFUC_CACHE=off)")
	}
	if err := os.MkdirAll(tools.Cache.Dir, 0o755); err != nil {
		t.Skipf("the compile cache cannot be written: %v", err)
	}
	if probe, err := os.CreateTemp(tools.Cache.Dir, "probe-"); err != nil {
		t.Skipf("the compile cache cannot be written: %v", err)
	} else {
		probe.Close()
		os.Remove(probe.Name())
	}
	dir := t.TempDir()
	model := filepath.Join(dir, "m.tdl")
	write := func(factor string) {
		src := "op scaled(x: [N]) -> [N] = lambda i: x[i] * " + factor + "\nmodel m(x: f32[16]) {\n    return scaled(x)\n}\n"
		if err := os.WriteFile(model, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A factor of this run's own, so that no earlier run's entry matches.
	factor := fmt.Sprintf("%d.5", time.Now().UnixNano()%1000000)
	write(factor)
	compile := func(out string) string {
		t.Helper()
		status, stdout, stderr := tofuc("compile", model, "--no-optimize", "-o", filepath.Join(dir, out))
		if status != exitOK {
			t.Fatalf("compile: exit %d: %s", status, stderr)
		}
		return stdout
	}
	const reused = "reused from the compile cache"
	if first := compile("a"); strings.Contains(first, reused) {
		t.Fatalf("the first compile of a new model was reused:\n%s", first)
	}
	second := compile("b")
	if !strings.Contains(second, reused) || !strings.Contains(second, filepath.Join(dir, "b", "plan.json")) {
		t.Errorf("the second compile did not reuse the first or names the wrong plan:\n%s", second)
	}
	if a, b := files(t, filepath.Join(dir, "a")), files(t, filepath.Join(dir, "b")); len(a) != len(b) || len(a) == 0 {
		t.Errorf("%d files compiled, %d reused", len(a), len(b))
	} else {
		for name, data := range a {
			if !bytes.Equal(data, b[name]) {
				t.Errorf("%s differs between the compile and its reuse", name)
			}
		}
	}
	write(factor + "1")
	if third := compile("c"); strings.Contains(third, reused) {
		t.Errorf("a changed model was not compiled again:\n%s", third)
	}
}

// files maps the paths of the regular files under dir to their contents.
func files(t *testing.T, dir string) map[string][]byte {
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		out[strings.TrimPrefix(path, dir)] = data
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
