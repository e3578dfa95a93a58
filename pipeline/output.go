package pipeline

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"tofuc/runtime/plan"
)

// A compile writes its files into a staging folder inside its output
// folder, then moves them into place (commit): the output folder never
// holds a half-written compile's files, and a compile replaces the
// previous compile's files as a whole (those isCompiled names, stale
// kernels included) while leaving other files there alone. Two compiles
// into one folder commit one after the other (an exclusive lock on the
// folder); plan.json moves last, so that a run reading the folder
// meanwhile finds the old plan or the new one, whose recorded hashes
// refuse files of the other. A compile killed before it removed its
// staging folder leaves it; the next compile into the folder removes
// it (staleStage).

// stagePrefix starts the name of a staging folder, followed by the
// compiling process's id.
const stagePrefix = ".tofuc-compile-"

// stage makes dir if missing and a staging folder in it.
func stage(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	return os.MkdirTemp(dir, fmt.Sprintf("%s%d-*", stagePrefix, os.Getpid()))
}

// staleStage reports whether a staging folder's compile is gone: its
// process no longer runs (it was killed before it could remove it).
func staleStage(name string) bool {
	rest, ok := strings.CutPrefix(name, stagePrefix)
	if !ok {
		return false
	}
	pid, err := strconv.Atoi(strings.SplitN(rest, "-", 2)[0])
	if err != nil || pid <= 0 {
		return true
	}
	return syscall.Kill(pid, 0) == syscall.ESRCH
}

// commit moves the files of staging folder stage into dir, replacing
// the previous compile's.
func commit(stage, dir string) error {
	unlock, err := lockDir(dir)
	if err != nil {
		return err
	}
	defer unlock()
	old, _ := plan.Read(filepath.Join(dir, "plan.json")) // nil: none, or damaged
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		switch {
		case d.IsDir() && filepath.Dir(rel) == "." && strings.HasPrefix(d.Name(), stagePrefix):
			if path != stage && staleStage(d.Name()) {
				os.RemoveAll(path) // a killed compile's
			}
			return filepath.SkipDir // this compile's, or another's under way
		case d.IsDir():
			return nil
		case isCompiled(filepath.ToSlash(rel), old):
			return os.Remove(path)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("removing the previous compile from %s: %w", dir, err)
	}
	var files []string
	err = filepath.WalkDir(stage, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(stage, path)
			files = append(files, rel)
		}
		return err
	})
	if err != nil {
		return err
	}
	for _, last := range []bool{false, true} { // plan.json last
		for _, rel := range files {
			if (rel == "plan.json") != last {
				continue
			}
			to := filepath.Join(dir, rel)
			if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
				return err
			}
			if err := os.Rename(filepath.Join(stage, rel), to); err != nil {
				return fmt.Errorf("writing %s: %w", dir, err)
			}
		}
	}
	return nil
}

// lockDir takes an exclusive lock on the folder dir until unlock.
func lockDir(dir string) (unlock func(), err error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", dir, err)
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
