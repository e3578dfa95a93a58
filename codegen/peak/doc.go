// Package peak measures the host's peak float32 FLOP rate, the figure a
// kernel's efficiency is a share of: a loop of independent fused
// multiply-adds on the host's widest vectors, held in registers (no
// memory traffic), compiled by the same toolchain as the kernels and run
// on every thread at once. `tofuc bench --peak` prints it.
package peak
