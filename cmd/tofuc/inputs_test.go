package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"tofuc/lang"
	"tofuc/runtime/npy"
	"tofuc/runtime/tensor"
)

// TestInputShapeMessage: a given input of the wrong shape is explained in
// the model's terms, with the --set that would fit it.
func TestInputShapeMessage(t *testing.T) {
	dir := t.TempDir()
	mlp := "../../examples/mlp.tdl"
	if status, _, stderr := tofuc("eval", mlp, "--set", "batch=4", "--random-inputs", "--out", dir); status != exitOK {
		t.Fatalf("eval: %s", stderr)
	}
	x := filepath.Join(dir, "inputs", "x.npy")
	status, _, stderr := tofuc("eval", mlp, "--in", "x="+x, "--out", filepath.Join(dir, "again"))
	want := "input x has shape [4 784], want f32[64, 784] (batch = 64; set it with --set batch=4)"
	if status != exitUser || !strings.Contains(stderr, want) {
		t.Errorf("exit %d, stderr %q; want %q", status, stderr, want)
	}
	logits := filepath.Join(dir, "logits.npy") // [4, 10]
	status, _, stderr = tofuc("eval", mlp, "--set", "batch=4", "--in", "x="+logits, "--out", filepath.Join(dir, "again"))
	want = "want f32[4, 784] (dimension 1 is fixed at 784)"
	if status != exitUser || !strings.Contains(stderr, want) {
		t.Errorf("exit %d, stderr %q; want %q", status, stderr, want)
	}
}

// TestDrawnInputsReadBack: the inputs --random-inputs draws are written
// where --in reads them, and give the same outputs.
func TestDrawnInputsReadBack(t *testing.T) {
	dir := t.TempDir()
	mlp := "../../examples/mlp.tdl"
	_, first, stderr := tofuc("eval", mlp, "--set", "batch=2", "--random-inputs", "--seed", "5", "--out", filepath.Join(dir, "a"))
	if !strings.Contains(first, "input x: random f32[2 784] -> ") {
		t.Fatalf("no drawn input written:\n%s%s", first, stderr)
	}
	_, second, stderr := tofuc("eval", mlp, "--set", "batch=2", "--in", "x="+filepath.Join(dir, "a", "inputs", "x.npy"),
		"--params", filepath.Join(dir, "a", "params.npz"), "--out", filepath.Join(dir, "b"))
	summary := func(out string) string { // the logits line without its path
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "logits:") {
				return l[:strings.Index(l, " -> ")]
			}
		}
		return "none"
	}
	if summary(first) == "none" || summary(first) != summary(second) {
		t.Errorf("outputs differ:\n%s\n%s%s", first, second, stderr)
	}
}

// TestEvalUsageAndDivergence: --random-inputs with --op is a usage error
// that says why, and a diverging training run fails at the first
// non-finite loss.
func TestEvalUsageAndDivergence(t *testing.T) {
	dir := t.TempDir()
	status, _, stderr := tofuc("eval", "../../stdlib/nn.tdl", "--op", "softmax", "--random-inputs", "--out", dir)
	if status != exitUsage || !strings.Contains(stderr, "give each input with --in") {
		t.Errorf("--op --random-inputs: exit %d, %s", status, stderr)
	}
	status, stdout, stderr := tofuc("eval", "../../examples/mlp.tdl", "--train", "--steps", "10", "--lr", "1000", "--set", "batch=8", "--random-inputs", "--out", dir)
	if status != exitUser || !strings.Contains(stderr, "training diverged") || strings.Contains(stdout, "params.npz") {
		t.Errorf("a diverging run: exit %d\n%s%s", status, stdout, stderr)
	}
}

// TestRunDrawsLabelsInRange: `run --random-inputs` on a compiled training
// plan draws its labels below the model's class count (recorded in the
// plan), as eval does from the graph; they had been drawn in [0, 10).
func TestRunDrawsLabelsInRange(t *testing.T) {
	dir := t.TempDir()
	plan := filepath.Join(dir, "plan")
	if status, _, stderr := tofuc("compile", "../../examples/rnn.tdl", "--train", "--set", "classes=3", "--set", "batch=8",
		"--set", "hidden=8", "--set", "steps=2", "--emit", "host,plan", "-o", plan); status != exitOK {
		t.Fatalf("compile: %s", stderr)
	}
	if status, _, stderr := tofuc("run", plan, "--random-inputs", "--seed", "2", "--out", filepath.Join(dir, "out")); status != exitOK {
		t.Errorf("run: exit %d: %s", status, stderr)
	}
}

// TestFlagAndNameMessages: a flag value of the wrong type says what the
// flag takes (not Go's strconv error), an unknown flag or operator gets
// the closest known one, and an input the model lacks the ones it has.
func TestFlagAndNameMessages(t *testing.T) {
	dir := t.TempDir()
	y := filepath.Join(t.TempDir(), "y.npy")
	if err := npy.WriteFile(y, tensor.New(lang.F32, []int{2})); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"eval", "../../examples/mlp.tdl", "--random-inputs", "--seed", "-1", "--out", dir}, "--seed -1: expected a whole number, 0 or more"},
		{[]string{"eval", "../../examples/mlp.tdl", "--train", "--lr", "fast", "--out", dir}, "--lr fast: expected a number"},
		{[]string{"eval", "../../examples/mlp.tdl", "--random-inputs", "--seed", "99999999999999999999999", "--out", dir}, "out of range for uint64"},
		{[]string{"compile", "../../examples/mlp.tdl", "--precision", "foo", "-o", dir}, `unknown precision "foo" (expected exact, f32, tf32, bf16, f16)`},
		{[]string{"fmt", "--write=maybe", "../../examples/mlp.tdl"}, "--write maybe: expected true or false"},
		{[]string{"eval", "../../examples/mlp.tdl", "--random-input", "--out", dir}, "unknown flag: --random-input (did you mean --random-inputs?)"},
		{[]string{"grad", "../../stdlib/nn.tdl", "--op", "sofmax"}, "no operator sofmax (did you mean softmax?)"},
		{[]string{"strategies", "../../stdlib/linalg.tdl", "--op", "matmull"}, "no operator matmull in ../../stdlib/linalg.tdl (did you mean matmul?)"},
		{[]string{"partition", "../../examples/mlp.tdl", "--devices", "2", "--loss-scale", "8"}, "--clip-norm go with --train"},
		{[]string{"eval", "../../examples/mlp.tdl", "--in", "y=" + y, "--random-inputs", "--out", dir}, "graph mlp has no input y; its inputs: x"},
	} {
		status, _, stderr := tofuc(tc.args...)
		if status == exitOK || !strings.Contains(stderr, tc.want) || strings.Contains(stderr, "strconv") {
			t.Errorf("%v: exit %d, %q; want %q", tc.args, status, stderr, tc.want)
		}
	}
}

// TestRunWritesNextParams: `run` of a training plan writes params.npz,
// the parameters for the next step under their own names, which
// `--params` takes as they are: two runs give eval --train's two losses.
func TestRunWritesNextParams(t *testing.T) {
	dir := t.TempDir()
	plan, first, second := filepath.Join(dir, "plan"), filepath.Join(dir, "1"), filepath.Join(dir, "2")
	mlp := []string{"../../examples/mlp.tdl", "--train", "--set", "batch=8", "--set", "hidden=16"}
	if status, _, stderr := tofuc(append(append([]string{"compile"}, mlp...), "--emit", "host,plan", "-o", plan)...); status != exitOK {
		t.Fatalf("compile: %s", stderr)
	}
	if status, _, stderr := tofuc("run", plan, "--random-inputs", "--seed", "3", "--out", first); status != exitOK {
		t.Fatalf("run: %s", stderr)
	}
	inputs := []string{"--in", "x=" + filepath.Join(first, "inputs", "x.npy"), "--in", "labels=" + filepath.Join(first, "inputs", "labels.npy")}
	if status, _, stderr := tofuc(append([]string{"run", plan, "--params", filepath.Join(first, "params.npz"), "--out", second}, inputs...)...); status != exitOK {
		t.Fatalf("run with the written parameters: %s", stderr)
	}
	status, stdout, stderr := tofuc(append(append(append([]string{"eval"}, mlp...), "--steps", "2", "--backend", "cpu",
		"--params", filepath.Join(plan, "params.npz"), "--out", filepath.Join(dir, "eval")), inputs...)...)
	if status != exitOK {
		t.Fatalf("eval: %s", stderr)
	}
	for step, run := range []string{first, second} {
		loss, err := npy.ReadFile(filepath.Join(run, "loss.npy"))
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("step %d: loss %.6g", step+1, loss.Flat(0)); !strings.Contains(stdout, want) {
			t.Errorf("run %d: loss %g; eval says\n%s", step+1, loss.Flat(0), stdout)
		}
	}
}
