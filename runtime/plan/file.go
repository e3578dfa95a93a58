package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
)

// NewFile describes the compiled file rel of the plan's folder dir (its
// length and SHA-256).
func NewFile(dir, rel string) (File, error) {
	data, err := os.ReadFile(filepath.Join(dir, rel))
	if err != nil {
		return File{}, err
	}
	return FileOf(rel, data), nil
}

// FileOf describes the file rel holding data.
func FileOf(rel string, data []byte) File {
	sum := sha256.Sum256(data)
	return File{Path: rel, Bytes: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}
}

// Read reads the file from the plan's folder dir and checks its length
// and SHA-256: a file truncated, overwritten or from another compile is
// an error naming it, never loaded.
func (f File) Read(dir string) ([]byte, error) {
	path := filepath.Join(dir, f.Path)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if got := FileOf(f.Path, data); got != f {
		return nil, fmt.Errorf("%s is not the file the plan was compiled with (%d bytes, SHA-256 %.12s..., the plan records %d bytes, %.12s...): compile the plan again", path, got.Bytes, got.SHA256, f.Bytes, f.SHA256)
	}
	return data, nil
}

// Check reads and checks the file (Read) and returns its path.
func (f File) Check(dir string) (string, error) {
	if _, err := f.Read(dir); err != nil {
		return "", err
	}
	return filepath.Join(dir, f.Path), nil
}
