package shared

import (
	"os"
	"path/filepath"
	"testing"
)

func TestFindHonoursTOFUC_SHARED(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("TOFUC_SHARED", dir)
	got, err := find()
	if err != nil || got != filepath.Clean(dir) {
		t.Fatalf("find() = %q, %v; want %q", got, err, dir)
	}
	t.Setenv("TOFUC_SHARED", filepath.Join(dir, "missing"))
	if _, err := find(); err == nil {
		t.Fatal("a missing folder was accepted")
	}
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o644)
	t.Setenv("TOFUC_SHARED", file)
	if _, err := find(); err == nil {
		t.Fatal("a file was accepted as the shared folder")
	}
}

// TestSharedDataPresent reads the shared data the way every later test
// does: it skips without it, and fails under CI=true.
func TestSharedDataPresent(t *testing.T) {
	dir := Dir(t)
	for _, sub := range []string{"onnx/node", "onnx/light"} {
		if st, err := os.Stat(filepath.Join(dir, sub)); err != nil || !st.IsDir() {
			t.Errorf("%s has no %s folder", dir, sub)
		}
	}
}
