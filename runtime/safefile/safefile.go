// Package safefile writes files whole or not at all: the bytes go to a
// temporary file beside the target, which is renamed onto it once
// written and closed. A reader, or another writer of the same path,
// sees the old file or the new one, never a mix; a writer that fails or
// is killed leaves the target as it was (and at most its temporary
// file, named TempPrefix...).
package safefile

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
)

// TempPrefix starts the names of the temporary files.
const TempPrefix = ".tofuc-tmp-"

// WriteFile writes data to path with permissions perm, whole or not at
// all.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	return Write(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// Write writes what write writes to path with permissions perm, whole or
// not at all.
func Write(path string, perm os.FileMode, write func(w io.Writer) error) error {
	f, err := os.CreateTemp(filepath.Dir(path), TempPrefix+"*")
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	err = write(bw)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = f.Chmod(perm)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}
