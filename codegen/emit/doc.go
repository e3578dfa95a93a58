// Package emit lowers kernels (codegen/kernel) to LLVM IR with
// github.com/llir/llvm, in two flavours of one module that share every
// line of the loop-nest and expression lowering:
//
//   - GPU: each kernel is a kernel entry of a GPU machine (Machine: a GPU
//     target's package says how entries are marked, where buffers and
//     shared memory live, how a thread reads its special registers, meets
//     its block at a barrier and shuffles values within its warp), taking
//     one pointer per buffer in the machine's global address space and a
//     status word; its form (Form) spreads its elements over threads and
//     blocks: one thread per element, a block per element combining
//     partial reductions with warp shuffles and a shared array, a block
//     per row, a block per tile of a contraction staging its factors in
//     shared arrays (tiled.go), with barriers only where every thread of
//     the block arrives.
//   - Host: each kernel is `void NAME(i8** args, i64 begin, i64 end)`,
//     computing items [begin, end) of its form's host range in one
//     thread; the runtime splits the range over cores.
//
// Values follow the reference interpreter exactly (runtime/interp's
// package comment): float expressions are computed in double and rounded
// only at a store or an explicit cast, integers in i64 wrapped to their
// dtype, bools as 0 or 1; integer division by zero gives 0; casts round,
// wrap and saturate as the interpreter does. Transcendental functions
// come from codegen/mathir, the same IR on both flavours. An access whose
// index can leave its tensor is checked: out of range it yields its
// default, or, without one, records the access site, dimension and index
// in the status word (the first error wins) for the runtime to report.
package emit
