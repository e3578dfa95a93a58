// Package hostlib calls vendor libraries on the host: the
// single-precision matrix products of OpenBLAS (cblas_sgemm) and oneDNN
// (dnnl_sgemm), which placement (docs/placement.md) may choose for a
// plan's contractions. The libraries are loaded at run time (purego, as
// the CUDA driver is), so that tofuc-run stays free of cgo and a machine
// without them runs the generated kernels instead.
package hostlib
