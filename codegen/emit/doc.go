// Package emit lowers kernels (codegen/kernel) to LLVM IR with
// github.com/llir/llvm, in two flavours of one module that share every
// line of the loop-nest and expression lowering:
//
//   - GPU: each kernel is a `ptx_kernel` function listed in
//     `!nvvm.annotations`, taking one pointer per buffer in address space
//     1 (global) and a status word; threads find their element with the
//     special registers (llvm.nvvm.read.ptx.sreg.*), Blocks kernels
//     combine partial reductions with warp shuffles
//     (llvm.nvvm.shfl.sync.bfly.i32) and a shared array in address space
//     3, Tiled kernels stage the factors of a contraction in shared
//     arrays (tiled.go), with barriers (llvm.nvvm.barrier0) only where
//     every thread of the block arrives. llc turns it into PTX; codegen/simt retargets the
//     same IR to the host.
//   - Host: each kernel is `void NAME(i8** args, i64 begin, i64 end)`,
//     computing output elements [begin, end) in one thread; the runtime
//     splits the range over cores.
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
