package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCompileNoParams compiles the MLP's training step with
// --no-params: no params.npz is written, a run without --params says to
// give them, and a run with the parameters of a compile with them
// computes what that compile's run does; a plan whose placement times
// libraries on its parameters refuses the flag.
func TestCompileNoParams(t *testing.T) {
	with, without := filepath.Join(t.TempDir(), "with"), filepath.Join(t.TempDir(), "without")
	for _, c := range []struct {
		dir   string
		extra []string
	}{{with, nil}, {without, []string{"--no-params"}}} {
		args := append([]string{"compile", "../../examples/mlp.tdl", "--train", "--devices", "2", "--set", "batch=8", "-o", c.dir}, c.extra...)
		if status, _, stderr := tofuc(args...); status != exitOK {
			t.Fatalf("%v: %s", args, stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(without, "params.npz")); err == nil {
		t.Error("--no-params wrote params.npz")
	}
	status, _, stderr := tofuc("run", without, "--random-inputs", "--out", filepath.Join(t.TempDir(), "o"))
	if status != exitUser || !strings.Contains(stderr, "give the parameters with --params") {
		t.Errorf("a run without parameters: status %d, %s", status, stderr)
	}
	want, got := filepath.Join(t.TempDir(), "want"), filepath.Join(t.TempDir(), "got")
	if status, _, stderr := tofuc("run", with, "--random-inputs", "--out", want); status != exitOK {
		t.Fatal(stderr)
	}
	if status, _, stderr := tofuc("run", without, "--random-inputs", "--params", filepath.Join(with, "params.npz"), "--out", got); status != exitOK {
		t.Fatal(stderr)
	}
	sameOutputs(t, want, got)
	status, _, stderr = tofuc("compile", "../../examples/mlp.tdl", "--precision", "f32", "--backends", "openblas", "--no-params", "-o", filepath.Join(t.TempDir(), "lib"))
	if status != exitUser || !strings.Contains(stderr, "compile with --backends none, or without --no-params") {
		t.Errorf("--no-params with a library offered: status %d, %s", status, stderr)
	}
}
