// Package shared locates the project's external test data (the ONNX
// backend tests and real CNN graphs in ../shared beside the checkout) for
// tests: $TOFUC_SHARED, else the folder `shared` beside the repository.
// Tests skip when it is missing, except under CI=true, where its absence is
// a failure.
package shared

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// Dir returns the shared data folder, or skips t (fails it under CI=true)
// when there is none.
func Dir(t testing.TB) string {
	t.Helper()
	dir, err := find()
	if err == nil {
		return dir
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("shared test data: %v (CI=true requires it)", err)
	}
	t.Skipf("shared test data: %v", err)
	return ""
}

func find() (string, error) {
	dir := os.Getenv("TOFUC_SHARED")
	if dir == "" {
		dir = filepath.Join(repoRoot(), "..", "shared")
	}
	st, err := os.Stat(dir)
	if err != nil {
		return "", err
	}
	if !st.IsDir() {
		return "", &os.PathError{Op: "open", Path: dir, Err: os.ErrInvalid}
	}
	return filepath.Clean(dir), nil
}

// repoRoot is the repository's top folder, found from this source file.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}
