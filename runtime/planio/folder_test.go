package planio

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tofuc/lang"
	"tofuc/runtime/npy"
	"tofuc/runtime/tensor"
)

func vector(t *testing.T, vs ...float64) *tensor.Tensor {
	t.Helper()
	x := tensor.New(lang.F32, []int{len(vs)})
	for i, v := range vs {
		x.SetFlat(i, v)
	}
	return x
}

// TestFolderReplacesTheLastRun: a run's Write removes the files the
// last run wrote that it does not write, and leaves other files alone.
func TestFolderReplacesTheLastRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	var first Folder
	first.Tensor("inputs/x.npy", "input x", vector(t, 1, 2))
	first.Outputs(map[string]*tensor.Tensor{"y": vector(t, 3)})
	if err := first.Write(dir, io.Discard); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o644)
	var second Folder
	second.Outputs(map[string]*tensor.Tensor{"y": vector(t, 4)})
	var said strings.Builder
	if err := second.Write(dir, &said); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "inputs", "x.npy")); err == nil {
		t.Errorf("the first run's input survived the second run")
	}
	y, err := npy.ReadFile(filepath.Join(dir, "y.npy"))
	if err != nil || y.Flat(0) != 4 {
		t.Errorf("y.npy is not the second run's: %v, %v", y, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "notes.txt")); string(b) != "mine" {
		t.Errorf("a file no run wrote was changed")
	}
	if err := first.Write(dir, io.Discard); err != nil {
		t.Fatal(err)
	}
	var third Folder // reads the first run's input
	third.Read(filepath.Join(dir, "inputs", "x.npy"))
	third.Outputs(map[string]*tensor.Tensor{"y": vector(t, 5)})
	if err := third.Write(dir, io.Discard); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "inputs", "x.npy")); err != nil {
		t.Errorf("a run removed the input it read: %v", err)
	}
	if !strings.Contains(said.String(), "y: f32[1] ") || !strings.Contains(said.String(), "-> "+filepath.Join(dir, "y.npy")) {
		t.Errorf("the run said %q", said.String())
	}
}

// TestFolderWritesNothingWhenRefused: a folder where a file goes makes
// the whole write fail, leaving the folder as it was.
func TestFolderWritesNothingWhenRefused(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "z.npy"), 0o755)
	var f Folder
	f.Outputs(map[string]*tensor.Tensor{"a": vector(t, 1), "z": vector(t, 2)})
	err := f.Write(dir, io.Discard)
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "z.npy")) {
		t.Fatalf("Write over a folder: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("a refused write left %d entries, want only the folder in the way", len(entries))
	}
}
