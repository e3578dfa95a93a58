package npy

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"tofuc/lang"
	"tofuc/runtime/native"
)

// hugeNPY writes, at path, the header of a .npy array of shape
// (1000000, 1000000) f32 followed by its 4 TB of data, sparse (nothing
// stored): a file whose reading would take all memory.
func hugeNPY(t *testing.T, path string) {
	t.Helper()
	hdr := raw(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1000000, 1000000), }", nil)
	if err := os.WriteFile(path, hdr, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, int64(len(hdr))+4e12); err != nil {
		t.Skip(err)
	}
}

// TestFileDataExact: a .npy file whose data is longer than its header
// declares (twice the rows) is refused, not read in part.
func TestFileDataExact(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.npy")
	os.WriteFile(path, raw(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (8, 784), }", make([]byte, 16*784*4)), 0o644)
	if _, err := ReadFile(path); err == nil || !strings.Contains(err.Error(), path+": npy: shape [8 784] of f32 is 25088 bytes of data, but 50176 follow the header") {
		t.Errorf("data longer than declared: %v", err)
	}
}

// TestVet: an array the vet refuses is not read: a sparse 4 TB file
// (whose data the reader would allocate) and an .npz member declaring
// 2^40 bytes of data are refused with the vet's error, at once.
func TestVet(t *testing.T) {
	dir := t.TempDir()
	huge := filepath.Join(dir, "huge.npy")
	hugeNPY(t, huge)
	want := func(name string, dt lang.DType, shape []int) error {
		if len(shape) != 2 || shape[0] != 8 {
			return fmt.Errorf("%q is %s%v, not f32[8 784]", name, dt, shape)
		}
		return nil
	}
	if _, err := ReadFileVetted(huge, want); err == nil || !strings.Contains(err.Error(), `huge.npy: "" is f32[1000000 1000000], not f32[8 784]`) {
		t.Errorf("a vetted .npy file: %v", err)
	}
	npz := filepath.Join(dir, "big.npz")
	os.WriteFile(npz, bigMember(t, "big.npy", 1<<38), 0o644)
	if _, err := ReadNPZVetted(npz, want); err == nil || !strings.Contains(err.Error(), `npz member "big.npy": "big" is f32[274877906944], not f32[8 784]`) {
		t.Errorf("a vetted .npz member: %v", err)
	}
}

// bigMember is an .npz archive holding one deflated member, name, that
// declares the header of a f32 array of n elements and its data, and
// holds the header and 1 MiB of zeros.
func bigMember(t *testing.T, name string, n int64) []byte {
	t.Helper()
	hdr := raw(1, fmt.Sprintf("{'descr': '<f4', 'fortran_order': False, 'shape': (%d,), }", n), nil)
	size := int64(len(hdr)) + 4*n
	var comp bytes.Buffer
	fw, _ := flate.NewWriter(&comp, flate.BestSpeed)
	fw.Write(hdr)
	fw.Write(make([]byte, 1<<20))
	fw.Close()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	w, err := zw.CreateRaw(&zip.FileHeader{Name: name, Method: zip.Deflate, CompressedSize64: uint64(comp.Len()), UncompressedSize64: uint64(size)})
	if err != nil {
		t.Fatal(err)
	}
	w.Write(comp.Bytes())
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestMemoryBudget: arrays that would take more memory than this machine
// has available (a sparse 4 TB .npy file whose header matches its
// length, an .npz member declaring 2^40 bytes of data) are refused before their
// data is read, with both sizes.
func TestMemoryBudget(t *testing.T) {
	if _, ok := native.AvailableMemory(); !ok {
		t.Skip("this machine's available memory is unknown")
	}
	dir := t.TempDir()
	huge := filepath.Join(dir, "huge.npy")
	hugeNPY(t, huge)
	if _, err := ReadFile(huge); err == nil || !strings.Contains(err.Error(), "shape [1000000 1000000] of f32 needs about 10.91 TiB of memory, more than the") {
		t.Errorf("a 4 TB .npy file: %v", err)
	}
	npz := filepath.Join(dir, "big.npz")
	os.WriteFile(npz, bigMember(t, "big.npy", 1<<38), 0o644)
	if _, err := ReadNPZ(npz); err == nil || !strings.Contains(err.Error(), `npz member "big.npy": npy: shape [274877906944] of f32 needs about 3.00 TiB of memory`) {
		t.Errorf("an .npz member declaring 2^40 bytes of data: %v", err)
	}
}

// TestNotRegular: a folder, or a named pipe without a writer (which
// would block the reader forever), given as a .npy or .npz file is
// refused at once, naming it.
func TestNotRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, read := range []func(string) error{
		func(p string) error { _, err := ReadFile(p); return err },
		func(p string) error { _, err := ReadNPZ(p); return err },
	} {
		for path, want := range map[string]string{dir: "is a directory", fifo: "is a named pipe"} {
			done := make(chan error, 1)
			go func() { done <- read(path) }()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), path+" "+want) {
					t.Errorf("%s: %v; want an error saying it %s", path, err, want)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("reading %s blocked", path)
			}
		}
	}
	if _, err := ReadFile(filepath.Join(dir, "missing.npy")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file: %v", err)
	}
}
