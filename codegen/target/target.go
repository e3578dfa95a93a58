// Package target declares what code generation compiles for. A Target is
// data: the lowering its kernels get (the host flavour, or the GPU
// flavour for an emit.Machine), the toolchain call that compiles a
// module of kernels for it, and the files it writes into a plan's folder
// (plan.Plan.Modules, keyed by the target's name). A target's package
// registers it when it is imported (Register, in its init; the pipeline
// imports the built-in ones: pipeline/targets.go), and a compile builds
// the targets whose artefacts `--emit` names.
package target

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"

	"tofuc/codegen/emit"
	"tofuc/codegen/toolchain"
	"tofuc/runtime/native"
	"tofuc/runtime/plan"
)

// Target is a machine kernels are compiled for.
type Target interface {
	// Name keys the target's files in a plan.
	Name() string
	// Artefacts are the `--emit` names that choose the target, each
	// one of its outputs (a target is built when any is asked).
	Artefacts() []string
	// Machine is the GPU machine whose GPU-flavour lowering the target
	// compiles; nil: the host flavour.
	Machine() emit.Machine
	// Compile compiles one module of kernels, text in the target's
	// lowering, for the artefacts of want among its own; the result is
	// Finish's.
	Compile(ctx context.Context, tools *toolchain.Tools, text string, kernels []Kernel, want Set) (Object, error)
	// Finish writes the target's files for its compiled modules (in
	// order) into the plan's folder dir and returns them as the plan
	// lists them (ok false: none).
	Finish(ctx context.Context, tools *toolchain.Tools, dir string, objs []Object, want Set) (m plan.Module, ok bool, err error)
}

// Object is what a target compiled of one module.
type Object any

// Kernel is a kernel of a module: its name and the LLVM element type of
// each buffer argument (emit.ArgElems), for targets that wrap kernels.
type Kernel struct {
	Name  string
	Elems []string
}

// Set is a set of artefact names.
type Set map[string]bool

// Has reports whether the set holds any of names.
func (s Set) Has(names ...string) bool {
	for _, n := range names {
		if s[n] {
			return true
		}
	}
	return false
}

var (
	mu      sync.Mutex
	targets []Target
)

// Register adds a target. Kernels are named by the IR of the first
// registered target with a GPU machine (Naming), so that the names do
// not depend on the targets a compile builds.
func Register(t Target) {
	mu.Lock()
	defer mu.Unlock()
	targets = append(targets, t)
}

// Unregister removes a target Register added (tests).
func Unregister(t Target) {
	mu.Lock()
	defer mu.Unlock()
	targets = slices.DeleteFunc(targets, func(u Target) bool { return u == t })
}

// All lists the registered targets in the order of registration.
func All() []Target {
	mu.Lock()
	defer mu.Unlock()
	return slices.Clone(targets)
}

// Artefacts lists every registered target's artefact names, in order.
func Artefacts() []string {
	var out []string
	for _, t := range All() {
		out = append(out, t.Artefacts()...)
	}
	return out
}

// Chosen lists the targets that want chooses, in the order of
// registration; an artefact no target has is an error.
func Chosen(want Set) ([]Target, error) {
	all := All()
	var out []Target
	known := Set{}
	for _, t := range all {
		for _, a := range t.Artefacts() {
			known[a] = true
		}
		if want.Has(t.Artefacts()...) {
			out = append(out, t)
		}
	}
	for a := range want {
		if !known[a] {
			return nil, fmt.Errorf("no target makes the artefact %q (expected %s)", a, strings.Join(Artefacts(), ", "))
		}
	}
	return out, nil
}

// Naming is the machine whose GPU-flavour IR names kernels: the first
// registered target's with one (nil: none, and kernels are named by
// their host-flavour IR).
func Naming() emit.Machine {
	for _, t := range All() {
		if mc := t.Machine(); mc != nil {
			return mc
		}
	}
	return nil
}

// Link links objects ([]byte each) and a C source into a shared object,
// DIR/NAME-HASH.so, for a target called name: the hash in the file's
// name keeps libraries of different contents apart when loaded into one
// process. No objects: no file (a plan of views and copies).
func Link(ctx context.Context, tools *toolchain.Tools, dir, name string, objs []Object, csrc string) (plan.Module, bool, error) {
	if len(objs) == 0 {
		return plan.Module{}, false, nil
	}
	bins := make([][]byte, len(objs))
	for i, o := range objs {
		bins[i] = o.([]byte)
	}
	// Compiled for this machine's CPU (toolchain.Host): it may use all
	// of its extensions, which it records.
	features := native.CPUFeatures()
	so, err := tools.Link(ctx, bins, []string{csrc, native.RequiresSource(features)})
	if err != nil {
		return plan.Module{}, false, fmt.Errorf("linking the %s kernels: %w", name, err)
	}
	h := sha256.Sum256(so)
	file := name + "-" + hex.EncodeToString(h[:6]) + ".so"
	if err := os.WriteFile(filepath.Join(dir, file), so, 0o755); err != nil {
		return plan.Module{}, false, err
	}
	return plan.Module{Files: []plan.File{plan.FileOf(file, so)}, Requires: features}, true, nil
}

// ModuleFile is the name, in a plan's folder, of kernel module i's file
// with extension ext ("ptx", "ll", "failed.ll"): what targets that write
// one file per module name them, and what a new compile replaces
// (IsModuleFile).
func ModuleFile(i int, ext string) string {
	return filepath.Join("kernels", fmt.Sprintf("m%d.%s", i, ext))
}

// moduleFile matches ModuleFile's names.
var moduleFile = regexp.MustCompile(`^kernels/m[0-9]+\.[a-z.]+$`)

// IsModuleFile reports whether rel (relative to a plan's folder,
// slash-separated) is named as ModuleFile names files.
func IsModuleFile(rel string) bool { return moduleFile.MatchString(rel) }
