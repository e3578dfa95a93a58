// Package cpu runs launch plans (runtime/plan) on the host: every device
// of the plan is simulated by a goroutine with an arena of its own, steps
// run in each device's order and wait for the steps they depend on,
// copies and reductions move data between the arenas. Kernels run on an
// Engine: the host-flavour kernels natively (NewHost, the cpu backend),
// or the GPU-flavour kernels under the SIMT emulator (runtime/simt).
// Nothing falls back to the interpreter: a plan is what runs.
package cpu
