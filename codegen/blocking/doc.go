// Package blocking decides how contractions (kernel.GEMM) are blocked
// for the machines tofuc targets: on the host, the micro-kernel's
// register tile from the CPU's vector width, the cache blocking of the
// depth, rows and columns, how the work is split into tasks, where the
// factors are packed and how long the packed buffers and the shared B
// are; on a GPU, the thread-block tile of the tiled form. It is
// arithmetic on shapes and CPU features, decided in one place that the
// code generator's builder (the plan's buffers and host ranges), the
// emitter (codegen/emit, which lowers those decisions to LLVM IR) and
// the cost model's calibration read.
package blocking
