package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"tofuc/frontend/onnx"
	"tofuc/internal/shared"
	"tofuc/runtime/npy"
	"tofuc/runtime/tensor"
)

// TestImportThenEval imports an ONNX model with its weights, checks that
// the TDL is formatted and clean, evaluates the .tdl (its .npz loaded from
// beside it) and the .onnx directly, and compares both with ONNX Runtime's
// outputs.
func TestImportThenEval(t *testing.T) {
	dir := filepath.Join(shared.Dir(t), "onnx", "light-random")
	model := filepath.Join(dir, "light_squeezenet_random.onnx")
	tmp := t.TempDir()
	tdl := filepath.Join(tmp, "squeezenet.tdl")
	if status, out, errOut := tofuc("import", model, "-o", tdl); status != exitOK || !strings.Contains(out, "parameters -> ") {
		t.Fatalf("import: status %d\n%s%s", status, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(tmp, "squeezenet.npz")); err != nil {
		t.Fatal(err)
	}
	if status, out, errOut := tofuc("fmt", "-l", tdl); status != exitOK || out != "" {
		t.Errorf("fmt -l: status %d, %q %s", status, out, errOut)
	}
	if status, _, errOut := tofuc("check", tdl); status != exitOK {
		t.Fatalf("check: %s", errOut)
	}
	in, err := onnx.ReadTensorFile(filepath.Join(dir, "light_squeezenet_random_input_0.pb"))
	if err != nil {
		t.Fatal(err)
	}
	inPath := filepath.Join(tmp, "data.npy")
	if err := npy.WriteFile(inPath, in); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{tdl, model} {
		out := filepath.Join(tmp, filepath.Base(m)+".out")
		if status, stdout, errOut := tofuc("eval", m, "--in", "data_0="+inPath, "--out", out); status != exitOK {
			t.Fatalf("eval %s: status %d\n%s%s", m, status, stdout, errOut)
		}
		for i, name := range []string{"softmaxout_1", "r65"} {
			got, err := npy.ReadFile(filepath.Join(out, name+".npy"))
			if err != nil {
				t.Fatal(err)
			}
			want, err := onnx.ReadTensorFile(filepath.Join(dir, "light_squeezenet_random_output_"+strconv.Itoa(i)+".pb"))
			if err != nil {
				t.Fatal(err)
			}
			if err := tensor.Compare(got, want, tensor.External); err != nil {
				t.Errorf("eval %s, %s: %v", filepath.Base(m), name, err)
			}
		}
	}
}

func TestImportErrors(t *testing.T) {
	tmp := t.TempDir()
	garbage := filepath.Join(tmp, "garbage.onnx")
	os.WriteFile(garbage, []byte("\x0a\xff\xff\xff not protobuf"), 0o644)
	for _, tc := range []struct {
		args   []string
		status int
		stderr string
	}{
		{[]string{"import"}, exitUsage, "expected one MODEL.onnx"},
		{[]string{"import", garbage, "-o", filepath.Join(tmp, "x.txt")}, exitUsage, "-o must name a .tdl file"},
		{[]string{"import", garbage}, exitUser, "not an ONNX model"},
		{[]string{"check", garbage}, exitUser, "not an ONNX model"},
		{[]string{"import", filepath.Join(tmp, "missing.onnx")}, exitUser, "no such file"},
		{[]string{"import", garbage, "--known", "x"}, exitUsage, "want NAME=PATH"},
		{[]string{"onnx-test", garbage}, exitUser, ""},
		{[]string{"onnx-test", "--backend", "gpu", garbage}, exitUsage, "unknown backend"},
	} {
		status, _, errOut := tofuc(tc.args...)
		if status != tc.status || !strings.Contains(errOut, tc.stderr) {
			t.Errorf("%v: status %d, stderr %q; want %d and %q", tc.args, status, errOut, tc.status, tc.stderr)
		}
	}
}

func TestONNXTestReportsEveryPathOnce(t *testing.T) {
	dir := filepath.Join(shared.Dir(t), "onnx")
	tmp := t.TempDir()
	empty := filepath.Join(tmp, "empty")
	os.Mkdir(empty, 0o755)
	status, out, _ := tofuc("onnx-test", filepath.Join(dir, "node", "relu"), filepath.Join(dir, "node", "equal_string_broadcast"), empty)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	want := []string{"PASS relu", "UNSUPPORTED equal_string_broadcast: \"x\": element type STRING", "FAIL empty: ", "1 passed, 1 failed, 1 unsupported"}
	if status != exitUser || len(lines) != len(want) {
		t.Fatalf("status %d, output:\n%s", status, out)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d: %q, want prefix %q", i, lines[i], w)
		}
	}
}
