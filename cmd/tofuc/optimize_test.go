package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"tofuc/parser"

	"tofuc/analysis/check"
	"tofuc/internal/shared"
	"tofuc/lang"
	"tofuc/runtime/npy"
	"tofuc/runtime/tensor"
)

// TestOptimizeONNX: tofuc optimize imports an ONNX model, lowers its
// estimated cost, writes the optimised model (which checks, its weights
// beside it) and starts a report with only the optimize section.
func TestOptimizeONNX(t *testing.T) {
	model := filepath.Join(shared.Dir(t), "onnx", "light-random", "light_squeezenet_random.onnx")
	dir := t.TempDir()
	out := filepath.Join(dir, "sq.tdl")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"optimize", model, "--max-graphs", "8", "-o", out, "--report", dir}, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "conv_bias_relu_concat") {
		t.Errorf("no fire module fused:\n%s", stdout.String())
	}
	prog, err := check.NewProgram(parser.Parse)
	if err != nil {
		t.Fatal(err)
	}
	m, err := prog.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Model("", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "sq.npz")); err != nil {
		t.Errorf("no weights beside the optimised model: %v", err)
	}
	var rep struct {
		Devices  int `json:"devices"`
		Sections []struct {
			Name string `json:"name"`
			Data struct {
				Before, After struct {
					Seconds float64 `json:"seconds"`
					Kernels int     `json:"kernels"`
				}
				Rules []struct{ Rule string } `json:"rules_applied"`
			} `json:"data"`
		} `json:"sections"`
	}
	data, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Devices != 0 || len(rep.Sections) != 1 || rep.Sections[0].Name != "optimize" {
		t.Fatalf("report: %s", data)
	}
	d := rep.Sections[0].Data
	if d.After.Seconds >= d.Before.Seconds || d.After.Kernels >= d.Before.Kernels || len(d.Rules) == 0 {
		t.Errorf("optimize section: %+v", d)
	}
	txt, err := os.ReadFile(filepath.Join(dir, "report.txt"))
	if err != nil || !strings.Contains(string(txt), "Graph optimisation") || strings.Contains(string(txt), "baseline") {
		t.Errorf("report.txt (%v):\n%s", err, txt)
	}
}

// TestOptimizeAddsToPartitionReport: the optimize section joins the
// report tofuc partition wrote, which keeps its partition; a report of
// another model is refused.
func TestOptimizeAddsToPartitionReport(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	if code := run([]string{"partition", "../../examples/mlp.tdl", "--devices", "2", "--report", dir}, &stdout, &stderr); code != exitOK {
		t.Fatalf("partition: exit %d: %s", code, stderr.String())
	}
	if code := run([]string{"optimize", "../../examples/mlp.tdl", "--max-graphs", "5", "--report", dir}, &stdout, &stderr); code != exitOK {
		t.Fatalf("optimize: exit %d: %s", code, stderr.String())
	}
	var rep struct {
		Devices  int `json:"devices"`
		Sections []struct {
			Name string `json:"name"`
		} `json:"sections"`
	}
	data, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Devices != 2 || len(rep.Sections) != 1 || rep.Sections[0].Name != "optimize" {
		t.Errorf("report: devices %d, sections %+v", rep.Devices, rep.Sections)
	}
	html, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil || !strings.Contains(string(html), `id="optimize"`) || !strings.Contains(string(html), `id="tilings"`) {
		t.Errorf("report.html lacks the optimize section or the partition (%v)", err)
	}
	stderr.Reset()
	if code := run([]string{"optimize", "../../examples/sru.tdl", "--max-graphs", "5", "--report", dir}, &stdout, &stderr); code != exitUser || !strings.Contains(stderr.String(), "report of model mlp") {
		t.Errorf("another model's report: exit %d, %s", code, stderr.String())
	}
}

// TestOptimizedModelStandsAlone: the model optimize -o writes checks on
// its own although the model calls its own operator, keeps the names of
// its inputs, parameters and outputs, and evaluates equal to the model it
// came from (the rewrite reorders a sum: the Reordered tolerance).
func TestOptimizedModelStandsAlone(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "own.tdl")
	src := `op twice(x: [*S]) -> [*S] = lambda *i: x[*i] * 2.0

model own<batch = 4>(x: f32[batch, 8]) {
    w1 = param f32[8, 8]
    w2 = param f32[8, 8]
    y = twice(relu(matmul(x, w1) + matmul(x, w2)))
    return y
}
`
	if err := os.WriteFile(model, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	opt := filepath.Join(dir, "elsewhere", "own-opt.tdl")
	os.MkdirAll(filepath.Dir(opt), 0o755)
	var stdout, stderr bytes.Buffer
	if code := run([]string{"optimize", model, "--max-graphs", "2", "-o", opt}, &stdout, &stderr); code != exitOK {
		t.Fatalf("optimize: exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "matmul_distrib") {
		t.Fatalf("the sum of products was not rewritten:\n%s", stdout.String())
	}
	if code := run([]string{"optimize", model, "-o", model}, &stdout, &stderr); code != exitUsage {
		t.Errorf("optimize -o over the model's own file: exit %d", code)
	}
	outputs := func(path string) map[string]*tensor.Tensor {
		out := filepath.Join(dir, "eval-"+filepath.Base(path))
		var stdout, stderr bytes.Buffer
		if code := run([]string{"eval", path, "--random-inputs", "--seed", "3", "--out", out}, &stdout, &stderr); code != exitOK {
			t.Fatalf("eval %s: exit %d: %s", path, code, stderr.String())
		}
		y, err := npy.ReadFile(filepath.Join(out, "y.npy"))
		if err != nil {
			t.Fatalf("eval %s: %v (outputs: %s)", path, err, stdout.String())
		}
		params, err := npy.ReadNPZ(filepath.Join(out, "params.npz"))
		if err != nil {
			t.Fatal(err)
		}
		params["y"] = y
		return params
	}
	want, got := outputs(model), outputs(opt)
	for _, name := range []string{"w1", "w2"} {
		if err := tensor.Compare(got[name], want[name], tensor.Exact); err != nil {
			t.Errorf("parameter %s: %v", name, err)
		}
	}
	if err := tensor.Compare(got["y"], want["y"], tensor.Reordered(lang.F32, 16)); err != nil {
		t.Errorf("y: %v", err)
	}
}

// TestOptimizeKeepsParameterNames: the optimised model's parameters have
// the original's names (a block's `h.1/w` too, through a name clause),
// so the original's params.npz fits it, and the same seed draws the same
// initial values.
func TestOptimizeKeepsParameterNames(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "cnn.tdl")
	sets := []string{"--set", "width=2", "--set", "batch=2", "--set", "image=8"}
	var stdout, stderr bytes.Buffer
	if code := run(append([]string{"optimize", "../../examples/cnn.tdl", "--max-graphs", "4", "-o", out}, sets...), &stdout, &stderr); code != exitOK {
		t.Fatalf("optimize: exit %d: %s", code, stderr.String())
	}
	evalParams := func(args ...string) map[string]*tensor.Tensor {
		o := filepath.Join(dir, "eval"+strconv.Itoa(len(args)))
		stdout.Reset()
		stderr.Reset()
		if code := run(append(append([]string{"eval"}, args...), "--random-inputs", "--seed", "3", "--out", o), &stdout, &stderr); code != exitOK {
			t.Fatalf("eval %v: exit %d: %s", args, code, stderr.String())
		}
		p, err := npy.ReadNPZ(filepath.Join(o, "params.npz"))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	original := evalParams(append([]string{"../../examples/cnn.tdl"}, sets...)...)
	optimised := evalParams(out)
	if len(optimised) != len(original) {
		t.Fatalf("%d parameters optimised, %d originally", len(optimised), len(original))
	}
	for name, want := range original {
		if err := tensor.Compare(optimised[name], want, tensor.Tolerance{}); err != nil {
			t.Errorf("parameter %s: %v", name, err)
		}
	}
	if _, ok := original["h.1/w"]; !ok {
		t.Fatalf("no h.1/w among %d parameters: the test no longer checks a block's name", len(original))
	}
	// The original's parameters fit the optimised model as they are.
	evalParams(out, "--params", filepath.Join(dir, "eval"+strconv.Itoa(len(sets)+1), "params.npz"))
}

// TestOptimizeKeepsUpdates: the optimised model states its parameters'
// updates again (batch norm's running statistics), so that it trains as
// the original does.
func TestOptimizeKeepsUpdates(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "cnn.tdl")
	sets := []string{"--set", "train=true", "--set", "batch=4", "--set", "image=8", "--set", "width=2"}
	status, _, stderr := tofuc(append([]string{"optimize", "../../examples/cnn.tdl", "--max-graphs", "8", "-o", out}, sets...)...)
	if status != exitOK {
		t.Fatalf("optimize: exit %d: %s", status, stderr)
	}
	src, err := os.ReadFile(out)
	if err != nil || strings.Count(string(src), "update ") != 4 {
		t.Fatalf("the optimised model states %d updates, want 4 (%v):\n%s", strings.Count(string(src), "update "), err, src)
	}
	trained := func(args ...string) map[string]*tensor.Tensor {
		o := filepath.Join(dir, strconv.Itoa(len(args)))
		if status, _, stderr := tofuc(append(append([]string{"eval"}, args...), "--train", "--steps", "2", "--random-inputs", "--seed", "2", "--out", o)...); status != exitOK {
			t.Fatalf("eval --train %v: %s", args, stderr)
		}
		p, err := npy.ReadNPZ(filepath.Join(o, "params.npz"))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	want, got := trained(append([]string{"../../examples/cnn.tdl"}, sets...)...), trained(out)
	for name, w := range want {
		if err := tensor.Compare(got[name], w, tensor.Tolerance{Abs: 1e-6, Rel: 1e-5}); err != nil {
			t.Errorf("%s after two steps: %v", name, err)
		}
	}
}
