// Package plan is the launch plan: the artefact that `tofuc compile`
// writes (plan.json beside the kernel modules) and every runtime reads.
// It imports no compiler package, so that a runtime built without the
// compiler (cmd/tofuc-run) can execute it. docs/plan.md is its schema.
//
// A plan runs a model on Devices devices. Each device has one arena of
// memory; every buffer lives at an offset in its device's arena, buffers
// whose lives do not overlap sharing memory. Each device runs its steps
// in order: kernel launches, copies of a region of another buffer (from
// any device), collective reductions of partial results, and host calls
// of opaque functions. A step waits for the steps it depends on, on
// other devices, before it starts. Init steps run when the parameters
// are bound (weights transformed once); Steps run on every call.
package plan
