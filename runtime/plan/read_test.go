package plan

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// emptyPlan is the smallest plan that validates: one device, nothing to
// do.
func emptyPlan() *Plan {
	return &Plan{Version: Version, Model: "empty", Devices: 1, ArenaBytes: []int64{0}, Init: [][]Step{{}}, Steps: [][]Step{{}}}
}

// TestReadRefusesChangedPlans: a plan whose contents do not match its
// seal is refused by Read, before a runtime opens any of its files; one
// larger than MaxPlanBytes (a sparse file of 4 TiB) is refused before
// it is read; the plan Write wrote reads back.
func TestReadRefusesChangedPlans(t *testing.T) {
	path := filepath.Join(t.TempDir(), "plan.json")
	if err := emptyPlan().Write(path); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(path); err != nil {
		t.Fatalf("the plan as written: %v", err)
	}
	b, _ := os.ReadFile(path)
	os.WriteFile(path, []byte(strings.Replace(string(b), `"empty"`, `"edited"`, 1)), 0o644)
	if _, err := Read(path); err == nil || !strings.Contains(err.Error(), path+" was changed after tofuc compile wrote it") {
		t.Errorf("a plan edited: %v", err)
	}
	if err := os.Truncate(path, 4<<40); err != nil {
		t.Skip(err)
	}
	if _, err := Read(path); err == nil || !strings.Contains(err.Error(), "more than the 256.00 MiB it may have") {
		t.Errorf("a plan of 4 TiB: %v", err)
	}
}

// TestFileReadChecksBeforeReading: a compiled file whose length is not
// the recorded one (a sparse file of 4 TiB, whose reading would take all
// memory) is refused before it is read, as is a recorded length beyond
// MaxFileBytes and a folder in the file's place; each error names the
// file. The file as recorded reads back whole.
func TestFileReadChecksBeforeReading(t *testing.T) {
	dir := t.TempDir()
	data := []byte("the bytes of a module")
	os.WriteFile(filepath.Join(dir, "m.so"), data, 0o644)
	f := FileOf("m.so", data)
	if got, err := f.Read(dir); err != nil || string(got) != string(data) {
		t.Fatalf("the file as recorded: %q, %v", got, err)
	}
	path := filepath.Join(dir, "m.so")
	if err := os.Truncate(path, 4<<40); err != nil {
		t.Skip(err)
	}
	for _, tc := range []struct {
		name string
		file File
		want string
	}{
		{"a file of 4 TiB", f, path + " is not the file the plan was compiled with (4398046511104 bytes, the plan records 21 bytes"},
		{"a recorded length of 4 TiB", File{Path: "m.so", Bytes: 4 << 40, SHA256: f.SHA256}, path + ": the plan records 4.00 TiB, more than the 1.00 GiB"},
		{"a folder", File{Path: ".", Bytes: f.Bytes, SHA256: f.SHA256}, dir + " is a directory, not a regular file"},
	} {
		if _, err := tc.file.Read(dir); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want %q", tc.name, err, tc.want)
		}
	}
}
