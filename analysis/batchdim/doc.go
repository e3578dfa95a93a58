// Package batchdim proves that a model computes every sample of a
// dynamic batch on its own, which is what lets one compiled plan serve
// any batch size: a batch is run as chunks of the sizes compiled, the last
// chunk padded with copies of its last sample, and the outputs' padding
// dropped (pipeline.CompileDynamic, runtime/dynamic).
//
// Check reads the model elaborated with its batch extent kept as a shape
// symbol (check.Module.SymbolicModel). A value carries the batch along at
// most one dimension, whose extent is a constant multiple k of the symbol
// (its batch axis: sample s is the block [k·s, k·s+k−1] of it), or does
// not depend on the batch at all. Two properties are proved per operator:
//
//   - Locality: by the symbolic interval analysis of analysis/strategy,
//     the worker computing sample s of the outputs (their batch axes
//     split) reads only sample s of every batch input, and of every other
//     input a part that does not move with s (symbolically where the
//     bounds reduce to constants, else at every sample of every size
//     compiled and of one size beyond).
//   - Translation invariance (shift.go): a chunk computes its samples at
//     positions of its own, so a sample must be computed the same way at
//     every position. Every index into a batch axis moves by that
//     tensor's k when the sample moves by one, every other index and
//     every value not at all (`m % k` of a batch variable of factor k
//     does not move; `n`, `(c + n) % C` and the batch extent do), and no
//     reduction runs over a batch variable.
//
// An operator computed without the batch must not mention the batch
// size at all (it would change with the chunk's size). What Check cannot
// prove it refuses, naming the operator: a plan that mixed samples would
// give silently wrong answers once padded or chunked.
package batchdim
