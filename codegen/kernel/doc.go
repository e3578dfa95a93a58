// Package kernel turns the lambdas of a scheduled launch into a kernel:
// the loop nest a code generator lowers. A kernel computes one tensor
// element by element over its output index space; each element
// evaluates its stages in order (the Def the launch computes, then the
// element-wise operators fused into it, each reading the previous stage
// at the same index). Reductions in the lambdas are inner loops; locals
// that the schedule recomputes are evaluated where they are read;
// everything else a kernel reads is an argument buffer or a constant
// folded in.
//
// The kind of a kernel is read off its lambda, never from a table of
// operators:
//
//   - elementwise: every full-rank read is at the output's own index;
//   - injective: reads at other affine indices (transpose, slice, pad);
//   - gather: an index computed from data (checked at run time);
//   - contraction: a top-level sum of products of two reads whose index
//     variables differ (matmul, convolution);
//   - reduction: any other top-level reduction.
//
// How a kernel is spread over GPU threads and host calls is its form's
// choice (codegen/emit's registered forms), read off what this package
// describes: its kind, its top-level reductions, its row locals (Rows)
// and, for a contraction, its GEMM description.
package kernel
