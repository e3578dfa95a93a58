package pipeline

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"tofuc/codegen/target"
	"tofuc/runtime/dynamic"
	"tofuc/runtime/plan"
	"tofuc/runtime/planio"
	"tofuc/runtime/safefile"
	"tofuc/runtime/tensor"
)

// A compile writes its files into a staging folder inside its output
// folder and moves them into place as one change (safefile.Commit):
// plan.json moves last, and the previous compile's files that the new
// one does not replace are removed after. A run holding the folder's
// shared lock reads one compile whole; without it, a run reading the
// folder meanwhile finds the old plan or the new one, whose recorded
// lengths and hashes refuse files of the other. Other files of the
// folder are left alone.

// commit moves the files of staging folder st into its folder,
// replacing the previous compile's.
func commit(st *safefile.Staging) error { return commitLast(st, "plan.json") }

// commitLast commits st with the file last moved last (a plan, or a
// dynamic plan's manifest), replacing the previous compile's files, and
// removes the folders of a previous dynamic plan's sizes left empty.
func commitLast(st *safefile.Staging, last string) error {
	var folders []string
	if m, err := dynamic.Read(st.Dir); err == nil {
		folders = m.Folders()
	}
	if err := st.Commit(last, func() []string { return previousCompile(st.Dir) }); err != nil {
		return err
	}
	for _, sub := range folders {
		os.Remove(filepath.Join(st.Dir, sub, "kernels")) // fails, as it should, unless empty
		os.Remove(filepath.Join(st.Dir, sub))
	}
	return nil
}

// oldModules are the modules of the plan in dir, read without checking
// the plan (whose files a new compile replaces even if it was edited).
func oldModules(dir string) (map[string]plan.Module, error) {
	b, err := safefile.ReadFile(filepath.Join(dir, "plan.json"), plan.MaxPlanBytes)
	if err != nil {
		return nil, err
	}
	var old struct {
		Modules map[string]plan.Module `json:"modules"`
	}
	err = json.Unmarshal(b, &old)
	return old.Modules, err
}

// previousCompile lists the files of dir that a compile wrote: those
// its plan names, the kernel modules by their names, and the report; of
// a dynamic plan, its manifest and every size's.
func previousCompile(dir string) []string {
	out := []string{"plan.json", "params.npz", "report.txt", "report.json", "report.html", dynamic.ManifestFile}
	if m, err := dynamic.Read(dir); err == nil {
		for _, sub := range m.Folders() {
			for _, rel := range previousCompile(filepath.Join(dir, sub)) {
				out = append(out, filepath.Join(sub, rel))
			}
		}
	}
	if old, err := oldModules(dir); err == nil {
		for _, m := range old {
			for _, f := range append(append([]plan.File(nil), m.Files...), m.IR...) {
				out = append(out, f.Path)
			}
		}
	}
	modules, _ := filepath.Glob(filepath.Join(dir, "kernels", "*"))
	for _, path := range modules {
		rel, _ := filepath.Rel(dir, path)
		if target.IsModuleFile(filepath.ToSlash(rel)) {
			out = append(out, rel)
		}
	}
	return out
}

// Save writes the plan p compiled into folder from into folder dir, with
// params as its parameters: the plan's kernel modules and report copied,
// params.npz written and recorded in the plan, all committed as a
// compile's outputs are. tofuc run and the Python package's load run
// the saved plan with those parameters.
func Save(p *plan.Plan, from, dir string, params map[string]*tensor.Tensor) error {
	if err := planio.Match(p.Params, params, "parameter"); err != nil {
		return err
	}
	st, err := safefile.Stage(dir)
	if err != nil {
		return err
	}
	defer st.Close()
	saved := *p
	saved.ParamsFile = nil
	for _, rel := range savedFiles(p) {
		if err := copyFile(filepath.Join(from, rel), filepath.Join(st.Path, rel)); err != nil {
			return err
		}
	}
	if err := saved.Write(filepath.Join(st.Path, "plan.json")); err != nil {
		return err
	}
	if err := writeParams(&saved, st.Path, params); err != nil {
		return err
	}
	return commit(st)
}

// savedFiles are the files of a compile's folder that Save copies: the
// plan's modules and the report, those that exist.
func savedFiles(p *plan.Plan) []string {
	var out []string
	for _, m := range p.Modules {
		for _, f := range append(append([]plan.File(nil), m.Files...), m.IR...) {
			out = append(out, f.Path)
		}
	}
	return append(out, "report.txt", "report.json", "report.html")
}

// copyFile copies the file at from to to, making its folder; a missing
// report is no error (a compile may not write one).
func copyFile(from, to string) error {
	data, err := os.ReadFile(from)
	if errors.Is(err, fs.ErrNotExist) && strings.HasPrefix(filepath.Base(from), "report.") {
		return nil
	}
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	return os.WriteFile(to, data, 0o644)
}
