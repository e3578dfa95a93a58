// Package executor is tofuc's one runner of launch plans (runtime/plan):
// each logical device of a plan gets its own memory (one arena) and its
// own stream of work, and the executor enqueues every device's steps in
// an order that respects their `after` dependencies, recording an event
// after each step another device waits for. It is written against the
// Device interface: runtime/host implements it in this process's memory
// (with runtime/cpu's native kernels, or runtime/simt's emulated GPU
// kernels), runtime/cuda on NVIDIA GPUs. Kinds of devices register
// themselves (Register) under the names `tofuc run --backend` takes.
//
// What every device gets alike:
//
//   - parameters are bound once, the init steps rerun when they change
//     (other tensors, compared by identity); inputs are written every run;
//     inputs, parameters and outputs go to and from their tiles;
//   - a copy step copies a box between buffers of any devices, as
//     strided rows (BoxRows);
//   - a reduce step copies the parts other devices hold into staging
//     buffers of the reducing device, then launches the plan kernel the
//     step names on the parts there; a plan whose reduce step has no such
//     kernel is refused when loaded;
//   - an opaque step runs on the host, in its device's order, on devices
//     whose memory the host reads (HostDevice); on others (a GPU) it is
//     refused when the plan is loaded, naming the function and the step;
//   - status words (plan.StatusWords per launch) are zeroed before each
//     list of steps and read once after it (a check per launch would
//     serialise the streams): the error reported is the first failing
//     launch in device order, then step order (plan.Kernel.StatusError).
package executor
