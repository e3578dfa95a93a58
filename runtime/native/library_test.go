package native_test

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tofuc/codegen/toolchain"
	"tofuc/runtime/native"
	"tofuc/runtime/plan"
)

// sharedObject compiles a shared object holding a function answer,
// returning 42, and a string greeting.
func sharedObject(t *testing.T) []byte {
	t.Helper()
	tools, err := toolchain.Find()
	if err != nil {
		t.Skip(err)
	}
	ir := "@greeting = constant [6 x i8] c\"hello\\00\"\ndefine i64 @answer() {\n  ret i64 42\n}\n"
	obj, err := tools.Compile(context.Background(), []byte(ir), toolchain.Host)
	if err != nil {
		t.Fatal(err)
	}
	so, err := tools.Link(context.Background(), [][]byte{obj}, []string{native.RequiresSource(nil)})
	if err != nil {
		t.Fatal(err)
	}
	return so
}

// TestOpenBytesRefusesDamagedObjects: an object cut short (at the sizes
// that made dlopen die of SIGBUS, and wherever else), one whose loaded
// segment lies beyond its end, and bytes of no object are refused with
// one error naming them; the whole object loads and runs.
func TestOpenBytesRefusesDamagedObjects(t *testing.T) {
	so := sharedObject(t)
	var cuts []int
	for _, n := range []int{1000, 4096, 16000, len(so) / 3, len(so) / 2, len(so) - 1} {
		if n < len(so) {
			cuts = append(cuts, n)
		}
	}
	for _, n := range cuts {
		_, err := native.OpenBytes("cut.so", so[:n])
		if err == nil || !strings.Contains(err.Error(), "cut.so is not a whole shared object") {
			t.Errorf("an object cut to %d of its %d bytes: %v", n, len(so), err)
		}
	}
	far := segmentBeyondEnd(t, so)
	if _, err := native.OpenBytes("far.so", far); err == nil || !strings.Contains(err.Error(), "far.so is not a whole shared object: its segment") {
		t.Errorf("an object whose segment lies beyond its end: %v", err)
	}
	if _, err := native.OpenBytes("text.so", []byte("not an object at all, but long enough to be read as one")); err == nil || !strings.Contains(err.Error(), "text.so is not a shared object") {
		t.Errorf("bytes of no object: %v", err)
	}
	lib, err := native.OpenBytes("whole.so", so)
	if err != nil {
		t.Fatal(err)
	}
	if got := call(t, lib); got != 42 {
		t.Errorf("answer() = %d, want 42", got)
	}
}

// segmentBeyondEnd is so with the file offset of its first loaded
// segment moved past its end.
func segmentBeyondEnd(t *testing.T, so []byte) []byte {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(so))
	if err != nil {
		t.Fatal(err)
	}
	out := bytes.Clone(so)
	phoff := binary.LittleEndian.Uint64(so[0x20:]) // ELF64 e_phoff
	phentsize := uint64(binary.LittleEndian.Uint16(so[0x36:]))
	for i, p := range f.Progs {
		if p.Type == elf.PT_LOAD && p.Filesz > 0 {
			binary.LittleEndian.PutUint64(out[phoff+uint64(i)*phentsize+8:], uint64(len(so))) // p_offset
			return out
		}
	}
	t.Fatal("no loaded segment")
	return nil
}

// call calls answer in lib.
func call(t *testing.T, lib *native.Library) uintptr {
	t.Helper()
	fn, err := lib.Symbol("answer")
	if err != nil {
		t.Fatal(err)
	}
	return native.Call(fn)
}

// TestOpenModuleLoadsWhatItChecked: the object a module loads is the
// bytes it checked, not its file read again: truncating the file once
// it is loaded (as another process could while a run starts) changes
// nothing the library holds, where the loader's mapping of the file
// would die of SIGBUS.
func TestOpenModuleLoadsWhatItChecked(t *testing.T) {
	so := sharedObject(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "host-test.so")
	if err := os.WriteFile(path, so, 0o755); err != nil {
		t.Fatal(err)
	}
	m := plan.Module{Files: []plan.File{plan.FileOf("host-test.so", so)}}
	lib, err := native.OpenModule(&plan.Plan{Modules: map[string]plan.Module{"host": m}}, dir, m)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	if got := call(t, lib); got != 42 {
		t.Errorf("answer() = %d after the file was truncated, want 42", got)
	}
	if s, err := lib.String("greeting", 16); err != nil || string(s) != "hello" {
		t.Errorf("greeting after the file was truncated: %q, %v", s, err)
	}
}
