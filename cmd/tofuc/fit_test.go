package main

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"tofuc/lang"
	"tofuc/pipeline"
	"tofuc/runtime/npy"
	"tofuc/runtime/tensor"
)

const cnnModel = "../../examples/cnn.tdl"

// synthImages writes n noisy 1-channel images of size x size whose class
// (of 10) sets where a brighter square lies, as dir/x.npy and
// dir/labels.npy (the --data flags for them).
func synthImages(t *testing.T, dir string, n, size int) []string {
	t.Helper()
	x := make([]float64, n*size*size)
	labels := make([]int64, n)
	state := uint64(12345)
	next := func() float64 { // a small LCG: the data need not be good noise
		state = state*6364136223846793005 + 1442695040888963407
		return float64(state>>11)/float64(1<<53) - 0.5
	}
	for i := range n {
		c := i * 7 % 10
		labels[i] = int64(c)
		r0, c0 := (c/5)*(size/2), (c%5)*(size-2)/5
		for p := range size * size {
			x[i*size*size+p] = 1.2 * next()
		}
		for r := r0; r < r0+2; r++ {
			for col := c0; col < c0+2; col++ {
				x[i*size*size+r*size+col] += 1.5
			}
		}
	}
	xs, ls := filepath.Join(dir, "x.npy"), filepath.Join(dir, "labels.npy")
	if err := npy.WriteFile(xs, tensor.FromFloats(lang.F32, []int{n, 1, size, size}, x)); err != nil {
		t.Fatal(err)
	}
	if err := npy.WriteFile(ls, tensor.FromInts(lang.I64, []int{n}, labels)); err != nil {
		t.Fatal(err)
	}
	return []string{"--data", "x=" + xs, "--data", "labels=" + ls}
}

func trainCLI(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := run(append([]string{"train", cnnModel}, args...), &stdout, &stderr); code != exitOK {
		t.Fatalf("tofuc train %s: exit %d\n%s%s", strings.Join(args, " "), code, stdout.String(), stderr.String())
	}
	return stdout.String()
}

func readNPZ(t *testing.T, path string) map[string]*tensor.Tensor {
	t.Helper()
	m, err := npy.ReadNPZ(path)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestTrainResumesExactly: a run stopped mid-epoch and resumed from its
// checkpoint ends with the same parameters, optimizer state, running
// statistics and history, bit for bit, as one never stopped; held-out
// accuracy rises.
func TestTrainResumesExactly(t *testing.T) {
	t.Setenv("TOFUC_CACHE", t.TempDir())
	dir := t.TempDir()
	data := synthImages(t, dir, 400, 8)
	common := append(data, "--set", "batch=32", "--set", "image=8", "--set", "width=4", "--epochs", "3", "--seed", "5",
		"--optimizer", "momentum", "--lr", "0.05", "--holdout", "0.2")
	whole := filepath.Join(dir, "whole")
	out := trainCLI(t, append(common, "--out", whole)...)
	for _, want := range []string{"epoch 1/3: step 10, held-out loss", "epoch 3/3: step 30", "loss curve: " + filepath.Join(whole, "loss-curve.html")} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	stopped := filepath.Join(dir, "stopped")
	out = trainCLI(t, append(common, "--out", stopped, "--stop-after", "14")...)
	ckpt := filepath.Join(stopped, "checkpoints", "step-14.npz")
	if !strings.Contains(out, "step 14: loss") || !strings.Contains(out, ckpt) {
		t.Fatalf("stopping at 14 said:\n%s", out)
	}
	trainCLI(t, append(common, "--out", stopped, "--resume", ckpt)...)
	// A stop at an epoch's end (step 20) keeps that epoch's evaluation.
	atEnd := filepath.Join(dir, "at-end")
	trainCLI(t, append(common, "--out", atEnd, "--stop-after", "20")...)
	trainCLI(t, append(common, "--out", atEnd, "--resume", filepath.Join(atEnd, "checkpoints", "step-20.npz"))...)
	var h3 pipeline.History
	readJSON(t, filepath.Join(atEnd, "history.json"), &h3)
	if len(h3.Holdout) != 3 {
		t.Errorf("stopped at an epoch's end and resumed: %d held-out results, want 3", len(h3.Holdout))
	}
	// Another recipe does not resume.
	var stdout, stderr bytes.Buffer
	if code := run(append([]string{"train", cnnModel}, append(common, "--out", atEnd, "--lr", "0.5", "--resume", ckpt)...), &stdout, &stderr); code != exitUser ||
		!strings.Contains(stderr.String(), "a checkpoint of another run") {
		t.Errorf("resuming with another --lr: exit %d, %s", code, stderr.String())
	}
	for _, file := range []string{"params.npz", "optimizer.npz"} {
		a, b := readNPZ(t, filepath.Join(whole, file)), readNPZ(t, filepath.Join(stopped, file))
		if len(a) != len(b) || len(a) == 0 {
			t.Fatalf("%s: %d arrays uninterrupted, %d resumed", file, len(a), len(b))
		}
		for name, x := range a {
			if err := tensor.Compare(b[name], x, tensor.Tolerance{}); err != nil {
				t.Errorf("%s %s: resumed differs: %v", file, name, err)
			}
		}
	}
	var h1, h2 pipeline.History
	readJSON(t, filepath.Join(whole, "history.json"), &h1)
	readJSON(t, filepath.Join(stopped, "history.json"), &h2)
	if len(h1.Losses) != 30 || len(h1.Holdout) != 3 {
		t.Fatalf("history of %d losses, %d evaluations", len(h1.Losses), len(h1.Holdout))
	}
	for i := range h1.Losses {
		if h1.Losses[i] != h2.Losses[i] {
			t.Fatalf("step %d: loss %g uninterrupted, %g resumed", i+1, h1.Losses[i], h2.Losses[i])
		}
	}
	if first, last := h1.Holdout[0].Accuracy, h1.Holdout[2].Accuracy; last <= first || last < 0.5 {
		t.Errorf("held-out accuracy %.3f after epoch 1, %.3f after epoch 3: it should rise above 0.5", first, last)
	}
	page, err := os.ReadFile(filepath.Join(whole, "loss-curve.html"))
	if err != nil || !bytes.Contains(page, []byte("<polyline")) || !bytes.Contains(page, []byte("held-out accuracy")) {
		t.Errorf("loss curve: %v\n%.300s", err, page)
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}

// TestTrainRunningStatistics: the first batch norm's running mean and
// variance after three full-batch steps equal a recomputation from the
// first convolution's weights at each step (read from the per-step
// checkpoints) and the data: running = 0.9 * running + 0.1 * batch
// statistic, the variance the population one.
func TestTrainRunningStatistics(t *testing.T) {
	t.Setenv("TOFUC_CACHE", t.TempDir())
	dir := t.TempDir()
	const n, size, width = 48, 8, 4
	data := synthImages(t, dir, n, size)
	out := filepath.Join(dir, "out")
	trainCLI(t, append(data, "--set", "batch=48", "--set", "image=8", "--set", "width=4", "--holdout", "0", "--epochs", "3",
		"--checkpoint-every", "1", "--seed", "2", "--out", out)...)
	x := readNPZ(t, filepath.Join(out, "checkpoints", "step-1.npz")) // for the shapes only
	if x["h/mean"] == nil {
		t.Fatalf("no h/mean in the checkpoint: %v", names(x))
	}
	images, err := npy.ReadFile(filepath.Join(dir, "x.npy"))
	if err != nil {
		t.Fatal(err)
	}
	mean, variance := make([]float64, width), make([]float64, width)
	for c := range variance {
		variance[c] = 1
	}
	for step := 1; step <= 3; step++ {
		// The weights the step ran with: the initial ones for step 1
		// (drawn from the seed: the first checkpoint's are after the
		// step), else the previous checkpoint's.
		var w *tensor.Tensor
		if step == 1 {
			w = initialWeight(t, out)
		} else {
			w = readNPZ(t, filepath.Join(out, "checkpoints", "step-"+strconv.Itoa(step-1)+".npz"))["h/w"]
		}
		bm, bv := convStats(images, w, n, size, width)
		for c := range width {
			mean[c] = 0.9*mean[c] + 0.1*bm[c]
			variance[c] = 0.9*variance[c] + 0.1*bv[c]
		}
		got := readNPZ(t, filepath.Join(out, "checkpoints", "step-"+strconv.Itoa(step)+".npz"))
		for c := range width {
			if d := math.Abs(got["h/mean"].F[c] - mean[c]); d > 1e-5*(1+math.Abs(mean[c])) {
				t.Errorf("step %d: running mean[%d] %g, recomputed %g", step, c, got["h/mean"].F[c], mean[c])
			}
			if d := math.Abs(got["h/var"].F[c] - variance[c]); d > 1e-5*(1+variance[c]) {
				t.Errorf("step %d: running var[%d] %g, recomputed %g", step, c, got["h/var"].F[c], variance[c])
			}
		}
	}
}

// initialWeight is h/w as tofuc draws it from seed 2 (eval with no steps
// writes the parameters it drew).
func initialWeight(t *testing.T, dir string) *tensor.Tensor {
	t.Helper()
	var stdout, stderr bytes.Buffer
	outDir := filepath.Join(dir, "init")
	if code := run([]string{"eval", cnnModel, "--set", "batch=48", "--set", "image=8", "--set", "width=4", "--seed", "2",
		"--random-inputs", "--out", outDir}, &stdout, &stderr); code != exitOK {
		t.Fatalf("eval: %s", stderr.String())
	}
	return readNPZ(t, filepath.Join(outDir, "params.npz"))["h/w"]
}

// convStats is the per-channel mean and population variance of a 3x3
// convolution with padding 1 of the images.
func convStats(x, w *tensor.Tensor, n, size, cout int) (mean, variance []float64) {
	mean, variance = make([]float64, cout), make([]float64, cout)
	vals := make([][]float64, cout)
	for i := range n {
		for c := range cout {
			for r := range size {
				for q := range size {
					var s float64
					for dr := -1; dr <= 1; dr++ {
						for dq := -1; dq <= 1; dq++ {
							if r+dr < 0 || r+dr >= size || q+dq < 0 || q+dq >= size {
								continue
							}
							s += x.F[i*size*size+(r+dr)*size+q+dq] * w.F[c*9+(dr+1)*3+dq+1]
						}
					}
					vals[c] = append(vals[c], s)
				}
			}
		}
	}
	for c, v := range vals {
		for _, s := range v {
			mean[c] += s / float64(len(v))
		}
		for _, s := range v {
			variance[c] += (s - mean[c]) * (s - mean[c]) / float64(len(v))
		}
	}
	return mean, variance
}

func names(m map[string]*tensor.Tensor) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestTrainRefuses: wrong datasets, flags and checkpoints are errors
// that say what to do, before any step runs.
func TestTrainRefuses(t *testing.T) {
	dir := t.TempDir()
	data := synthImages(t, dir, 40, 8)
	other := filepath.Join(dir, "other")
	os.MkdirAll(other, 0o755)
	odd := synthImages(t, other, 30, 8)
	small := []string{"--set", "batch=8", "--set", "image=8", "--set", "width=2"}
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--out", dir}, exitUsage, "--data is required"},
		{append(data, "--out", dir, "--holdout", "0.9"), exitUsage, "--holdout must be 0 to 0.5"},
		{append(data, "--out", dir, "--epochs", "0"), exitUsage, "--epochs must be at least 1"},
		{append(data, "--out", dir, "--optimizer", "adagrad"), exitUsage, `unknown optimizer "adagrad"`},
		{append(append([]string{"--data", "x=" + filepath.Join(dir, "x.npy")}, small...), "--out", dir), exitUser, "the dataset has no array for input labels"},
		{append(append(data, "--data", "y="+filepath.Join(dir, "x.npy")), append(small, "--out", dir)...), exitUser, "the training graph has no input y"},
		{append(append([]string{"--data", "x=" + filepath.Join(dir, "x.npy"), odd[2], odd[3]}, small...), "--out", dir), exitUser, "has 30 samples, the others 40"},
		{append(data, "--set", "image=12", "--set", "batch=8", "--out", dir), exitUser, "samples of [1 12 12]"},
		{append(append(data, small...), "--out", dir, "--resume", filepath.Join(dir, "none.npz")), exitUser, "a checkpoint is STEP.npz with STEP.json beside it"},
		{append(append(data, small...), "--out", dir, "--set", "batch=64"), exitUser, "make no mini-batch of 64"},
	}
	for _, c := range cases {
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"train", cnnModel}, c.args...), &stdout, &stderr)
		if code != c.code || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("train %s: exit %d, %q; want exit %d with %q", strings.Join(c.args, " "), code, stderr.String(), c.code, c.want)
		}
	}
}

// TestFusedBackwardStagesBindTheirOwnInputs: the backward instances
// derived from one forward instance share its input tensors; fused into
// one kernel, each stage must read its own node's values. x * a * w
// trained on cpu gave a the gradient of w (the fused kernel read a where
// the first stage reads w). Every model's parameters after two steps on
// cpu equal the interpreter's.
func TestFusedBackwardStagesBindTheirOwnInputs(t *testing.T) {
	t.Setenv("TOFUC_CACHE", t.TempDir())
	dir := t.TempDir()
	for i, body := range []string{"x * a * w", "relu(x * a) * w", "(x * a) * (x * w)", "tanh(x * a * w) * a"} {
		path := filepath.Join(dir, "m"+strconv.Itoa(i)+".tdl")
		src := "model m(x: f32[8]) {\n    a = param f32[8] init uniform(1.0, 2.0)\n    w = param f32[8] init uniform(-1.0, 1.0)\n    return " + body + "\n}\n"
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		params := map[string]map[string]*tensor.Tensor{}
		for _, backend := range []string{"interp", "cpu"} {
			out := filepath.Join(dir, strconv.Itoa(i)+backend)
			var stdout, stderr bytes.Buffer
			if code := run([]string{"eval", path, "--train", "--loss", "mse", "--steps", "2", "--lr", "0.1", "--random-inputs", "--seed", "4",
				"--backend", backend, "--out", out}, &stdout, &stderr); code != exitOK {
				t.Fatalf("%s on %s: %s", body, backend, stderr.String())
			}
			params[backend] = readNPZ(t, filepath.Join(out, "params.npz"))
		}
		for _, name := range []string{"a", "w"} {
			if err := tensor.Compare(params["cpu"][name], params["interp"][name], tensor.Tolerance{Abs: 1e-6, Rel: 1e-5}); err != nil {
				t.Errorf("%s: parameter %s on cpu: %v", body, name, err)
			}
		}
	}
}

// Training with a learning-rate schedule and gradient clipping computes
// the same parameters on the compiled backends as on the interpreter
// (Adam with the schedule alone), and differs from training without
// them.
func TestScheduleAndClippingCompiled(t *testing.T) {
	t.Setenv("TOFUC_CACHE", t.TempDir())
	dir := t.TempDir()
	params := map[string]map[string]*tensor.Tensor{}
	for _, tc := range []struct{ name, backend, optimizer string }{
		{"plain", "interp", "momentum"}, {"interp", "interp", "momentum"}, {"cpu", "cpu", "momentum"}, {"simt", "simt", "momentum"}, {"adam", "cpu", "adam"}, {"adam-interp", "interp", "adam"},
	} {
		out := filepath.Join(dir, tc.name)
		args := []string{"eval", "../../examples/mlp.tdl", "--set", "batch=4", "--set", "hidden=16", "--train", "--optimizer", tc.optimizer, "--steps", "3", "--lr", "0.1",
			"--random-inputs", "--seed", "4", "--backend", tc.backend, "--out", out}
		switch {
		case tc.optimizer == "adam":
			// Not clipped: gradients shrunk near Adam's epsilon make its
			// step as uncertain as their own last bits.
			args = append(args, "--lr-schedule", "cosine,warmup=1,total=4,final=0.2")
		case tc.name != "plain":
			args = append(args, "--lr-schedule", "cosine,warmup=1,total=4,final=0.2", "--clip-norm", "0.05")
		}
		var stdout, stderr bytes.Buffer
		if code := run(args, &stdout, &stderr); code != exitOK {
			t.Fatalf("%s: %s", tc.name, stderr.String())
		}
		params[tc.name] = readNPZ(t, filepath.Join(out, "params.npz"))
	}
	for _, pair := range [][2]string{{"cpu", "interp"}, {"simt", "interp"}, {"adam", "adam-interp"}} {
		for name, want := range params[pair[1]] {
			if err := tensor.Compare(params[pair[0]][name], want, tensor.Tolerance{Abs: 1e-6, Rel: 1e-5}); err != nil {
				t.Errorf("%s: parameter %s: %v", pair[0], name, err)
			}
		}
	}
	if tensor.Compare(params["interp"]["w1"], params["plain"]["w1"], tensor.Tolerance{Abs: 1e-6, Rel: 1e-5}) == nil {
		t.Errorf("the schedule and clipping changed nothing")
	}
}
