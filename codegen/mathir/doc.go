// Package mathir builds TDL's element-wise math functions (exp, log,
// tanh, erf, pow, sin, fmod, ...) as LLVM IR, one internal function
// `double @tofuc.math.NAME(double[, double])` per module, defined on
// first use. Kernels compute floats in double exactly as the reference
// interpreter does, which calls Go's math package; so every function
// here is Go's algorithm (FreeBSD msun and Cephes, and the amd64
// assembly of Exp and Log) written again operation by operation, and
// returns Go's result bit for bit as it runs on amd64 with FMA (the
// fused multiply-adds of Go's Exp are emulated exactly with double
// operations). The IR is the same for the GPU and the host flavour: it
// calls no function outside the module, only llvm.sqrt, fabs, copysign,
// floor, ceil, trunc and rint (single instructions on sm_80 and on
// x86-64 with SSE4.1), uses no address space, and picks between cheap
// alternatives with select, branching only around expensive paths (a
// call to exp, Payne-Hanek reduction, the loops of pow and fmod).
// docs/math.md describes each function and its measured accuracy.
package mathir
