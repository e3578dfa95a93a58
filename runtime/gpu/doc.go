// Package gpu runs launch plans (runtime/plan) on GPU-like devices: each
// logical device of a plan gets its own memory (one arena) and its own
// stream of work, and the executor enqueues every device's steps in an
// order that respects their `after` dependencies, recording an event
// after each step another device waits for. It is written against the
// Device interface, which runtime/cuda implements on NVIDIA GPUs and
// runtime/gpu/emu on host memory (kernels under the SIMT emulator), so
// that everything but the driver is tested on machines without a GPU.
//
// The semantics are runtime/cpu's: steps per device in order, copies of
// boxes between buffers of any devices, reductions, parameters bound once
// with the init steps rerun when they change, inputs and outputs by
// tiles. The differences are where a GPU forces them:
//
//   - a reduce step launches the plan kernel it names, on the reducing
//     device, after copying the parts held by other devices into staging
//     buffers there; a plan whose reduce step has no such kernel is
//     refused when loaded;
//   - opaque steps need a host and are refused when the plan is loaded,
//     naming the function and the step;
//   - status words are checked once, after all devices have finished a
//     list of steps (a check per launch would serialise the streams): the
//     error reported is the first failing launch in device order, then
//     step order, worded as runtime/cpu words it.
package gpu
