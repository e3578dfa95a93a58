package emit

import (
	"fmt"
	"strings"

	"github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/metadata"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"tofuc/codegen/blocking"
	"tofuc/codegen/kernel"
	"tofuc/codegen/mathir"
	"tofuc/lang"
	tir "tofuc/lang/ir"
)

// Flavour is the target a module is written for.
type Flavour uint8

// Flavours.
const (
	GPU Flavour = iota
	Host
)

func (f Flavour) String() string { return [...]string{"gpu", "host"}[f] }

// Address spaces of the GPU flavour (NVPTX).
const (
	globalSpace types.AddrSpace = 1
	sharedSpace types.AddrSpace = 3
)

// Module is an LLVM module of one flavour, holding kernels.
type Module struct {
	Flavour Flavour
	M       *ir.Module
	math    *mathir.Lib
	decls   map[string]*ir.Func
	// annotations are the !nvvm.annotations entries (GPU flavour).
	annotations []metadata.Node
	// vectorize are the loop properties asking LLVM to vectorise a loop
	// (host flavour), made once per module.
	vectorize []metadata.Field
}

// NewModule starts an empty module.
func NewModule(f Flavour) *Module {
	m := &Module{Flavour: f, M: ir.NewModule(), decls: map[string]*ir.Func{}}
	if f == GPU {
		m.M.TargetTriple = "nvptx64-nvidia-cuda"
		m.M.DataLayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
	}
	m.math = mathir.New(m.M)
	// One instruction where the host has it; both flavours alike, so that
	// the emulator runs the GPU flavour's IR on this host unchanged.
	m.math.NativeFMA = mathir.HostHasFMA()
	return m
}

// String is the module's LLVM IR text.
func (m *Module) String() string {
	if len(m.annotations) > 0 {
		m.M.NamedMetadataDefs["nvvm.annotations"] = &metadata.NamedDef{Name: "nvvm.annotations", Nodes: m.annotations}
	}
	return m.M.String()
}

// StatusWords is the length of a kernel's status buffer (i64 words): the
// failing access site plus one (0 when none failed), its dimension and
// the index.
const StatusWords = 3

// Add lowers kernel k as the function name.
func (m *Module) Add(name string, k *kernel.Kernel) (err error) {
	defer func() {
		// The lowering reports unsupported input by panicking with a
		// loweringError, so that each construct stays a small function.
		if r := recover(); r != nil {
			le, ok := r.(loweringError)
			if !ok {
				panic(r)
			}
			err = fmt.Errorf("%s: %w", k.Label, le.err)
		}
	}()
	f := &fn{m: m, k: k, vars: map[*tir.Var]value.Value{}, unrolled: 1}
	if m.Flavour == GPU {
		f.gpuFunc(name)
	} else {
		f.hostFunc(name)
	}
	return nil
}

type loweringError struct{ err error }

func fail(format string, args ...any) { panic(loweringError{fmt.Errorf(format, args...)}) }

// storageType is how a dtype is laid out in memory.
func storageType(dt lang.DType) types.Type {
	switch dt.Bits() {
	case 8:
		return types.I8
	case 16:
		return types.I16
	case 32:
		if dt.IsFloat() {
			return types.Float
		}
		return types.I32
	case 64:
		if dt.IsFloat() {
			return types.Double
		}
		return types.I64
	}
	fail("dtype %s has no storage type", dt)
	return nil
}

// gpuFunc defines k as a ptx_kernel with one global pointer per buffer
// and the status words.
func (f *fn) gpuFunc(name string) {
	var params []*ir.Param
	for i, a := range f.k.LaunchArgs() {
		params = append(params, ir.NewParam(fmt.Sprintf("a%d", i), pointer(storageType(a.DType), globalSpace)))
	}
	params = append(params, ir.NewParam("status", pointer(types.I64, globalSpace)))
	f.f = f.m.M.NewFunc(name, types.Void, params...)
	f.f.CallingConv = enum.CallingConvPTXKernel
	f.f.FuncAttrs = append(f.f.FuncAttrs, enum.FuncAttrNoUnwind)
	f.b = f.f.NewBlock("entry")
	for _, p := range params[:len(params)-1] {
		f.bufs = append(f.bufs, p)
	}
	f.status = params[len(params)-1]
	note := f.m.metadataDef(false, rawField(f.f.Type().String()+" "+f.f.Ident()), &metadata.String{Value: "kernel"}, rawField("i32 1"))
	f.m.annotations = append(f.m.annotations, note)
	switch {
	case f.k.HostOnly():
		// Packing is for the host's micro-kernel, and a GPU runs a
		// chained launch's kernels as launches of their own: nothing.
	case f.k.Form == kernel.Blocks:
		f.blocksLoop()
	case f.k.Form == kernel.Tiled:
		f.tiledLoop()
	case f.k.Form == kernel.RowsForm:
		f.rowsLoop()
	default:
		tid := f.b.NewAdd(f.b.NewMul(f.sreg("ctaid.x"), f.sreg("ntid.x")), f.sreg("tid.x"))
		stride := f.b.NewMul(f.sreg("nctaid.x"), f.sreg("ntid.x"))
		f.threadsLoop(tid, stride)
	}
	f.b.NewRet(nil)
}

// hostFunc defines k as void NAME(i8** args, i64 begin, i64 end): output
// elements [begin, end), or for a contraction its tasks (HostRange).
func (f *fn) hostFunc(name string) {
	args := ir.NewParam("args", types.NewPointer(types.I8Ptr))
	begin := ir.NewParam("begin", types.I64)
	end := ir.NewParam("end", types.I64)
	f.f = f.m.M.NewFunc(name, types.Void, args, begin, end)
	f.f.FuncAttrs = append(f.f.FuncAttrs, enum.FuncAttrNoUnwind)
	f.b = f.f.NewBlock("entry")
	launchArgs := f.k.LaunchArgs()
	for i, a := range launchArgs {
		f.bufs = append(f.bufs, f.argPointer(args, i, storageType(a.DType)))
	}
	f.status = f.argPointer(args, len(launchArgs), types.I64)
	switch {
	case f.k.GPUOnly:
		// A half of a chained launch, which the host runs as one.
	case f.k.PackOnly:
		f.packStrips(begin, end)
	case f.k.Before != nil:
		f.chainHost(begin, end)
	case f.k.GEMM != nil:
		f.gemmHost(begin, end)
	case f.k.Rows != nil:
		f.rowsHost(begin, end)
	case len(f.k.Vars) == 0 || extent(f.k.Vars[len(f.k.Vars)-1]) < blocking.HostLanes():
		// Runs shorter than a vector would pay a vector loop's set-up
		// each: one flat loop, the index divided per element.
		f.loop(begin, end, i64(1), f.element)
	default:
		f.storeRuns(begin, end, f.interiorReads())
	}
	f.b.NewRet(nil)
}

func (f *fn) argPointer(args value.Value, i int, elem types.Type) value.Value {
	slot := f.b.NewGetElementPtr(types.I8Ptr, args, i64(int64(i)))
	p := f.b.NewLoad(types.I8Ptr, slot)
	return f.b.NewBitCast(p, types.NewPointer(elem))
}

func pointer(elem types.Type, space types.AddrSpace) *types.PointerType {
	p := types.NewPointer(elem)
	p.AddrSpace = space
	return p
}

// vectorizeHint returns a new loop identifier, distinct per loop as
// LLVM requires, whose properties force vectorisation at the host's
// f32 width.
func (m *Module) vectorizeHint() *metadata.Tuple {
	if m.vectorize == nil {
		enable := m.metadataDef(false, &metadata.String{Value: "llvm.loop.vectorize.enable"}, rawField("i1 true"))
		width := m.metadataDef(false, &metadata.String{Value: "llvm.loop.vectorize.width"}, rawField(fmt.Sprintf("i32 %d", blocking.HostLanes())))
		m.vectorize = []metadata.Field{enable, width}
	}
	id := m.metadataDef(true)
	id.Fields = append([]metadata.Field{id}, m.vectorize...)
	return id
}

// metadataDef adds a numbered metadata tuple to the module.
func (m *Module) metadataDef(distinct bool, fields ...metadata.Field) *metadata.Tuple {
	t := &metadata.Tuple{MetadataID: metadata.MetadataID(len(m.M.MetadataDefs)), Fields: fields, Distinct: distinct}
	m.M.MetadataDefs = append(m.M.MetadataDefs, t)
	return t
}

// rawField is a metadata field printed as given (a typed value such as
// "i32 1", which llir's metadata types do not build).
type rawField string

func (r rawField) String() string { return string(r) }

// sreg reads a PTX special register (tid.x, ntid.x, ctaid.x, nctaid.x)
// as an i64.
func (f *fn) sreg(reg string) value.Value {
	fn := f.m.declare("llvm.nvvm.read.ptx.sreg."+reg, types.I32)
	return f.b.NewZExt(f.b.NewCall(fn), types.I64)
}

// declare returns the declaration of an external function or intrinsic.
func (m *Module) declare(name string, ret types.Type, params ...types.Type) *ir.Func {
	if d, ok := m.decls[name]; ok {
		return d
	}
	var ps []*ir.Param
	for _, p := range params {
		ps = append(ps, ir.NewParam("", p))
	}
	d := m.M.NewFunc(name, ret, ps...)
	switch {
	case strings.HasPrefix(name, "llvm.nvvm.barrier") || strings.HasPrefix(name, "llvm.nvvm.shfl"):
		d.FuncAttrs = append(d.FuncAttrs, enum.FuncAttrConvergent, enum.FuncAttrNoUnwind)
	case strings.HasPrefix(name, "llvm."):
		d.FuncAttrs = append(d.FuncAttrs, enum.FuncAttrNoUnwind, enum.FuncAttrReadNone)
	default: // the C library's aligned_alloc and free (host flavour)
		d.FuncAttrs = append(d.FuncAttrs, enum.FuncAttrNoUnwind)
	}
	m.decls[name] = d
	return d
}

func i64(n int64) *constant.Int { return constant.NewInt(types.I64, n) }
func i32(n int64) *constant.Int { return constant.NewInt(types.I32, n) }

// ArgElems lists the LLVM element type of each buffer argument of a
// launch of k, in order (the status words, i64, come after them).
func ArgElems(k *kernel.Kernel) []string {
	args := k.LaunchArgs()
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = storageType(a.DType).String()
	}
	return out
}

// HostRange is the range a host-flavour kernel's calls split, and the
// fewest items worth a thread of their own: output elements, or for a
// contraction its tasks (each a block of columns), for a Rows kernel
// its rows, for a chained launch its blocks of rows.
func HostRange(k *kernel.Kernel) (items, grain int64) {
	if k.PackOnly {
		s := blocking.NewShape(k.GEMM)
		return (s.Rows + s.MR - 1) / s.MR, 1 // strips
	}
	if k.Before != nil {
		return chainBlocks(k), 1
	}
	if k.GEMM != nil {
		return blocking.GEMMTasks(k.GEMM), 1
	}
	if k.Rows != nil {
		return k.Rows.Count, max(1, 4096/k.Rows.Work(k))
	}
	return k.Elements, 4096
}
