// Package native loads compiled host code and gives it memory: shared
// objects are checked (whole ELF objects), copied into sealed files in
// memory and opened with dlopen through github.com/ebitengine/purego (no
// cgo), functions are called with their addresses, and device buffers
// live in anonymous memory maps outside the Go heap, so that pointers to
// them may be handed to native code freely. It also encodes tensors to
// and from their native layout: each element at its dtype's width (f16
// and bf16 as their 16-bit patterns, bools as one byte 0 or 1),
// little-endian, row-major.
package native
