package safefile

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// files reads every file under dir, but staging folders, by relative
// path.
func files(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), StagePrefix) {
			return filepath.SkipDir
		}
		if !d.IsDir() {
			b, _ := os.ReadFile(path)
			rel, _ := filepath.Rel(dir, path)
			out[filepath.ToSlash(rel)] = string(b)
		}
		return nil
	})
	return out
}

func write(t *testing.T, dir string, fs map[string]string) {
	t.Helper()
	for rel, text := range fs {
		path := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// staged makes dir holding old and a stage in it holding new.
func staged(t *testing.T, old, new map[string]string) (dir string, st *Staging) {
	dir = filepath.Join(t.TempDir(), "out")
	write(t, dir, old)
	st, err := Stage(dir)
	if err != nil {
		t.Fatal(err)
	}
	write(t, st.Path, new)
	t.Cleanup(st.Close)
	return dir, st
}

func obsolete(rels ...string) func() []string { return func() []string { return rels } }

func TestCommit(t *testing.T) {
	old := map[string]string{"plan": "old plan", "sub/a": "old a", "gone": "old gone", "mine": "the user's"}
	dir, stage := staged(t, old, map[string]string{"plan": "new plan", "sub/a": "new a", "sub/deep/b": "new b"})
	outside := filepath.Join(filepath.Dir(dir), "outside")
	write(t, filepath.Dir(dir), map[string]string{"outside": "not dir's"})
	if err := stage.Commit("plan", obsolete("plan", "sub/a", "gone", "missing", "../outside", outside)); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"plan": "new plan", "sub/a": "new a", "sub/deep/b": "new b", "mine": "the user's"}
	if got := files(t, dir); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("after the commit the folder holds %v, want %v", got, want)
	}
	if _, err := os.Stat(outside); err != nil {
		t.Errorf("the commit removed a file outside its folder: %v", err)
	}
}

func TestCommitRefusesAFolderInTheWay(t *testing.T) {
	old := map[string]string{"plan": "old plan", "report/keep": "a folder named as a file"}
	dir, stage := staged(t, old, map[string]string{"plan": "new plan", "new/x": "x", "report": "new report"})
	err := stage.Commit("plan", obsolete("plan"))
	if err == nil || !strings.Contains(err.Error(), "a folder has its name") {
		t.Fatalf("Commit over a folder: %v, want an error naming the folder", err)
	}
	if got := files(t, dir); fmt.Sprint(got) != fmt.Sprint(old) {
		t.Errorf("a refused commit changed the folder: %v, want %v", got, old)
	}
	if _, err := os.Stat(filepath.Join(dir, "new")); err == nil {
		t.Errorf("a refused commit left the folder it made")
	}
}

func TestCommitUndoesAFailedMove(t *testing.T) {
	old := map[string]string{"a": "old a", "b": "old b", "c": "old c"}
	dir, stage := staged(t, old, map[string]string{"a": "new a", "b": "new b", "c": "new c", "d/e": "new e"})
	moves := 0
	rename = func(from, to string) error {
		if moves++; moves == 4 {
			return errors.New("injected")
		}
		return os.Rename(from, to)
	}
	defer func() { rename = os.Rename }()
	err := stage.Commit("", obsolete("a", "b", "c"))
	if err == nil || !strings.Contains(err.Error(), "injected") || !strings.Contains(err.Error(), "as it was") {
		t.Fatalf("Commit with a failing move: %v", err)
	}
	if got := files(t, dir); fmt.Sprint(got) != fmt.Sprint(old) {
		t.Errorf("a failed commit changed the folder: %v, want %v", got, old)
	}
	if _, err := os.Stat(filepath.Join(dir, "d")); err == nil {
		t.Errorf("a failed commit left the folder it made")
	}
}

func TestStageRemovesStaleStages(t *testing.T) {
	dir := t.TempDir()
	dead := filepath.Join(dir, StagePrefix+"999999999-1") // beyond pid_max
	live := filepath.Join(dir, fmt.Sprintf("%s%d-1", StagePrefix, os.Getppid()))
	mine := filepath.Join(dir, ".tofuc-notes")
	for _, d := range []string{dead, live, mine} {
		os.Mkdir(d, 0o755)
	}
	if _, err := Stage(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dead); err == nil {
		t.Errorf("the staging folder of a process that is gone survived")
	}
	for _, d := range []string{live, mine} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s was removed", filepath.Base(d))
		}
	}
}

// TestCommitWaitsForReaders: a commit waits while a reader holds the
// folder's shared lock.
func TestCommitWaitsForReaders(t *testing.T) {
	dir, stage := staged(t, map[string]string{"plan": "old"}, map[string]string{"plan": "new"})
	unlock, err := Lock(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- stage.Commit("plan", obsolete()) }()
	select {
	case <-done:
		t.Fatal("the commit did not wait for the reader")
	case <-time.After(200 * time.Millisecond):
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "plan")); string(b) != "old" {
		t.Errorf("the reader saw the folder change")
	}
	unlock()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "plan")); string(b) != "new" {
		t.Errorf("the commit did not happen after the reader left")
	}
}

// TestSignalsWaitForTheMoves: SIGTERM during the moves is delivered
// after them.
func TestSignalsWaitForTheMoves(t *testing.T) {
	seen := make(chan os.Signal, 2)
	signal.Notify(seen, syscall.SIGTERM)
	defer signal.Stop(seen)
	_, stage := staged(t, nil, map[string]string{"a": "a", "b": "b"})
	rename = func(from, to string) error {
		if filepath.Base(to) == "a" {
			syscall.Kill(os.Getpid(), syscall.SIGTERM)
			time.Sleep(50 * time.Millisecond) // delivered by now, to seen and to the commit
		}
		return os.Rename(from, to)
	}
	defer func() { rename = os.Rename }()
	if err := stage.Commit("", obsolete()); err != nil {
		t.Fatal(err)
	}
	for i := range 2 { // once during the moves, once more when released
		select {
		case <-seen:
		case <-time.After(2 * time.Second):
			t.Fatalf("SIGTERM delivered %d times, want 2 (the commit re-raises it)", i)
		}
	}
}
