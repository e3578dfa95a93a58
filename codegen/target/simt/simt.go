// Package simt is the SIMT emulator's target: a GPU target's modules
// (its Machine must be Emulable) rewritten for the host, so that the
// emulator (runtime/simt) runs the very IR that becomes GPU code on
// machines without a GPU. Each kernel NAME gains an entry `void
// NAME.simt(i8** args)` that loads its arguments from an array and calls
// it; the modules, compiled by llc for this machine (toolchain.Host),
// are linked with the emulator's runtime (csrc/simt.c) into one shared
// object, simt-HASH.so.
package simt

import (
	"context"
	_ "embed"
	"fmt"
	"strings"

	"tofuc/codegen/emit"
	"tofuc/codegen/target"
	"tofuc/codegen/toolchain"
	"tofuc/runtime/plan"
)

// Source is the emulator's runtime, linked with the modules: blocks
// spread over threads, the threads of a block that meet at barriers or
// shuffles run as fibers.
//
//go:embed csrc/simt.c
var Source string

// Emulable is a GPU machine whose modules the emulator runs: Emulated
// rewrites a module's text for the host, the machine's special
// registers, barriers and shuffles calling the emulator's functions
// (tofuc_simt_tid_x, tofuc_simt_barrier, ... in csrc/simt.c).
type Emulable interface {
	emit.Machine
	Emulated(text string) (string, error)
}

// Target emulates the GPU machine Of.
type Target struct {
	Of Emulable
}

// Name is "simt".
func (Target) Name() string { return "simt" }

// Artefacts: "simt", the shared object.
func (Target) Artefacts() []string { return []string{"simt"} }

// Machine is the emulated machine: its modules are what is emulated.
func (t Target) Machine() emit.Machine { return t.Of }

// Compile rewrites the module for the host, adds the kernels' entries
// and compiles it for this machine.
func (t Target) Compile(ctx context.Context, tools *toolchain.Tools, text string, kernels []target.Kernel, _ target.Set) (target.Object, error) {
	s, err := t.Of.Emulated(text)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	b.WriteString(s)
	for _, k := range kernels {
		entry(&b, k)
	}
	return tools.Compile(ctx, []byte(b.String()), toolchain.Host)
}

// Finish links the objects with the emulator's runtime.
func (t Target) Finish(ctx context.Context, tools *toolchain.Tools, dir string, objs []target.Object, _ target.Set) (plan.Module, bool, error) {
	return target.Link(ctx, tools, dir, t.Name(), objs, Source)
}

// entry writes `void NAME.simt(i8** args)`: it loads argument i from
// args[i] (the status words last) and calls the kernel.
func entry(b *strings.Builder, k target.Kernel) {
	fmt.Fprintf(b, "\ndefine void @\"%s.simt\"(i8** %%args) {\n", k.Name)
	var params []string
	for i, elem := range append(append([]string{}, k.Elems...), "i64") {
		fmt.Fprintf(b, "  %%s%d = getelementptr i8*, i8** %%args, i64 %d\n", i, i)
		fmt.Fprintf(b, "  %%r%d = load i8*, i8** %%s%d\n", i, i)
		fmt.Fprintf(b, "  %%p%d = bitcast i8* %%r%d to %s*\n", i, i, elem)
		params = append(params, fmt.Sprintf("%s* %%p%d", elem, i))
	}
	fmt.Fprintf(b, "  call void @%s(%s)\n  ret void\n}\n", k.Name, strings.Join(params, ", "))
}
