package safefile

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestOpenRefusesWhatIsNotRegular: a directory, a named pipe without a
// writer (which a plain open waits on forever) and a device are refused
// at once, naming the path and what it is; a regular file opens.
func TestOpenRefusesWhatIsNotRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	regular := filepath.Join(dir, "file")
	os.WriteFile(regular, []byte("data"), 0o644)
	for path, want := range map[string]string{dir: "is a directory", fifo: "is a named pipe", "/dev/null": "is a device"} {
		done := make(chan error, 1)
		go func() {
			f, err := Open(path)
			if err == nil {
				f.Close()
			}
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), path+" "+want+", not a regular file") {
				t.Errorf("Open(%s): %v; want an error saying it %s", path, err, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("Open(%s) blocked", path)
		}
	}
	f, err := Open(regular)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// TestReadFileLimit: a file beyond the limit (a sparse one of 4 TiB,
// which reading would take all memory for) is refused before it is
// read; one within it is read whole.
func TestReadFileLimit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "huge")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, 4<<40); err != nil {
		t.Skip(err)
	}
	if _, err := ReadFile(path, 1<<20); err == nil || !strings.Contains(err.Error(), "is 4.00 TiB, more than the 1.00 MiB it may have") {
		t.Errorf("reading a 4 TiB file with a limit of 1 MiB: %v", err)
	}
	os.Truncate(path, 1<<20)
	if data, err := ReadFile(path, 1<<20); err != nil || len(data) != 1<<20 {
		t.Errorf("reading a file of the limit's size: %d bytes, %v", len(data), err)
	}
}
