// Package codegen is tofuc's back end: it turns a model's graph (on one
// device, from its schedule) or a partitioned execution graph (on
// several) into a launch plan (runtime/plan) and the compiled kernels the
// plan launches.
//
// Each launch of the schedule becomes a kernel (codegen/kernel), lowered
// by codegen/emit into LLVM IR in two flavours. Kernels are named by the
// hash of their GPU-flavour IR, so that equal lambdas on equal shapes and
// dtypes compile once. The distinct kernels are grouped into a few
// modules; for each, llc writes PTX (GPU flavour), a host object (host
// flavour) and an emulator object (the GPU flavour retargeted by
// codegen/simt); llc runs in parallel and through the disk cache of
// codegen/toolchain. The host objects are linked into host.so, the
// emulator objects with the emulator's runtime into simt.so.
//
// Buffers get offsets in their device's arena by liveness: a buffer is
// live from the step that writes it to the last step that reads it;
// inputs, parameters, outputs and weights computed once live throughout;
// views share their input's memory.
package codegen
