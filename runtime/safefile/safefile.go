// Package safefile writes files whole or not at all: the bytes go to a
// temporary file beside the target, which is renamed onto it once
// written and closed. A reader, or another writer of the same path,
// sees the old file or the new one, never a mix; a writer that fails or
// is killed leaves the target as it was (and at most its temporary
// file, named TempPrefix...).
//
// Files are read only when they are regular (Open, ReadFile): a
// directory is refused at once, and a named pipe or a device, which
// would block their reader or never end, without waiting on them.
package safefile

import (
	"bufio"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"tofuc/lang"
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

// Open opens the file at path for reading, refusing one that is not a
// regular file with an error naming it. It never blocks: a named pipe is
// opened without waiting for a writer, then refused.
func Open(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	info, err := f.Stat()
	if err == nil && !info.Mode().IsRegular() {
		err = fmt.Errorf("%s is %s, not a regular file", path, kindOf(info.Mode()))
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// kindOf names the kind of file a mode is, for messages.
func kindOf(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "something else"
}

// ReadFile reads the regular file at path (Open), refusing, before it
// reads it, one of more than limit bytes (a bound on the memory its
// reader takes).
func ReadFile(path string, limit int64) ([]byte, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if info.Size() > limit {
		return nil, fmt.Errorf("%s is %s, more than the %s it may have", path, lang.FormatBytes(info.Size()), lang.FormatBytes(limit))
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s grew beyond the %s it may have while it was read", path, lang.FormatBytes(limit))
	}
	return data, nil
}
