package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"tofuc/codegen/toolchain"
)

// TestBenchCompilesAsCompile: for the same flags, the plan `tofuc bench
// --backend cpu` times (kept with --keep) is the plan `tofuc compile`
// writes, but for the targets each builds (bench builds the host's only):
// the same kernels, buffers and steps, the same host object, and `tofuc
// run` of either gives the same bytes.
func TestBenchCompilesAsCompile(t *testing.T) {
	if _, err := toolchain.Find(); err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	for i, flags := range [][]string{
		{"../../examples/mlp.tdl", "--set", "batch=8"},
		{"../../examples/mlp.tdl", "--set", "batch=16", "--set", "hidden=48", "--no-optimize"},
		{"../../examples/mlp.tdl", "--set", "batch=16", "--devices", "2"},
		{"../../examples/mlp.tdl", "--set", "batch=8", "--precision", "f32"},
		{"../../examples/transformer.tdl", "--set", "hidden=32", "--set", "seq=8", "--set", "batch=2", "--set", "vocab=50"},
	} {
		compiled := filepath.Join(dir, "compile", string(rune('a'+i)))
		benched := filepath.Join(dir, "bench", string(rune('a'+i)))
		if status, _, stderr := tofuc(append([]string{"compile", "-o", compiled}, flags...)...); status != exitOK {
			t.Fatalf("compile %v: exit %d: %s", flags, status, stderr)
		}
		if status, _, stderr := tofuc(append([]string{"bench", "--backend", "cpu", "--runs", "1", "--keep", benched}, flags...)...); status != exitOK {
			t.Fatalf("bench %v: exit %d: %s", flags, status, stderr)
		}
		a, b := readPlanJSON(t, compiled), readPlanJSON(t, benched)
		hostA, hostB := a["modules"].(map[string]any)["host"], b["modules"].(map[string]any)["host"]
		delete(a, "modules") // and the seal of the plan, which covers them
		delete(b, "modules")
		delete(a, "seal")
		delete(b, "seal")
		if !reflect.DeepEqual(a, b) || !reflect.DeepEqual(hostA, hostB) {
			t.Errorf("%v: bench's plan is not compile's (host objects %v and %v)", flags, hostA, hostB)
		}
		var outs [2]string
		for j, d := range []string{compiled, benched} {
			outs[j] = filepath.Join(d, "out")
			if status, _, stderr := tofuc("run", d, "--random-inputs", "--seed", "3", "--out", outs[j]); status != exitOK {
				t.Fatalf("run %s: exit %d: %s", d, status, stderr)
			}
		}
		if a, b := files(t, outs[0]), files(t, outs[1]); !reflect.DeepEqual(keysOf(a), keysOf(b)) {
			t.Errorf("%v: runs wrote %v and %v", flags, keysOf(a), keysOf(b))
		} else {
			for name := range a {
				if !bytes.Equal(a[name], b[name]) {
					t.Errorf("%v: %s differs between the runs", flags, name)
				}
			}
		}
	}
}

func readPlanJSON(t *testing.T, dir string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "plan.json"))
	if err != nil {
		t.Fatal(err)
	}
	var p map[string]any
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

func keysOf[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestPrecisionRecorded: --precision is recorded in the plan (absent for
// exact), printed by compile, part of the compile cache's key (a compile
// in another mode is not reused from it), and builds other kernels.
func TestPrecisionRecorded(t *testing.T) {
	if _, err := toolchain.Find(); err != nil {
		t.Skip(err)
	}
	t.Setenv("TOFUC_CACHE", t.TempDir())
	dir := t.TempDir()
	kernels := map[string][]any{}
	for _, mode := range []string{"exact", "f32", "exact"} {
		out := filepath.Join(dir, mode)
		status, stdout, stderr := tofuc("compile", "../../examples/mlp.tdl", "--precision", mode, "-o", out)
		if status != exitOK {
			t.Fatalf("compile --precision %s: exit %d: %s", mode, status, stderr)
		}
		p := readPlanJSON(t, out)
		got, ok := p["precision"]
		switch {
		case mode == "exact" && ok:
			t.Errorf("an exact plan records precision %v", got)
		case mode != "exact" && got != mode:
			t.Errorf("--precision %s: the plan records %v", mode, got)
		case mode != "exact" && !bytes.Contains([]byte(stdout), []byte("precision: "+mode)):
			t.Errorf("--precision %s: compile printed %q", mode, stdout)
		}
		reused := bytes.Contains([]byte(stdout), []byte("reused from the compile cache"))
		if _, seen := kernels[mode]; reused != seen {
			t.Errorf("--precision %s: reused from the cache %v, compiled before in that mode %v", mode, reused, seen)
		}
		kernels[mode] = p["kernels"].([]any)
	}
	if reflect.DeepEqual(kernels["exact"], kernels["f32"]) {
		t.Error("the same kernels in exact and f32")
	}
	if status, _, stderr := tofuc("compile", "../../examples/mlp.tdl", "--precision", "f64", "-o", filepath.Join(dir, "bad")); status != exitUsage || !bytes.Contains([]byte(stderr), []byte("exact, f32, tf32, bf16, f16")) {
		t.Errorf("--precision f64: exit %d: %s", status, stderr)
	}
}
