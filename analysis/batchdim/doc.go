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
// not depend on the batch at all. For every operator it finds, by the
// symbolic interval analysis of analysis/strategy, the split of its
// outputs' batch axes, and proves that a worker computing sample s reads
// only sample s of every batch input and the same part of every other
// input, for every sample of every size compiled (symbolically where the
// bounds simplify to constants, else by evaluating them at each sample).
// It also refuses an operator that reduces over a batch variable, uses a
// batch index or the batch extent as a value (`y[i] = x[i] * i`, a mean
// over the batch), or produces a value without a batch axis from one with
// it. What it cannot prove it refuses, naming the operator: a plan that
// mixed samples would give silently wrong answers once padded or chunked.
package batchdim
