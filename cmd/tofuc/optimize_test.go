package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tofuc/analysis/check"
	"tofuc/internal/shared"
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
	prog, err := check.NewProgram()
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
