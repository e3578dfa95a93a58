package emit

import (
	"fmt"

	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"tofuc/codegen/kernel"
	tir "tofuc/lang/ir"
	"tofuc/lang/precision"
)

// The rows form (docs/codegen.md): a kernel whose output reads row
// locals (kernel.Rows: softmax, the normalisations, attention rows)
// computes them once per row. On a GPU a block per row (blocks stride
// over the rows), its threads covering the longest of the row, its
// buffers and its locals' reductions, its buffered locals in shared
// memory; on the host a call computes rows [begin, end), at least
// enough rows for 4,096 terms of work a thread.
type rowsForm struct{}

func (rowsForm) Name() string { return "rows" }

func (rowsForm) Applies(k *kernel.Kernel, _ precision.Mode) bool { return k.Rows != nil }

func (rowsForm) Launch(k *kernel.Kernel, _ precision.Mode) Launch {
	return Launch{Grid: min(k.Rows.Count, maxGrid), Block: blockCovering(max(k.ReduceLen, k.Rows.Len, k.Rows.BufferLen)), Shared: 32*8 + k.Rows.BufferBytes(), Sync: true}
}

func (rowsForm) HostRange(k *kernel.Kernel) (items, grain int64) {
	return k.Rows.Count, max(1, 4096/k.Rows.Work(k))
}

func (rowsForm) GPU(f *Func) { f.f.rowsLoop() }

func (rowsForm) Host(f *Func, begin, end value.Value) { f.f.rowsHost(begin, end) }

// rowsLoop lowers a rows kernel on the GPU: blocks stride over the rows;
// for each, every thread takes part in the row locals' reductions (so
// all hold their values), then the threads share the row's elements.
func (f *fn) rowsLoop() {
	f.smem = f.sharedSlots()
	tid, ntid := f.reg(ThreadIndex), f.reg(BlockThreads)
	rows := f.k.Rows
	vars, shape := f.rowVars(rows.RowVars(len(f.k.Vars)))
	f.rowBufs = map[*tir.Def]value.Value{}
	for i, l := range rows.Locals {
		if l.BufferLen > 0 {
			f.rowBufs[l.Def] = f.sharedRowBuffer(i, l)
		}
	}
	f.loop(f.reg(BlockIndex), i64(rows.Count), f.reg(GridBlocks), func(key value.Value) {
		f.computeRow(key, func(r *tir.Reduce) value.Value { return f.blockReduce(r, tid, ntid) })
		f.loop(tid, i64(rows.Len), ntid, func(t value.Value) {
			f.unflatten(t, vars, shape)
			f.storeElement()
		})
	})
}

// rowsHost lowers a rows kernel on the host: rows [begin, end), each its
// row locals then its elements, the innermost row variable in a loop
// that can be vectorised.
func (f *fn) rowsHost(begin, end value.Value) {
	rows := f.k.Rows
	vars, _ := f.rowVars(rows.RowVars(len(f.k.Vars)))
	f.rowBufs = map[*tir.Def]value.Value{}
	for _, l := range rows.Locals {
		if l.BufferLen > 0 {
			f.rowBufs[l.Def] = f.scratch(l.BufferLen*int64(max(1, l.Def.Tensor.DType.Size())), storageType(l.Def.Tensor.DType))
		}
	}
	f.loop(begin, end, i64(1), func(key value.Value) {
		f.computeRow(key, nil)
		f.forRange(i64(0), i64(rows.Len), vars, func(value.Value) { f.storeElement() })
	})
	for _, l := range rows.Locals {
		if p, ok := f.rowBufs[l.Def]; ok {
			f.freeScratch(p)
		}
	}
}

// sharedRowBuffer defines the shared array holding buffered row local l
// (the i-th) and returns a pointer to its first element.
func (f *fn) sharedRowBuffer(i int, l kernel.RowLocal) value.Value {
	st := storageType(l.Def.Tensor.DType)
	g := f.m.M.NewGlobalDef(fmt.Sprintf("%s.row%d", f.f.Name(), i), constant.NewUndef(types.NewArray(uint64(l.BufferLen), st)))
	g.Linkage = enum.LinkageInternal
	g.AddrSpace = f.m.Machine.Shared()
	g.Typ = nil // recomputed with the address space
	g.Align = 8
	return f.b.NewGetElementPtr(g.ContentType, g, i64(0), i64(0))
}

// computeRow binds the key variables to row key and computes the row
// locals in order; reduce, when not nil, computes their top-level
// reductions over the block (the GPU flavour, whose threads share the
// elements of the buffered locals), else one thread computes all.
func (f *fn) computeRow(key value.Value, reduce func(*tir.Reduce) value.Value) {
	rows := f.k.Rows
	vars, shape := f.rowVars(rows.Key)
	f.unflatten(key, vars, shape)
	f.rowVals = map[*tir.Def]value.Value{}
	for _, l := range rows.Locals {
		for i, v := range l.Def.Vars {
			if l.At[i] >= 0 {
				f.vars[v] = f.vars[f.k.Vars[l.At[i]]]
			}
		}
		if l.BufferLen > 0 {
			f.fillRowBuffer(l, reduce != nil)
			continue
		}
		f.hoisted = map[*tir.Reduce]value.Value{}
		if reduce != nil {
			for _, r := range l.Reductions {
				f.hoisted[r] = reduce(r)
			}
		}
		f.rowVals[l.Def] = f.convert(f.expr(l.Def.Body), l.Def.Body.Type(), l.Def.Tensor.DType, true)
		for _, v := range l.Def.Vars {
			delete(f.vars, v)
		}
	}
	f.hoisted = nil
}

// fillRowBuffer computes every element of buffered row local l at the
// bound key into its buffer; shared, the block's threads share them,
// between barriers: the previous row's readers are done before it is
// overwritten, and all of it is written before it is read.
func (f *fn) fillRowBuffer(l kernel.RowLocal, shared bool) {
	vars, shape := l.Buffered()
	buf := f.rowBufs[l.Def]
	fill := func(t value.Value) {
		f.unflatten(t, vars, shape)
		f.store(buf, t, f.convert(f.expr(l.Def.Body), l.Def.Body.Type(), l.Def.Tensor.DType, true), l.Def.Tensor.DType)
	}
	if shared {
		f.barrier()
		f.loop(f.reg(ThreadIndex), i64(l.BufferLen), f.reg(BlockThreads), fill)
		f.barrier()
	} else {
		f.vectorLoop(i64(0), i64(l.BufferLen), fill) // its elements are independent
	}
	for _, v := range l.Def.Vars {
		delete(f.vars, v)
	}
}

// rowBufferOffset is where the element at idx of buffered row local d
// (at the row's key) lies in its buffer: row-major over the variables
// the buffer spans.
func (f *fn) rowBufferOffset(d *tir.Def, idx []value.Value) value.Value {
	for _, l := range f.k.Rows.Locals {
		if l.Def != d {
			continue
		}
		_, shape := l.Buffered()
		var at []value.Value
		for i, p := range l.At {
			if p < 0 {
				at = append(at, idx[i])
			}
		}
		return flatIndex(f, at, shape)
	}
	fail("local %s has no row buffer", d.Tensor.Name)
	return nil
}

// rowVars are the kernel's variables at positions, and their extents.
func (f *fn) rowVars(positions []int) ([]*tir.Var, []int64) {
	vars := make([]*tir.Var, len(positions))
	shape := make([]int64, len(positions))
	for i, p := range positions {
		vars[i], shape[i] = f.k.Vars[p], f.k.Shape[p]
	}
	return vars, shape
}

// storeElement computes and stores the output element at the bound
// variables.
func (f *fn) storeElement() {
	idx := make([]value.Value, len(f.k.Vars))
	for i, v := range f.k.Vars {
		idx[i] = f.vars[v]
	}
	f.store(f.bufs[len(f.bufs)-1], flatIndex(f, idx, f.k.Shape), f.computeStages(), f.k.Out().DType)
}
