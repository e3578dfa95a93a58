// Package nvptx is the NVIDIA GPU target: the GPU flavour's lowering for
// LLVM's NVPTX back end (Machine: the triple and data layout, address
// spaces 1 and 3, `ptx_kernel` functions listed in `!nvvm.annotations`,
// the special registers, barriers and warp shuffles as nvvm
// intrinsics), compiled by opt and llc to sm_80 PTX (LLC), which the
// CUDA driver compiles for the GPU it runs on. Its files are one PTX
// module per group of kernels (kernels/mN.ptx) and, with --emit llvm,
// their LLVM IR (kernels/mN.ll). It is the only package of the code
// generator that knows NVPTX; Emulated rewrites its modules for the SIMT
// emulator (codegen/target/simt).
package nvptx

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/metadata"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"tofuc/codegen/emit"
	"tofuc/codegen/target"
	"tofuc/codegen/target/simt"
	"tofuc/codegen/toolchain"
	"tofuc/lang/precision"
	"tofuc/runtime/plan"
)

// Name is the target's name: its key in plans.
const Name = "nvptx"

// The target registers itself, and the SIMT emulator's target, which
// runs its modules on the host (Emulated), after it.
func init() {
	target.Register(Target{})
	target.Register(simt.Target{Of: Machine{}})
}

// Machine is NVPTX as the GPU flavour's lowering sees it.
type Machine struct{}

// Name is the target's name.
func (Machine) Name() string { return Name }

// Start sets the module's triple and data layout.
func (Machine) Start(m *ir.Module) {
	m.TargetTriple = "nvptx64-nvidia-cuda"
	m.DataLayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
}

// Global is address space 1, where kernel buffers live.
func (Machine) Global() types.AddrSpace { return 1 }

// Shared is address space 3, a block's shared memory.
func (Machine) Shared() types.AddrSpace { return 3 }

// annotations is the named metadata listing kernels.
const annotations = "nvvm.annotations"

// Kernel makes f a ptx_kernel listed in !nvvm.annotations, with its
// block's largest size (.maxntid: ptxas may give each thread the
// registers that many threads leave).
func (Machine) Kernel(m *emit.Module, f *ir.Func, block int64) {
	f.CallingConv = enum.CallingConvPTXKernel
	fn := emit.RawField(f.Type().String() + " " + f.Ident())
	m.Note(annotations, m.MetadataDef(false, fn, &metadata.String{Value: "kernel"}, emit.RawField("i32 1")))
	if block > 0 {
		m.Note(annotations, m.MetadataDef(false, fn, &metadata.String{Value: "maxntidx"}, emit.RawField(fmt.Sprintf("i32 %d", block))))
	}
}

// registers are the special registers' names.
var registers = map[emit.Register]string{
	emit.ThreadIndex:  "tid.x",
	emit.BlockThreads: "ntid.x",
	emit.BlockIndex:   "ctaid.x",
	emit.GridBlocks:   "nctaid.x",
}

// Register reads a special register (llvm.nvvm.read.ptx.sreg.*).
func (Machine) Register(m *emit.Module, b *ir.Block, r emit.Register) value.Value {
	return b.NewCall(m.Declare("llvm.nvvm.read.ptx.sreg."+registers[r], types.I32))
}

// Barrier is llvm.nvvm.barrier0 (bar.sync 0).
func (Machine) Barrier(m *emit.Module, b *ir.Block) {
	b.NewCall(m.DeclareConvergent("llvm.nvvm.barrier0", types.Void))
}

// ShuffleXor is shfl.sync.bfly over the whole warp.
func (Machine) ShuffleXor(m *emit.Module, b *ir.Block, x value.Value, mask int64) value.Value {
	shfl := m.DeclareConvergent("llvm.nvvm.shfl.sync.bfly.i32", types.I32, types.I32, types.I32, types.I32, types.I32)
	return b.NewCall(shfl, i32(-1), x, i32(mask), i32(31))
}

// Round is cvt.rna.tf32.f32 (llvm.nvvm.f2tf32.rna) in TF32,
// cvt.rn.bf16.f32 (llvm.nvvm.f2bf16.rn) in BF16, and in F16 emit's
// integer conversion (as every target computes it).
func (Machine) Round(m *emit.Module, b *ir.Block, p precision.Mode, x value.Value) value.Value {
	switch p {
	case precision.TF32:
		return b.NewCall(m.Declare(tf32Intrinsic, types.I32, types.Float), x)
	case precision.BF16:
		return b.NewCall(m.Declare(bf16Intrinsic, types.I16, types.Float), x)
	}
	return m.F16Bits(b, x)
}

// LoadMatrix is ldmatrix.sync.aligned.m8n8.xN.shared.b16
// (llvm.nvvm.ldmatrix.sync.aligned.m8n8.xN.b16).
func (Machine) LoadMatrix(m *emit.Module, b *ir.Block, row value.Value, n int) []value.Value {
	regs := make([]types.Type, n)
	for e := range regs {
		regs[e] = types.I32
	}
	ld := m.DeclareConvergent(ldmatrixIntrinsic(n), types.NewStruct(regs...), row.Type())
	call := b.NewCall(ld, row)
	out := make([]value.Value, n)
	for e := range out {
		out[e] = b.NewExtractValue(call, uint64(e))
	}
	return out
}

// ldmatrixIntrinsic is the intrinsic of an ldmatrix of n matrices.
func ldmatrixIntrinsic(n int) string {
	return fmt.Sprintf("llvm.nvvm.ldmatrix.sync.aligned.m8n8.x%d.b16", n)
}

// MMA is mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 in TF32,
// m16n8k16.row.col.f32.bf16.bf16.f32 in BF16 and
// m16n8k16.row.col.f32.f16.f16.f32 in F16
// (llvm.nvvm.mma.m16n8k8.row.col.tf32, m16n8k16.row.col.bf16,
// m16n8k16.row.col.f32.f32).
func (Machine) MMA(m *emit.Module, b *ir.Block, p precision.Mode, a [4]value.Value, bv [2]value.Value, c [4]value.Value) [4]value.Value {
	f32, r := types.Float, types.Type(types.I32)
	regs := append(a[:], bv[:]...)
	if p == precision.F16 {
		// The intrinsic takes an F16 register as a <2 x half>.
		r = halves
		for e, x := range regs {
			regs[e] = b.NewBitCast(x, halves)
		}
	}
	mma := m.DeclareConvergent(mmaIntrinsic[p], mmaResult, r, r, r, r, r, r, f32, f32, f32, f32)
	call := b.NewCall(mma, append(regs, c[:]...)...)
	var d [4]value.Value
	for k := range d {
		d[k] = b.NewExtractValue(call, uint64(k))
	}
	return d
}

// CopyAsync is cp.async.ca.shared.global of 4 bytes
// (llvm.nvvm.cp.async.ca.shared.global.4), cp.async.cg.shared.global of
// 16 (llvm.nvvm.cp.async.cg.shared.global.16: through L2 only, as a
// stage is read once per block).
func (Machine) CopyAsync(m *emit.Module, b *ir.Block, dst, src value.Value, bytes int) {
	name := copyAsyncIntrinsic
	if bytes == 16 {
		name = copyAsync16Intrinsic
	}
	b.NewCall(m.Declare(name, types.Void, dst.Type(), src.Type()), dst, src)
}

// Commit is cp.async.commit_group.
func (Machine) Commit(m *emit.Module, b *ir.Block) {
	b.NewCall(m.Declare(commitIntrinsic, types.Void))
}

// Wait is cp.async.wait_group.
func (Machine) Wait(m *emit.Module, b *ir.Block, pending int64) {
	b.NewCall(m.Declare(waitIntrinsic, types.Void, types.I32), i32(pending))
}

// The asynchronous copies' intrinsics (sm_80, PTX 7.0).
const (
	copyAsyncIntrinsic   = "llvm.nvvm.cp.async.ca.shared.global.4"
	copyAsync16Intrinsic = "llvm.nvvm.cp.async.cg.shared.global.16"
	commitIntrinsic      = "llvm.nvvm.cp.async.commit.group"
	waitIntrinsic        = "llvm.nvvm.cp.async.wait.group"
)

var _ emit.AsyncCopies = Machine{}

// halves is an F16 register of a factor.
var halves = types.NewVector(2, types.Half)

var _ emit.TensorCores = Machine{}

// The tensor-core intrinsics (sm_80, PTX 7.0): the factors' rounding,
// the products by mode, and their result.
const (
	tf32Intrinsic = "llvm.nvvm.f2tf32.rna"
	bf16Intrinsic = "llvm.nvvm.f2bf16.rn"
)

var mmaIntrinsic = map[precision.Mode]string{
	precision.TF32: "llvm.nvvm.mma.m16n8k8.row.col.tf32",
	precision.BF16: "llvm.nvvm.mma.m16n8k16.row.col.bf16",
	precision.F16:  "llvm.nvvm.mma.m16n8k16.row.col.f32.f32",
}

var mmaResult = types.NewStruct(types.Float, types.Float, types.Float, types.Float)

// LLC compiles for NVIDIA GPUs: sm_80 PTX, which the driver
// JIT-compiles for newer GPUs. opt -O3 runs first, for the NVPTX target
// (the triple the module already has, named again for modules without
// one): it inlines the math library's functions (llc alone left them
// calls, with parameter-space traffic per element) and runs the middle
// end as the host's modules get it. Neither tool contracts: opt forms no
// fused multiply-add from plain operations (no fast-math flags are ever
// emitted; -fp-contract=off says so again) and llc's
// -nvptx-fma-level=0 keeps NVPTX from fusing, so that the PTX rounds
// every operation as the host flavour and the emulator do (the
// emulator's module goes through the same opt -O3, for the host). Loop
// strength reduction is off: in LLVM 14 it can rewrite the parity of a
// grid-stride index into an i1 multiply that NVPTX cannot select.
var LLC = toolchain.Target{
	Opt:  []string{"-O3", "-mtriple=nvptx64-nvidia-cuda", "-mcpu=sm_80", "-mattr=+ptx70", "-fp-contract=off"},
	Args: []string{"-march=nvptx64", "-mcpu=sm_80", "-mattr=+ptx70", "-O3", "-nvptx-fma-level=0", "-disable-lsr"},
}

// Target is the NVIDIA GPU target.
type Target struct{}

// Name is "nvptx".
func (Target) Name() string { return Name }

// Artefacts: "llvm" writes the modules' LLVM IR, "ptx" their PTX.
func (Target) Artefacts() []string { return []string{"llvm", "ptx"} }

// Machine is NVPTX's.
func (Target) Machine() emit.Machine { return Machine{} }

// object is a compiled module: its IR and its PTX (each when asked).
type object struct{ ir, ptx string }

// Compile keeps the module's IR and compiles it to PTX.
func (Target) Compile(ctx context.Context, tools *toolchain.Tools, text string, _ []target.Kernel, want target.Set) (target.Object, error) {
	o := object{}
	if want["llvm"] {
		o.ir = text
	}
	if want["ptx"] {
		ptx, err := tools.Compile(ctx, []byte(text), LLC)
		if err != nil {
			return nil, err
		}
		o.ptx = string(ptx)
		if strings.Contains(o.ptx, ".extern .func") {
			return nil, fmt.Errorf("internal error: PTX module calls an external function")
		}
	}
	return o, nil
}

// Finish writes kernels/mN.ll and kernels/mN.ptx.
func (Target) Finish(_ context.Context, _ *toolchain.Tools, dir string, objs []target.Object, want target.Set) (plan.Module, bool, error) {
	var m plan.Module
	for i, obj := range objs {
		o := obj.(object)
		if want["llvm"] {
			ll := target.ModuleFile(i, "ll")
			if err := writeFile(dir, ll, o.ir); err != nil {
				return m, false, err
			}
			m.IR = append(m.IR, plan.FileOf(ll, []byte(o.ir)))
		}
		if want["ptx"] {
			ptx := target.ModuleFile(i, "ptx")
			if err := writeFile(dir, ptx, o.ptx); err != nil {
				return m, false, err
			}
			m.Files = append(m.Files, plan.FileOf(ptx, []byte(o.ptx)))
		}
	}
	return m, len(m.Files)+len(m.IR) > 0, nil
}

// writeFile writes text to the file rel of the plan's folder dir, making
// its folder.
func writeFile(dir, rel, text string) error {
	path := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(text), 0o644)
}

func i32(n int64) value.Value { return constant.NewInt(types.I32, n) }
