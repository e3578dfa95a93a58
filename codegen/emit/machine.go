package emit

import (
	"github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/metadata"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"
)

// Machine is what the GPU flavour's lowering asks of the machine a
// module is for: how a module and a kernel are marked, where a kernel's
// buffers and a block's shared memory live, how a thread finds its
// place, meets its block at a barrier and exchanges values within its
// warp. A GPU target's package implements it (codegen/target/...);
// everything else of the lowering is shared by every machine, and the
// host flavour's.
type Machine interface {
	// Name names the machine (the target's name).
	Name() string
	// Start records the machine in a new module (target triple, data
	// layout).
	Start(m *ir.Module)
	// Global and Shared are the address spaces of a kernel's buffers and
	// of the memory a block's threads share.
	Global() types.AddrSpace
	Shared() types.AddrSpace
	// Kernel marks f, whose body is not emitted yet, as a kernel entry
	// of m (calling convention, attributes, annotations) launched with
	// blocks of at most block threads (0: unknown).
	Kernel(m *Module, f *ir.Func, block int64)
	// Register reads a special register as an i32, emitting into b.
	Register(m *Module, b *ir.Block, r Register) value.Value
	// Barrier makes the threads of the block meet, emitting into b.
	Barrier(m *Module, b *ir.Block)
	// ShuffleXor returns the i32 x of the lane of the warp whose index
	// differs from this lane's in the bits of mask, emitting into b.
	ShuffleXor(m *Module, b *ir.Block, x value.Value, mask int64) value.Value
}

// Register is a special register of a GPU thread.
type Register uint8

// Special registers: the thread's index in its block, the block's
// threads, the block's index in the grid, the grid's blocks (all along
// x: kernels are launched on one dimension).
const (
	ThreadIndex Register = iota
	BlockThreads
	BlockIndex
	GridBlocks
)

// Declare returns the declaration of an external function or
// intrinsic of m, made on first use, nounwind (an intrinsic's memory
// effects are LLVM's own: declare).
func (m *Module) Declare(name string, ret types.Type, params ...types.Type) *ir.Func {
	return m.declare(name, ret, params...)
}

// DeclareConvergent is Declare for a function every thread of a group
// must call together (a barrier, a warp shuffle): convergent and
// nounwind.
func (m *Module) DeclareConvergent(name string, ret types.Type, params ...types.Type) *ir.Func {
	if d, ok := m.decls[name]; ok {
		return d
	}
	d := m.newDecl(name, ret, params...)
	d.FuncAttrs = append(d.FuncAttrs, enum.FuncAttrConvergent, enum.FuncAttrNoUnwind)
	return d
}

// Note adds a node to the named metadata name of m (for example a
// kernel's annotation), in order; nodes are numbered tuples that
// MetadataDef made.
func (m *Module) Note(name string, node metadata.Node) {
	if m.notes == nil {
		m.notes = map[string][]metadata.Node{}
	}
	if _, ok := m.notes[name]; !ok {
		m.noteOrder = append(m.noteOrder, name)
	}
	m.notes[name] = append(m.notes[name], node)
}

// MetadataDef adds a numbered metadata tuple to m and returns it.
func (m *Module) MetadataDef(distinct bool, fields ...metadata.Field) *metadata.Tuple {
	return m.metadataDef(distinct, fields...)
}

// Data adds a constant global array of bytes called name to m, visible
// to whoever loads the compiled module (a shared object's symbol, a PTX
// module's global).
func (m *Module) Data(name string, data []byte) {
	g := m.M.NewGlobalDef(name, constant.NewCharArray(data))
	g.Immutable = true
}

// RawField is a metadata field printed as given (a typed value such as
// "i32 1", which llir's metadata types do not build).
type RawField string

func (r RawField) String() string { return string(r) }
