package planio

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"tofuc/runtime/npy"
	"tofuc/runtime/plan"
	"tofuc/runtime/safefile"
	"tofuc/runtime/tensor"
)

// Folder is what a run writes into its output folder (--out): files by
// path relative to it, each with the line that says it, written as one
// change by Write once the run has succeeded (a failing run writes
// nothing). The folder's Manifest lists the files the last run wrote:
// the next run's Write removes those it does not write again, so every
// file of the folder that a run wrote is the last run's. Other files are
// left alone.
type Folder struct {
	files []folderFile
	// read are the files the run read (its --in and --params), which
	// Write keeps even when the last run wrote them: they are this run's.
	read []string
}

type folderFile struct {
	rel, say string
	write    func(w io.Writer) error
}

// Manifest is the name of the file, in an output folder, that lists the
// files the last run wrote there, one path a line.
const Manifest = ".tofuc-run"

// Add adds the file rel written by write; say begins its line.
func (f *Folder) Add(rel, say string, write func(w io.Writer) error) {
	f.files = append(f.files, folderFile{rel: filepath.ToSlash(rel), say: say, write: write})
}

// Read notes files the run read, which Write keeps.
func (f *Folder) Read(paths ...string) { f.read = append(f.read, paths...) }

// Tensor adds t as the .npy file rel.
func (f *Folder) Tensor(rel, say string, t *tensor.Tensor) {
	f.Add(rel, say, func(w io.Writer) error { return npy.Write(w, t) })
}

// Tensors adds ts as the .npz file rel.
func (f *Folder) Tensors(rel, say string, ts map[string]*tensor.Tensor) {
	f.Add(rel, say, func(w io.Writer) error { return npy.WriteNPZTo(w, ts) })
}

// Outputs adds each output as NAME.npy (FileName), in the order of
// their names, each said with its dtype, shape and Summary.
func (f *Folder) Outputs(outputs map[string]*tensor.Tensor) {
	names := make([]string, 0, len(outputs))
	for n := range outputs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		t := outputs[n]
		f.Tensor(FileName(n)+".npy", fmt.Sprintf("%s: %s%v %s", n, t.DType, t.Shape, Summary(t)), t)
	}
}

// NextParams adds params.npz for a training plan's next step: every
// parameter of p under its own name, the value of its output in Next
// where it has one (optimizer state included), else params' value, so
// that `--params DIR/params.npz` runs that step. It adds nothing for a
// plan without Next.
func (f *Folder) NextParams(p *plan.Plan, params, outputs map[string]*tensor.Tensor) {
	if len(p.Next) == 0 {
		return
	}
	next := make(map[string]*tensor.Tensor, len(p.Params))
	for _, b := range p.Params {
		next[b.Name] = params[b.Name]
		if out, ok := p.Next[b.Name]; ok {
			next[b.Name] = outputs[out]
		}
	}
	f.Tensors("params.npz", fmt.Sprintf("%d parameters for the next step", len(next)), next)
}

// Write writes the files into dir (created if missing) as one change
// (safefile.Commit) and says each on w.
func (f *Folder) Write(dir string, w io.Writer) error {
	st, err := safefile.Stage(dir)
	if err != nil {
		return err
	}
	defer st.Close()
	var list strings.Builder
	for _, file := range f.files {
		if err := writeFile(filepath.Join(st.Path, file.rel), file.write); err != nil {
			return err
		}
		fmt.Fprintln(&list, file.rel)
	}
	manifest := func(w io.Writer) error {
		_, err := io.WriteString(w, list.String())
		return err
	}
	if err := writeFile(filepath.Join(st.Path, Manifest), manifest); err != nil {
		return err
	}
	if err := st.Commit(Manifest, func() []string { return f.unread(lastRun(dir), dir) }); err != nil {
		return err
	}
	for _, file := range f.files {
		fmt.Fprintf(w, "%s -> %s\n", file.say, filepath.Join(dir, file.rel))
	}
	return nil
}

// lastRun lists the files the last run wrote into dir (its Manifest;
// Commit removes none outside dir).
func lastRun(dir string) []string {
	b, err := os.ReadFile(filepath.Join(dir, Manifest))
	if err != nil {
		return nil
	}
	var out []string
	for _, rel := range strings.Split(string(b), "\n") {
		if rel != "" && !strings.HasPrefix(rel, safefile.StagePrefix) {
			out = append(out, rel)
		}
	}
	return out
}

// unread drops from rels (relative to dir) the files the run read.
func (f *Folder) unread(rels []string, dir string) []string {
	var out []string
	for _, rel := range rels {
		info, err := os.Stat(filepath.Join(dir, rel))
		if err == nil && f.wasRead(info) {
			continue
		}
		out = append(out, rel)
	}
	return out
}

func (f *Folder) wasRead(info os.FileInfo) bool {
	for _, path := range f.read {
		if r, err := os.Stat(path); err == nil && os.SameFile(r, info) {
			return true
		}
	}
	return false
}

// writeFile writes the file at path (making its folder) with write.
func writeFile(path string, write func(w io.Writer) error) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return safefile.Write(path, 0o644, write)
}
