package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"tofuc/lang"
	"tofuc/runtime/safefile"
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

// MaxFileBytes bounds a compiled file (a module of kernels: a few MiB):
// Read refuses to read a larger one.
const MaxFileBytes = 1 << 30

// Read reads the file from the plan's folder dir and checks its length
// and SHA-256: a file truncated, overwritten or from another compile is
// an error naming it, never loaded. Its length is compared before it is
// read, and no more than that is read: the bytes returned are those
// checked, which a runtime loads rather than the file again (which may
// have changed since).
func (f File) Read(dir string) ([]byte, error) {
	path := filepath.Join(dir, f.Path)
	if f.Bytes > MaxFileBytes {
		return nil, fmt.Errorf("%s: the plan records %s, more than the %s a compiled file may have: compile the plan again", path, lang.FormatBytes(f.Bytes), lang.FormatBytes(MaxFileBytes))
	}
	file, err := safefile.Open(path)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	info, err := file.Stat()
	if err != nil {
		return nil, err
	}
	if info.Size() != f.Bytes {
		return nil, f.differs(path, fmt.Sprintf("%d bytes", info.Size()))
	}
	data := make([]byte, f.Bytes)
	if _, err := io.ReadFull(file, data); err != nil {
		return nil, fmt.Errorf("%s changed while it was read: %w", path, err)
	}
	if got := FileOf(f.Path, data); got != f {
		return nil, f.differs(path, fmt.Sprintf("%d bytes, SHA-256 %.12s...", got.Bytes, got.SHA256))
	}
	return data, nil
}

// Open opens the file in the plan's folder dir and checks its length
// and SHA-256, reading it once without holding it in memory (the
// parameters, which may be larger than a compiled file may): the file
// returned is the one checked, which a rename over its path since does
// not change.
func (f File) Open(dir string) (*os.File, error) {
	path := filepath.Join(dir, f.Path)
	file, err := safefile.Open(path)
	if err != nil {
		return nil, err
	}
	if err := f.check(path, file); err != nil {
		file.Close()
		return nil, err
	}
	return file, nil
}

// check compares the open file at path with f.
func (f File) check(path string, file *os.File) error {
	info, err := file.Stat()
	if err != nil {
		return err
	}
	if info.Size() != f.Bytes {
		return f.differs(path, fmt.Sprintf("%d bytes", info.Size()))
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(file, 0, f.Bytes)); err != nil {
		return err
	}
	if sum := hex.EncodeToString(h.Sum(nil)); sum != f.SHA256 {
		return f.differs(path, fmt.Sprintf("%d bytes, SHA-256 %.12s...", f.Bytes, sum))
	}
	return nil
}

// differs is the error of a file at path that is not f, as found.
func (f File) differs(path, found string) error {
	return fmt.Errorf("%s is not the file the plan was compiled with (%s, the plan records %d bytes, %.12s...): compile the plan again", path, found, f.Bytes, f.SHA256)
}
