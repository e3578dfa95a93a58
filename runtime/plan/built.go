package plan

import (
	"encoding/json"
	"fmt"
	"slices"
)

// Built is what a kernel's objects were compiled for: its argument
// types, the arguments it writes, its reducer, its host range and its
// GPU launch. A plan's kernel must agree
// with it in everything but its grid: every form strides over the
// blocks its grid does not cover (codegen's TestAnyGrid), so that a grid
// changed within the bounds of Validate changes no result. Code
// generation embeds the records of a module's kernels in every file it
// compiles them into (a NUL-terminated JSON string, the global
// BuiltSymbol), and a runtime compares the plan's kernels with them
// before running anything (Kernel.CheckBuilt): a plan edited, or paired
// with another compile's files, is refused, never run.
type Built struct {
	Name      string `json:"name"`
	Form      string `json:"form"`
	Elements  int64  `json:"elements"`
	Args      []Arg  `json:"args"`
	HostRange int64  `json:"host_range"`
	HostGrain int64  `json:"host_grain"`
	HostPhase int64  `json:"host_phase"`
	HostOnly  bool   `json:"host_only"`
	GPUOnly   bool   `json:"gpu_only"`
	Grid      int64  `json:"grid"`
	Block     int64  `json:"block"`
	Shared    int64  `json:"shared_bytes"`
	Dynamic   bool   `json:"shared_dynamic,omitempty"`
	Sync      bool   `json:"sync"`
	Writes    []int  `json:"writes"`
	Reducer   string `json:"reducer"`
}

// BuiltSymbol is the name of the global holding a kernel's record in its
// compiled files.
func BuiltSymbol(kernel string) string { return kernel + "_built" }

// RequiresSymbol is the global of a shared object holding the CPU
// extensions it was compiled for, a NUL-terminated list separated by
// commas: what its module's Requires must say, which a runtime reads
// from the file before loading it.
const RequiresSymbol = "tofuc_requires"

// Built is the record of what k's objects must have been compiled for.
func (k *Kernel) Built() Built {
	return Built{Name: k.Name, Form: k.Form, Elements: k.Elements, Args: k.Args,
		HostRange: k.HostRange, HostGrain: k.HostGrain, HostPhase: k.HostPhase, HostOnly: k.HostOnly, GPUOnly: k.GPUOnly,
		Grid: k.Grid, Block: k.Block, Shared: k.Shared, Dynamic: k.DynamicShared, Sync: k.Sync, Writes: k.Writes, Reducer: k.Reducer}
}

// EncodeBuilt is the bytes of a record as embedded: JSON, then a NUL.
func EncodeBuilt(b Built) []byte {
	data, err := json.Marshal(b)
	if err != nil {
		panic(err) // a struct of strings, numbers and slices
	}
	return append(data, 0)
}

// CheckBuilt compares k with the record data (EncodeBuilt's, its NUL
// optional) found in the file named file, naming the first field that
// differs.
func (k *Kernel) CheckBuilt(data []byte, file string) error {
	if n := len(data); n > 0 && data[n-1] == 0 {
		data = data[:n-1]
	}
	var got Built
	if err := json.Unmarshal(data, &got); err != nil {
		return fmt.Errorf("kernel %s (%s): %s holds no readable record of what it was compiled for: %w", k.Name, k.Label, file, err)
	}
	want := k.Built()
	for _, f := range []struct {
		name       string
		plan, file any
	}{
		{"name", want.Name, got.Name},
		{"form", want.Form, got.Form},
		{"elements", want.Elements, got.Elements},
		{"args", want.Args, got.Args},
		{"host_range", want.HostRange, got.HostRange},
		{"host_grain", want.HostGrain, got.HostGrain},
		{"host_phase", want.HostPhase, got.HostPhase},
		{"host_only", want.HostOnly, got.HostOnly},
		{"gpu_only", want.GPUOnly, got.GPUOnly},
		{"block", want.Block, got.Block},
		{"shared_bytes", want.Shared, got.Shared},
		{"shared_dynamic", want.Dynamic, got.Dynamic},
		{"sync", want.Sync, got.Sync},
		{"writes", want.Writes, got.Writes},
		{"reducer", want.Reducer, got.Reducer},
	} {
		if !same(f.plan, f.file) {
			return fmt.Errorf("kernel %s (%s): %s %v in the plan, but %s was compiled for %v: the plan does not match its kernels (compile it again)", k.Name, k.Label, f.name, f.plan, file, f.file)
		}
	}
	return nil
}

// same compares the fields of two records.
func same(a, b any) bool {
	switch a := a.(type) {
	case []Arg:
		return slices.EqualFunc(a, b.([]Arg), func(x, y Arg) bool { return x.DType == y.DType && slices.Equal(x.Shape, y.Shape) })
	case []int:
		return slices.Equal(a, b.([]int))
	}
	return a == b
}

// CheckKernels compares every kernel of p with its record in the file
// named file, which lookup returns by symbol (BuiltSymbol): a kernel the
// file lacks, or whose record differs, is an error naming it (and the
// field).
func (p *Plan) CheckKernels(file string, lookup func(symbol string) ([]byte, error)) error {
	for i := range p.Kernels {
		k := &p.Kernels[i]
		data, err := lookup(BuiltSymbol(k.Name))
		if err != nil {
			return fmt.Errorf("kernel %s (%s) is not in %s (%w): the plan does not match its kernels (compile it again)", k.Name, k.Label, file, err)
		}
		if err := k.CheckBuilt(data, file); err != nil {
			return err
		}
	}
	return nil
}
