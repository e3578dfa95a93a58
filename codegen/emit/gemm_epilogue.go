package emit

import (
	"github.com/llir/llvm/ir/value"

	"tofuc/lang"
	tir "tofuc/lang/ir"
)

// The host GEMM's epilogue (gemm.go): every element of a task's block
// evaluated with the kernel's stages, the sum replaced by its value in
// C, and stored; columns that are also the output's last variables run
// as one flat run (flatCols).

// gemmEpilogue evaluates the stages of every element of the task's block
// (rows from r0, columns from jc) with the sum replaced by its accumulated
// value, and stores them.
func (f *fn) gemmEpilogue(t *gemmTask, r0, rows, jc, nc value.Value) {
	g := t.g
	element := func(i, j value.Value) {
		var c value.Value = f.b.NewLoad(t.sumType, f.b.NewGetElementPtr(t.sumType, t.cs, f.b.NewAdd(f.b.NewMul(i, i64(t.ldc)), j)))
		f.hoisted = map[*tir.Reduce]value.Value{g.Sum: f.toDomain(c, g.Sum.T)}
		out := f.flatOffset(varRefs(f.k.Vars), f.varValues(f.k.Vars), f.k.Shape)
		f.store(f.bufs[len(f.bufs)-1], out, f.computeStages(), f.k.Out().DType)
	}
	// The columns that are also the output's last variables (a
	// convolution's oh, ow) run together: one run per value of the
	// columns before them, read and stored at their flat index
	// (flatCols), rather than a run per row of the image, most of it
	// scalar where rows are shorter than vectors.
	last := tir.CommonSuffix(g.Cols, f.k.Vars)
	if len(last) == 0 && len(tir.CommonSuffix(g.Rows, f.k.Vars)) > 0 {
		// The rows end the output (x · W with the weights W as A,
		// the rows their columns: beside fewer rows of x than a strip,
		// or in a chained launch; codegen's prepack packs W as B
		// elsewhere): a column of C is a run of the output. Stored row
		// by row, the tile's values would go one at a time to addresses
		// an output row apart (a 256 × 64 × 1024 linear layer with W as
		// A: 1.1 ms, most of it in those stores, 0.3–0.43 ms so).
		f.forRange(jc, nc, g.Cols, func(j value.Value) {
			f.forRange(r0, rows, g.Rows, func(i value.Value) { element(i, j) })
		})
		f.hoisted = nil
		return
	}
	if len(last) < 2 {
		f.forRange(r0, rows, g.Rows, func(i value.Value) {
			f.forRange(jc, nc, g.Cols, func(j value.Value) { element(i, j) })
		})
		f.hoisted = nil
		return
	}
	span := int64(1)
	for _, v := range last {
		span *= extent(v)
	}
	group := &tir.Var{Name: "cols", Extent: lang.Const(span)}
	runVars := append(append([]*tir.Var(nil), g.Cols[:len(g.Cols)-len(last)]...), group)
	kernelVars := f.kernelVars()
	f.forRange(r0, rows, g.Rows, func(i value.Value) {
		f.forRuns(jc, nc, runVars, func(t, run value.Value) {
			s0 := f.vars[group]
			f.vectorLoop(i64(0), run, func(u value.Value) {
				flat := f.b.NewAdd(s0, u)
				f.unflatten(flat, last, extents(last))
				f.flatCols = &flatCols{vars: last, index: flat, kernel: kernelVars}
				element(i, f.b.NewAdd(t, u))
				f.flatCols = nil
			})
		})
	})
	f.hoisted = nil
}

// flatCols are variables that are the last indices of the element
// being computed, with their flat row-major index: a read or store whose
// last indices are exactly them, over dimensions of their extents, takes
// its flat index from it rather than from the variables (flatOffset).
type flatCols struct {
	vars   []*tir.Var
	index  value.Value
	kernel map[*tir.Var]*tir.Var // kernelVars
}

// flatOffset is the row-major offset of idx in shape, where idx's last
// indices are exprs; with flatCols, and exprs ending in references to
// exactly its variables over dimensions of their extents, from the flat
// index of those.
func (f *fn) flatOffset(exprs []tir.Expr, idx []value.Value, shape []int64) value.Value {
	fc := f.flatCols
	if fc == nil || len(exprs) < len(fc.vars) {
		return flatIndex(f, idx, shape)
	}
	lead := len(exprs) - len(fc.vars)
	inner := int64(1)
	for i, v := range fc.vars {
		r, ok := exprs[lead+i].(*tir.VarRef)
		if !ok || fc.kernel[r.V] != v || shape[lead+i] != extent(v) {
			return flatIndex(f, idx, shape)
		}
		inner *= shape[lead+i]
	}
	return f.b.NewAdd(f.b.NewMul(flatIndex(f, idx[:lead], shape[:lead]), i64(inner)), fc.index)
}

func varRefs(vars []*tir.Var) []tir.Expr {
	out := make([]tir.Expr, len(vars))
	for i, v := range vars {
		out[i] = &tir.VarRef{V: v}
	}
	return out
}
