// Package schedule decides how a model's dataflow graph runs as kernels:
// which element-wise nodes fuse into the kernel of their producer, which
// nodes are zero-copy views of an input's memory, which nodes are
// computed from the weights alone (once, when the weights are bound), and
// how long every value lives. It reads only the graph and the operators'
// lambdas. The roofline (analysis/cost) prices a schedule, the rewriter
// (rewrite/search) optimises against that price, and the code generator
// (codegen) emits exactly these kernels, so the three never disagree.
//
// The rules, in graph order:
//
//   - a node whose inputs are all parameters, constants or outputs of such
//     nodes (a weight transformation) is precomputed: a kernel of its own
//     that runs when the weights are bound, not per run;
//   - a node each of whose outputs reads one contiguous range of one input
//     (IsView) is a view: no kernel, its outputs alias the input's memory;
//   - a node with one output and no reduction, one of whose floating
//     inputs has the node's shape, is read only at the node's own index
//     (fusibleOn), is produced by a kernel, has no other consumer and is
//     not a graph output, joins that kernel: the value is computed in
//     registers and never stored (its other inputs may be read anywhere:
//     a broadcast bias or scale);
//   - every other node starts a kernel.
package schedule
