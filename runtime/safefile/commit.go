package safefile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// A set of files that belong together (a compile's folder, a run's
// outputs) is written into a staging folder inside its destination
// folder (Stage), then moved into place as one change (Commit): under
// an exclusive lock on the destination, so that commits into one folder
// take turns and readers holding a shared lock (Lock) see one set whole;
// after checking every destination can take its file; the files the
// destination held at their names are kept as hard links until all are
// in, so that a failed move puts them back; SIGINT and SIGTERM wait
// until the moves are done. Only SIGKILL, or a crash, during the moves
// themselves (renames within one folder, milliseconds) can leave a mix.
// A staging folder whose process is gone is removed by the next Stage or
// Commit into the folder.

// StagePrefix starts the name of a staging folder, followed by the
// process id of its writer.
const StagePrefix = ".tofuc-stage-"

// previous is the folder, inside a staging folder, of the hard links to
// the files a commit replaces.
const previous = ".previous"

// A Staging is a staging folder, Path, inside its destination folder,
// Dir.
type Staging struct {
	Dir, Path string
	// made says Stage made Dir.
	made bool
}

// Stage makes dir if missing, removes the staging folders of processes
// that are gone, and makes a staging folder in it.
func Stage(dir string) (*Staging, error) {
	_, err := os.Stat(dir)
	st := &Staging{Dir: dir, made: errors.Is(err, fs.ErrNotExist)}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, folderError(dir, err)
	}
	removeStale(dir)
	if st.Path, err = os.MkdirTemp(dir, fmt.Sprintf("%s%d-*", StagePrefix, os.Getpid())); err != nil {
		st.Close()
		return nil, err
	}
	return st, nil
}

// Close removes the staging folder, and the destination folder too if
// Stage made it and nothing was committed into it: a write that failed
// leaves no folder behind.
func (st *Staging) Close() {
	if st.Path != "" {
		os.RemoveAll(st.Path)
	}
	if st.made {
		os.Remove(st.Dir) // only if empty
	}
}

// folderError explains why the folder dir cannot be made: a symbolic
// link that leads nowhere says where it leads.
func folderError(dir string, err error) error {
	if target, lerr := os.Readlink(dir); lerr == nil {
		if _, serr := os.Stat(dir); serr != nil {
			return fmt.Errorf("%s is a symbolic link to %s, which is not a folder: %w", dir, target, serr)
		}
	}
	return err
}

// removeStale removes the staging folders of dir whose process is gone
// (killed before it could remove its own).
func removeStale(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.IsDir() && staleStage(e.Name()) {
			os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
}

// staleStage reports whether name is a staging folder whose process no
// longer runs.
func staleStage(name string) bool {
	rest, ok := strings.CutPrefix(name, StagePrefix)
	if !ok {
		return false
	}
	pid, err := strconv.Atoi(strings.SplitN(rest, "-", 2)[0])
	if err != nil || pid <= 0 {
		return true
	}
	return syscall.Kill(pid, 0) == syscall.ESRCH
}

// Lock takes a lock on the folder dir until unlock: exclusive for a
// writer, shared for a reader.
func Lock(dir string, exclusive bool) (unlock func(), err error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	if err := syscall.Flock(int(f.Fd()), how); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", dir, err)
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// Commit moves every file of the staging folder into its destination
// folder, at the same relative path, last (a relative path; "": none) after all
// others, and then removes the files obsolete lists (paths inside dir,
// relative to it; called under the lock, before anything moves) that
// the stage did not replace. Either all files are moved in, or none and dir is as it was
// (the error says which file failed).
func (st *Staging) Commit(last string, obsolete func() []string) error {
	stage, dir := st.Path, st.Dir
	unlock, err := Lock(dir, true)
	if err != nil {
		return err
	}
	defer unlock()
	defer holdSignals()()
	files, err := stagedFiles(stage, last)
	if err != nil {
		return err
	}
	stale := obsolete()
	c := &commit{stage: stage, dir: dir}
	if err := c.prepare(files); err != nil {
		c.undo()
		return err
	}
	for _, rel := range files {
		if err := rename(filepath.Join(stage, rel), filepath.Join(dir, rel)); err != nil {
			c.undo()
			return fmt.Errorf("moving %s into place: %w (%s is as it was)", rel, err, dir)
		}
		c.moved = append(c.moved, rel)
	}
	written := map[string]bool{}
	for _, rel := range files {
		written[rel] = true
	}
	for _, rel := range stale {
		if filepath.IsLocal(rel) && !written[filepath.ToSlash(rel)] { // never a file outside dir
			os.Remove(filepath.Join(dir, rel)) // gone already, or left: no plan names it
		}
	}
	return nil
}

// stagedFiles lists the files of stage (slash-separated, sorted), last
// at the end.
func stagedFiles(stage, last string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(stage, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(stage, path)
		files = append(files, filepath.ToSlash(rel))
		return nil
	})
	sort.SliceStable(files, func(i, j int) bool { return files[j] == last && files[i] != last })
	return files, err
}

// rename moves a file into place (tests make it fail).
var rename = os.Rename

// commit is one Commit's state: what it changed in dir, to undo.
type commit struct {
	stage, dir string
	// made are the folders it made in dir, saved the files of dir it
	// linked into the stage, moved the files it moved into dir.
	made, saved, moved []string
}

// prepare makes the folders the files go in and links every file they
// replace into the stage's previous folder; a destination that is not a
// regular file (a folder, say) is an error before anything moves.
func (c *commit) prepare(files []string) error {
	for _, rel := range files {
		to := filepath.Join(c.dir, rel)
		if err := c.makeFolders(filepath.Dir(rel)); err != nil {
			return fmt.Errorf("writing %s: %w", to, err)
		}
		info, err := os.Lstat(to)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			return err
		case info.IsDir():
			return fmt.Errorf("cannot write %s: a folder has its name (remove or rename it)", to)
		}
		save := filepath.Join(c.stage, previous, rel)
		if err := os.MkdirAll(filepath.Dir(save), 0o755); err != nil {
			return err
		}
		if err := os.Link(to, save); err != nil {
			return fmt.Errorf("cannot replace %s: %w", to, err)
		}
		c.saved = append(c.saved, rel)
	}
	return nil
}

// makeFolders makes the folder rel of dir and those above it that are
// missing, noting each it made.
func (c *commit) makeFolders(rel string) error {
	if rel == "." {
		return nil
	}
	path := filepath.Join(c.dir, rel)
	if info, err := os.Stat(path); err == nil {
		if !info.IsDir() {
			return fmt.Errorf("%s is not a folder", path)
		}
		return nil
	}
	if err := c.makeFolders(filepath.Dir(rel)); err != nil {
		return err
	}
	if err := os.Mkdir(path, 0o755); err != nil {
		return err
	}
	c.made = append(c.made, rel)
	return nil
}

// undo puts dir back as it was: the files moved in out, the files they
// replaced back, the folders made removed.
func (c *commit) undo() {
	saved := map[string]bool{}
	for _, rel := range c.saved {
		saved[rel] = true
	}
	for i := len(c.moved) - 1; i >= 0; i-- {
		rel := c.moved[i]
		to := filepath.Join(c.dir, rel)
		if saved[rel] {
			os.Rename(filepath.Join(c.stage, previous, rel), to)
		} else {
			os.Remove(to)
		}
	}
	for i := len(c.made) - 1; i >= 0; i-- {
		os.Remove(filepath.Join(c.dir, c.made[i])) // only if still empty
	}
}

// holdSignals makes SIGINT and SIGTERM wait until release, which
// delivers the first that came, as it would have been.
func holdSignals() (release func()) {
	caught := make(chan os.Signal, 1)
	signal.Notify(caught, syscall.SIGINT, syscall.SIGTERM)
	return func() {
		signal.Stop(caught)
		select {
		case sig := <-caught:
			syscall.Kill(os.Getpid(), sig.(syscall.Signal))
		default:
		}
	}
}
