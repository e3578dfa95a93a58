package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"tofuc/lang"
	"tofuc/runtime/npy"
	"tofuc/runtime/tensor"
)

// tofuc runs the command line in-process.
func tofuc(args ...string) (status int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	status = run(args, &out, &errOut)
	return status, out.String(), errOut.String()
}

func TestExitStatuses(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.tdl")
	os.WriteFile(bad, []byte("op f(x: [N]) -> [N] = lambda i: y[i]\n"), 0o644)
	for _, tc := range []struct {
		args []string
		want int
	}{
		{nil, exitUsage},
		{[]string{"frobnicate"}, exitUsage},
		{[]string{"help"}, exitOK},
		{[]string{"help", "eval"}, exitOK},
		{[]string{"help", "nope"}, exitUsage},
		{[]string{"version"}, exitOK},
		{[]string{"check"}, exitUsage},
		{[]string{"check", "--bogus", bad}, exitUsage},
		{[]string{"check", bad}, exitUser},
		{[]string{"check", filepath.Join(dir, "missing.tdl")}, exitUser},
		{[]string{"check", "--set", "noequals", bad}, exitUsage},
		{[]string{"fmt"}, exitUsage},
		{[]string{"fmt", "-w", "-l", bad}, exitUsage},
		{[]string{"eval", bad}, exitUsage},          // no --out
		{[]string{"eval", "--out", dir}, exitUsage}, // no file
		{[]string{"eval", bad, "--op", "f", "--set", "a=1", "--out", dir}, exitUsage},
		{[]string{"eval", bad, "--op", "f", "--out", dir}, exitUser}, // does not check
	} {
		if got, _, stderr := tofuc(tc.args...); got != tc.want {
			t.Errorf("tofuc %s: exit %d, want %d\n%s", strings.Join(tc.args, " "), got, tc.want, stderr)
		}
	}
}

func TestVersionNamesTools(t *testing.T) {
	_, out, _ := tofuc("version")
	for _, want := range []string{"tofuc ", "llc:", "cache:", "z3:", "cuda:"} {
		if !strings.Contains(out, want) {
			t.Errorf("version output lacks %q:\n%s", want, out)
		}
	}
}

func TestFmtModes(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.tdl")
	messy := "op   f(x:[N])->[N]=lambda i:x[i]*2.0   // doubles\n"
	tidy := "op f(x: [N]) -> [N] = lambda i: x[i] * 2.0  // doubles\n"
	os.WriteFile(path, []byte(messy), 0o644)

	if status, out, _ := tofuc("fmt", path); status != 0 || out != tidy {
		t.Errorf("fmt: status %d, output %q, want %q", status, out, tidy)
	}
	if _, out, _ := tofuc("fmt", "-l", path); strings.TrimSpace(out) != path {
		t.Errorf("fmt -l: %q, want the path", out)
	}
	if _, out, _ := tofuc("fmt", "-d", path); !strings.Contains(out, "-"+strings.TrimSuffix(messy, "\n")) || !strings.Contains(out, "+"+strings.TrimSuffix(tidy, "\n")) {
		t.Errorf("fmt -d does not show the change:\n%s", out)
	}
	if status, _, _ := tofuc("fmt", "-w", path); status != 0 {
		t.Fatalf("fmt -w failed")
	}
	if got, _ := os.ReadFile(path); string(got) != tidy {
		t.Errorf("fmt -w wrote %q", got)
	}
	if _, out, _ := tofuc("fmt", "-l", path); out != "" {
		t.Errorf("fmt -l lists a formatted file: %q", out)
	}
}

func TestEvalModelIsDeterministic(t *testing.T) {
	run := func(dir string) []byte {
		status, _, stderr := tofuc("eval", "../../examples/mlp.tdl", "--set", "batch=3", "--random-inputs", "--seed", "7", "--out", dir)
		if status != 0 {
			t.Fatalf("eval: %s", stderr)
		}
		logits, err := npy.ReadFile(filepath.Join(dir, "logits.npy"))
		if err != nil {
			t.Fatal(err)
		}
		if len(logits.Shape) != 2 || logits.Shape[0] != 3 {
			t.Fatalf("logits shape %v, want [3 classes]", logits.Shape)
		}
		raw, _ := os.ReadFile(filepath.Join(dir, "logits.npy"))
		return raw
	}
	a, b := run(t.TempDir()), run(t.TempDir())
	if !bytes.Equal(a, b) {
		t.Error("two runs with the same seed differ")
	}
}

func TestEvalModelWithGivenParams(t *testing.T) {
	first := t.TempDir()
	if status, _, stderr := tofuc("eval", "../../examples/mlp.tdl", "--set", "batch=2", "--random-inputs", "--seed", "1", "--out", first); status != 0 {
		t.Fatal(stderr)
	}
	// The same parameters read back, with another seed for nothing else to
	// draw, give the same logits.
	second := t.TempDir()
	status, _, stderr := tofuc("eval", "../../examples/mlp.tdl", "--set", "batch=2", "--random-inputs", "--seed", "1",
		"--params", filepath.Join(first, "params.npz"), "--out", second)
	if status != 0 {
		t.Fatal(stderr)
	}
	a, _ := os.ReadFile(filepath.Join(first, "logits.npy"))
	b, _ := os.ReadFile(filepath.Join(second, "logits.npy"))
	if !bytes.Equal(a, b) {
		t.Error("logits differ with the saved parameters")
	}
}

func TestEvalOperator(t *testing.T) {
	dir := t.TempDir()
	a := tensor.FromFloats(lang.F32, []int{2, 3}, []float64{1, 2, 3, 4, 5, 6})
	eye := tensor.FromFloats(lang.F32, []int{3, 3}, []float64{1, 0, 0, 0, 1, 0, 0, 0, 1})
	npy.WriteFile(filepath.Join(dir, "a.npy"), a)
	npy.WriteFile(filepath.Join(dir, "eye.npy"), eye)
	out := filepath.Join(dir, "out")
	status, stdout, stderr := tofuc("eval", "../../stdlib/linalg.tdl", "--op", "matmul",
		"--in", "A="+filepath.Join(dir, "a.npy"), "--in", "B="+filepath.Join(dir, "eye.npy"), "--out", out)
	if status != 0 {
		t.Fatalf("eval --op matmul: %s", stderr)
	}
	got, err := npy.ReadFile(filepath.Join(out, "out.npy"))
	if err != nil {
		t.Fatal(err)
	}
	if err := tensor.Compare(got, a, tensor.Exact); err != nil {
		t.Errorf("A times the identity: %v\n%s", err, stdout)
	}

	// Wrong inputs are the user's errors, with messages that say what.
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--in", "A=" + filepath.Join(dir, "a.npy")}, "needs input B"},
		{[]string{"--in", "A=" + filepath.Join(dir, "a.npy"), "--in", "B=" + filepath.Join(dir, "a.npy")}, "B must be [K, N]"},
		{[]string{"--in", "A=" + filepath.Join(dir, "missing.npy"), "--in", "B=" + filepath.Join(dir, "eye.npy")}, "missing.npy"},
	} {
		args := append([]string{"eval", "../../stdlib/linalg.tdl", "--op", "matmul", "--out", out}, tc.args...)
		status, _, stderr := tofuc(args...)
		if status != exitUser || !strings.Contains(stderr, tc.msg) {
			t.Errorf("%v: exit %d, stderr %q; want exit 1 mentioning %q", tc.args, status, stderr, tc.msg)
		}
	}
}

func TestGradPrintsCheckedTDL(t *testing.T) {
	status, out, stderr := tofuc("grad", "../../stdlib/linalg.tdl", "--op", "matmul")
	if status != 0 {
		t.Fatalf("grad: %s", stderr)
	}
	for _, want := range []string{
		"op matmul_grad_A(A: f32[M, K], B: f32[K, N], dout: f32[M, N]) -> (dA: f32[M, K])",
		"lambda u0, u1: sum(lambda j < N: dout[u0, j] * B[u1, j])",
		"op matmul_grad_B(",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("grad output lacks %q:\n%s", want, out)
		}
	}
	path := filepath.Join(t.TempDir(), "grad.tdl")
	os.WriteFile(path, []byte(out), 0o644)
	if status, _, stderr := tofuc("check", path); status != 0 {
		t.Errorf("the derived file does not check: %s", stderr)
	}
	if _, formatted, _ := tofuc("fmt", path); formatted != out {
		t.Error("grad's output is not in canonical format")
	}
	// A long derivation reads like hand-written TDL: no needless
	// parentheses, lines within 200 characters, no unused let.
	_, out, _ = tofuc("grad", "../../stdlib/norm.tdl", "--op", "layer_norm")
	for i, line := range strings.Split(out, "\n") {
		if len(line) > 200 || strings.Contains(line, "f32((") || strings.Contains(line, ": (") {
			t.Errorf("layer_norm's gradients, line %d: %s", i+1, line)
		}
	}
	for _, op := range strings.Split(out, "\nop ")[1:] {
		for _, m := range regexp.MustCompile(`let (\w+):`).FindAllStringSubmatch(op, -1) {
			if strings.Count(op, " "+m[1]+"[") == 0 && strings.Count(op, "("+m[1]+"[") == 0 {
				t.Errorf("let %s is unused in op %s", m[1], op[:strings.Index(op, "(")])
			}
		}
	}
	if status, _, stderr := tofuc("grad", "../../stdlib/linalg.tdl", "--op", "inverse"); status != exitUser || !strings.Contains(stderr, "not differentiable") {
		t.Errorf("an opaque operator: exit %d, %q", status, stderr)
	}
	if status, _, _ := tofuc("grad", "../../stdlib/linalg.tdl"); status != exitUsage {
		t.Errorf("grad without --op: exit %d, want 2", status)
	}
}

// TestTrainAdam: training with Adam, whose step number is an input of
// the training graph that each step sets, runs and its loss falls (it
// had failed with "input step: nil tensor").
func TestTrainAdam(t *testing.T) {
	status, out, stderr := tofuc("eval", "../../examples/mlp.tdl", "--train", "--optimizer", "adam", "--set", "hidden=32", "--set", "batch=16",
		"--steps", "20", "--random-inputs", "--seed", "1", "--out", t.TempDir())
	if status != 0 {
		t.Fatalf("eval --train --optimizer adam: %s", stderr)
	}
	losses := stepLosses(out)
	if len(losses) != 20 || !(losses[19] < losses[0]) {
		t.Errorf("losses %v: want 20, falling", losses)
	}
}

// TestTrainMLP trains the MLP example for 200 SGD steps on a synthetic
// task (random inputs and labels, fixed by the seed) with the default
// learning rate: the loss must fall at least tenfold.
func TestTrainMLP(t *testing.T) {
	status, out, stderr := tofuc("eval", "../../examples/mlp.tdl", "--train", "--set", "hidden=64", "--set", "batch=32",
		"--steps", "200", "--random-inputs", "--seed", "1", "--out", t.TempDir())
	if status != 0 {
		t.Fatalf("eval --train: %s", stderr)
	}
	losses := stepLosses(out)
	if len(losses) != 200 {
		t.Fatalf("%d losses printed, want 200:\n%s", len(losses), out)
	}
	if first, last := losses[0], losses[199]; !(last*10 <= first) {
		t.Errorf("loss %g -> %g: not a tenfold reduction", first, last)
	}
	t.Logf("loss %g -> %g", losses[0], losses[199])
}

func TestCheckTrainSummary(t *testing.T) {
	for _, ex := range []string{"mlp", "wresnet", "rnn", "transformer"} {
		status, out, stderr := tofuc("check", "--train", "--summary", "../../examples/"+ex+".tdl")
		if status != 0 || !strings.Contains(out, ex+".train: ") || !strings.Contains(out, "backward") || !strings.Contains(out, "update") {
			t.Errorf("%s: exit %d, %q, %q", ex, status, out, stderr)
		}
	}
}

// stepLosses are the losses `eval --train` prints, a line per step.
func stepLosses(out string) []float64 {
	var losses []float64
	for _, line := range strings.Split(out, "\n") {
		var step int
		var loss float64
		if n, _ := fmt.Sscanf(line, "step %d: loss %g", &step, &loss); n == 2 {
			losses = append(losses, loss)
		}
	}
	return losses
}
