package emit

import (
	"fmt"

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
	"tofuc/lang/precision"
)

// Flavour is the kind of machine a module is written for.
type Flavour uint8

// Flavours: a GPU's (threads in blocks, Machine says the rest) and the
// host's (a range of items per call).
const (
	GPU Flavour = iota
	Host
)

func (f Flavour) String() string { return [...]string{"gpu", "host"}[f] }

// Module is an LLVM module of one flavour, holding kernels.
type Module struct {
	Flavour Flavour
	// Precision is the arithmetic of the module's kernels
	// (lang/precision): which float dtypes compute in f32 (domain).
	Precision precision.Mode
	// Machine is the GPU flavour's machine (nil for the host's).
	Machine Machine
	M       *ir.Module
	math    *mathir.Lib
	decls   map[string]*ir.Func
	// notes are the named metadata Note adds, by name, and the names
	// in the order first added.
	notes     map[string][]metadata.Node
	noteOrder []string
	// vectorize are the loop properties asking LLVM to vectorise a loop
	// (host flavour), made once per module.
	vectorize []metadata.Field
}

// NewHostModule starts an empty host-flavour module computing in mode p.
func NewHostModule(p precision.Mode) *Module { return newModule(Host, nil, p) }

// NewGPUModule starts an empty GPU-flavour module for machine mc
// computing in mode p.
func NewGPUModule(mc Machine, p precision.Mode) *Module { return newModule(GPU, mc, p) }

func newModule(f Flavour, mc Machine, p precision.Mode) *Module {
	m := &Module{Flavour: f, Machine: mc, Precision: p, M: ir.NewModule(), decls: map[string]*ir.Func{}}
	if mc != nil {
		mc.Start(m.M)
	}
	m.math = mathir.New(m.M)
	// One instruction where the host has it; both flavours alike, so that
	// the emulator runs the GPU flavour's IR on this host unchanged.
	m.math.NativeFMA = mathir.HostHasFMA()
	return m
}

// String is the module's LLVM IR text.
func (m *Module) String() string {
	for _, name := range m.noteOrder {
		m.M.NamedMetadataDefs[name] = &metadata.NamedDef{Name: name, Nodes: m.notes[name]}
	}
	return m.M.String()
}

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

// domain is the type in which the module's kernels compute values of
// dtype t: i64 for integers and bools (wrapped to t after each
// operation); for floats, double, except f32, f16 and bf16 where the
// precision mode computes them in f32 (precision.Mode.InF32).
func (m *Module) domain(t lang.DType) types.Type {
	switch {
	case !t.IsFloat():
		return types.I64
	case t != lang.F64 && m.Precision.InF32():
		return types.Float
	}
	return types.Double
}

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

// gpuFunc defines k as a kernel of the module's machine with one global
// pointer per buffer and the status words, lowered by k's form.
func (f *fn) gpuFunc(name string) {
	mc := f.m.Machine
	var params []*ir.Param
	for i, a := range f.k.LaunchArgs() {
		params = append(params, ir.NewParam(fmt.Sprintf("a%d", i), pointer(storageType(a.DType), mc.Global())))
	}
	params = append(params, ir.NewParam("status", pointer(types.I64, mc.Global())))
	f.f = f.m.M.NewFunc(name, types.Void, params...)
	f.f.FuncAttrs = append(f.f.FuncAttrs, enum.FuncAttrNoUnwind)
	f.b = f.f.NewBlock("entry")
	for _, p := range params[:len(params)-1] {
		f.bufs = append(f.bufs, p)
	}
	f.status = params[len(params)-1]
	if f.k.HostOnly() {
		// Packing is for the host's micro-kernel, and a GPU runs a
		// chained launch's kernels as launches of their own: nothing.
		mc.Kernel(f.m, f.f, 0)
	} else {
		form := FormOf(f.k, f.m.Precision)
		mc.Kernel(f.m, f.f, form.Launch(f.k, f.m.Precision).Block)
		form.GPU(&Func{f})
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
	if !f.k.GPUOnly { // a half of a chained launch, which the host runs as one
		FormOf(f.k, f.m.Precision).Host(&Func{f}, begin, end)
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
		enable := m.metadataDef(false, &metadata.String{Value: "llvm.loop.vectorize.enable"}, RawField("i1 true"))
		width := m.metadataDef(false, &metadata.String{Value: "llvm.loop.vectorize.width"}, RawField(fmt.Sprintf("i32 %d", blocking.HostLanes())))
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

// reg reads a special register of the module's machine as an i64.
func (f *fn) reg(r Register) value.Value {
	return f.b.NewZExt(f.m.Machine.Register(f.m, f.b, r), types.I64)
}

// declare returns the declaration of an external function (the C
// library's aligned_alloc and free, host flavour) or intrinsic
// (Declare), nounwind. It declares no memory effects: LLVM gives an
// intrinsic its own attributes whatever its declaration says (a masked
// store writes through its pointer; ldmatrix and cp.async read and write
// memory), so that readnone here was wrong for some and only misled.
func (m *Module) declare(name string, ret types.Type, params ...types.Type) *ir.Func {
	if d, ok := m.decls[name]; ok {
		return d
	}
	d := m.newDecl(name, ret, params...)
	d.FuncAttrs = append(d.FuncAttrs, enum.FuncAttrNoUnwind)
	return d
}

// newDecl declares a function of m, without attributes.
func (m *Module) newDecl(name string, ret types.Type, params ...types.Type) *ir.Func {
	var ps []*ir.Param
	for _, p := range params {
		ps = append(ps, ir.NewParam("", p))
	}
	d := m.M.NewFunc(name, ret, ps...)
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
