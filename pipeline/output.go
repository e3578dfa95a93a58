package pipeline

import (
	"encoding/json"
	"path/filepath"

	"tofuc/codegen/target"
	"tofuc/runtime/plan"
	"tofuc/runtime/safefile"
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
func commit(st *safefile.Staging) error {
	return st.Commit("plan.json", func() []string { return previousCompile(st.Dir) })
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
// its plan names, the kernel modules by their names, and the report.
func previousCompile(dir string) []string {
	out := []string{"plan.json", "params.npz", "report.txt", "report.json", "report.html"}
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
