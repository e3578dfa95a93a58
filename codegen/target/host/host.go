// Package host is the host target: kernels lowered in the host flavour,
// compiled by llc for this machine's CPU (toolchain.Host) and linked,
// with csrc/host.c, into one shared object, host-HASH.so, that
// runtime/cpu loads.
package host

import (
	"context"
	_ "embed"

	"tofuc/codegen/emit"
	"tofuc/codegen/target"
	"tofuc/codegen/toolchain"
	"tofuc/runtime/plan"
)

// Source is the C part of the host shared object (csrc/host.c: glibc
// keeps the kernels' per-call scratch memory between calls).
//
//go:embed csrc/host.c
var Source string

// Target is the host target.
type Target struct{}

func init() { target.Register(Target{}) }

// Name is "host".
func (Target) Name() string { return "host" }

// Artefacts: "host", the shared object.
func (Target) Artefacts() []string { return []string{"host"} }

// Machine is nil: the host flavour.
func (Target) Machine() emit.Machine { return nil }

// Compile compiles the module for this machine.
func (Target) Compile(ctx context.Context, tools *toolchain.Tools, text string, _ []target.Kernel, _ target.Set) (target.Object, error) {
	return tools.Compile(ctx, []byte(text), toolchain.Host)
}

// Finish links the objects with csrc/host.c.
func (t Target) Finish(ctx context.Context, tools *toolchain.Tools, dir string, objs []target.Object, _ target.Set) (plan.Module, bool, error) {
	return target.Link(ctx, tools, dir, t.Name(), objs, Source)
}
