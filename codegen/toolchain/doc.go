// Package toolchain finds and runs the external tools of code
// generation: LLVM 14's llc and opt (llir/llvm v0.3.6 writes LLVM 14
// typed-pointer IR, so another LLVM is refused with a clear error; the
// host flavour runs opt -O3 before llc for inlining and vectorisation)
// and the host C
// compiler that links host objects into a shared library. Every run is
// cached on disk by the hash of the tool's identity, its arguments and its
// input, so an unchanged kernel is never compiled twice.
package toolchain
