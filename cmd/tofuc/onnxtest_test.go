package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestExpandTestPaths: a suite's root expands to every test at any depth
// (test directories and .onnx files), a test directory stays one test.
func TestExpandTestPaths(t *testing.T) {
	root := t.TempDir()
	for _, f := range []string{
		"node/relu/model.onnx", "node/relu/test_data_set_0/input_0.pb",
		"node/add/model.onnx",
		"light/light_a.onnx", "light/light_a_output_0.pb", "light/README.md",
		"empty/.keep",
	} {
		path := filepath.Join(root, f)
		os.MkdirAll(filepath.Dir(path), 0o755)
		os.WriteFile(path, nil, 0o644)
	}
	got := expandTestPaths([]string{root, filepath.Join(root, "node", "relu")})
	want := []string{
		filepath.Join(root, "light", "light_a.onnx"),
		filepath.Join(root, "node", "add"),
		filepath.Join(root, "node", "relu"),
		filepath.Join(root, "node", "relu"),
	}
	if !slices.Equal(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
	if got := expandTestPaths([]string{filepath.Join(root, "empty")}); !slices.Equal(got, []string{filepath.Join(root, "empty")}) {
		t.Errorf("a folder without tests: %q", got)
	}
}
