package main

import (
	"os"
	"path/filepath"
	"testing"

	"tofuc/lang"
	"tofuc/runtime/npy"
	"tofuc/runtime/tensor"
)

// A run of a dynamic plan refuses, in one line and writing nothing,
// what it cannot run: a batch too large for the machine, an explicit
// batch of 0, inputs that disagree on the batch, --batch against them.
func TestRunDynamicErrors(t *testing.T) {
	t.Setenv("TOFUC_CACHE", t.TempDir())
	dir := t.TempDir()
	src := filepath.Join(dir, "two.tdl")
	model := "model two<batch = 2>(x: f32[batch, 4096], y: f32[batch, 4096]) {\n    return x + y\n}\n"
	if err := os.WriteFile(src, []byte(model), 0o644); err != nil {
		t.Fatal(err)
	}
	plan := filepath.Join(dir, "plan")
	if status, _, stderr := tofuc("compile", src, "--dynamic", "batch=1,2", "--emit", "host", "-o", plan); status != exitOK {
		t.Fatal(stderr)
	}
	input := func(name string, n int) string {
		path := filepath.Join(dir, name+".npy")
		if err := npy.WriteFile(path, tensor.New(lang.F32, []int{n, 4096})); err != nil {
			t.Fatal(err)
		}
		return name + "=" + path
	}
	x3, y4 := input("x", 3), input("y", 4)
	// 2^30 samples of 4096 values: terabytes on any machine.
	refused(t, "a batch of 1073741824 samples", "run", plan, "--random-inputs", "--batch", "1073741824")
	refused(t, "input y holds 4 samples, another input 3", "run", plan, "--in", x3, "--in", y4)
	refused(t, "--batch 5, but the inputs given hold 3 samples", "run", plan, "--in", x3, "--random-inputs", "--batch", "5")
	if status, _, stderr := tofuc("run", plan, "--random-inputs", "--batch", "0", "--out", t.TempDir()); status != exitUsage {
		t.Errorf("--batch 0: status %d, %s", status, stderr)
	}
}
