package emit

import (
	"slices"

	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"tofuc/codegen/blocking"
	"tofuc/codegen/kernel"
	"tofuc/lang"
	tir "tofuc/lang/ir"
	"tofuc/lang/precision"
)

// The scatter form: a sum that selects its terms by an index read from
// data, out[.., u, ..] = sum(r: select(g(r) == u && ..., e, 0)), with
// g reading none of the output's variables. It is what the gradient of
// every gather is (an embedding table's, ONNX Gather's and
// GatherElements'), and a histogram. Element by element, each output
// element tests every term: O(V·R) per column for V values of u and R
// terms; a multi-modal model's embedding gradient (1,000 rows, 512
// tokens, 256 columns) took 174 ms. Here an item computes a block of
// the output: rows (values of u) by a chunk of the output's other
// variables (its columns, flat; scatter.blocks). For each term r in
// order it computes v = g(r) once, and where v is one of the block's
// rows adds the term to v's accumulators (the rest of the condition
// tested per column, as the element-by-element code would at u = v);
// then it runs the kernel's stages from the accumulators and stores:
// O(R + V) per column where the block holds every row.
//
// Each output element's terms are added in the order of r, in the
// accumulator's domain (double in the exact mode), as one element's sum
// would add them; the skipped terms are the zeros the select gives. The
// accumulators, a block's, are scratch memory: at least a cache line of
// columns (stores of whole lines to the output), more while they fit in
// scatterScratch bytes; only the rows a term reaches are zeroed and read
// (accumulators.touched). Where even a chunk of every row would take
// more than maxScatterScratch, the form does not apply. The GPU
// computes the kernel as it would without this form (gpuForm: blocks
// or threads).
type scatterForm struct{}

func (scatterForm) Name() string { return "scatter" }

func (scatterForm) Applies(k *kernel.Kernel, _ precision.Mode) bool {
	_, ok := scatterOf(k)
	return ok
}

func (scatterForm) Launch(k *kernel.Kernel, p precision.Mode) Launch {
	return gpuForm(k, p).Launch(k, p)
}

// gpuForm is the form a scatter kernel takes on a GPU: the one it takes
// where this form does not apply (a block per element for a long sum).
func gpuForm(k *kernel.Kernel, p precision.Mode) Form {
	if (blocksForm{}).Applies(k, p) {
		return blocksForm{}
	}
	return threadsForm{}
}

// HostRange: the blocks (scatter.blocks), a grain of at least
// scatterWork terms and stores.
func (scatterForm) HostRange(k *kernel.Kernel) (items, grain int64) {
	sc, _ := scatterOf(k)
	b := sc.blocks()
	return b.items(), max(1, scatterWork/(sc.terms()+b.rows*b.cols))
}

// scatterWork is the least work (terms added, values stored) a host
// thread is given.
const scatterWork = 1 << 14

// scatterScratch is what a call's accumulators may take, in bytes,
// beyond a block of minScatterChunk columns; maxScatterScratch bounds
// that block (a vocabulary of millions of rows: the form does not
// apply).
const (
	scatterScratch    = 1 << 20
	maxScatterScratch = 1 << 28
)

// minScatterChunk is the fewest columns a block holds (where there are
// as many): a cache line of f32 outputs. A chunk of one or two columns
// wrote each of the output's lines 8 to 16 times: 200,000 rows of 512
// columns took 2.7 s, against 0.2 s element by element.
const minScatterChunk = CacheLine / 4

// minScatterRows is the fewest rows a block of rows holds.
const minScatterRows = 256

// scatterAccBytes is the size of an accumulator the blocks are sized
// for: a double's (or an i64's).
const scatterAccBytes = 8

// scatterBlocks is how a scatter kernel's output is split into blocks of
// rows (values of u) by columns, each an item of its host range: rows ×
// cols accumulators at a time, rowBlocks × colChunks blocks, the column
// chunk innermost.
type scatterBlocks struct {
	rows, cols, rowBlocks, colChunks int64
}

func (b scatterBlocks) items() int64 { return b.rowBlocks * b.colChunks }

// blocks is the split of sc's output, for accumulators of
// scatterAccBytes (HostRange's split must not depend on the precision
// mode: a block of f32 accumulators is half its budget). Every row in
// one block where a column chunk of them all fits the scratch; else,
// where the index is computed once a term, blocks of rows of every
// column that fit it (the output written row after row: DLRM's
// gradient of 100,000 rows of 64 columns took 4.4–5.0 ms in chunks of
// 16 columns, each row's line a quarter of the way through its
// neighbours', and 1.6 in blocks of 2,048 whole rows), as long as
// computing every term's index once a block costs at most an eighth of
// the stores; else chunks of columns of every row. No columns: no
// blocks.
func (sc scatter) blocks() scatterBlocks {
	values, width := extent(sc.u), sc.width()
	if width == 0 {
		return scatterBlocks{rows: values}
	}
	b := scatterBlocks{rows: values, cols: min(width, max(minScatterChunk, scatterScratch/(values*scatterAccBytes)))}
	if b.cols < width && !sc.perColumn {
		byRows := scatterBlocks{cols: min(width, max(minScatterChunk, scatterScratch/(minScatterRows*scatterAccBytes)))}
		byRows.rows = min(values, max(minScatterRows, scatterScratch/(byRows.cols*scatterAccBytes)))
		if 8*blocking.CeilDiv(values, byRows.rows)*sc.terms() <= values*width {
			b = byRows
		}
	}
	b.rowBlocks = max(1, blocking.CeilDiv(values, b.rows))
	b.colChunks = max(1, blocking.CeilDiv(width, b.cols))
	return b
}

func (scatterForm) GPU(f *Func) { gpuForm(f.f.k, f.f.m.Precision).GPU(f) }

// HostDefs: the sum at every output element is computed instead as
// each term's guards and index, once a term and block or, where they
// read a column, once a term, block of rows and column, and at each
// column the rest of the condition and the term where selected, added.
func (scatterForm) HostDefs(k *kernel.Kernel) (dense, instead []*tir.Def) {
	sc, ok := scatterOf(k)
	if !ok {
		return nil, nil
	}
	first := k.Stages[0]
	// The index is computed for every block: once an item of the host
	// range, or, per column, once a block of rows and column.
	b := sc.blocks()
	indexVars := []*tir.Var{{Name: "block", Extent: lang.Const(b.items())}}
	if sc.perColumn {
		indexVars = append([]*tir.Var{{Name: "block", Extent: lang.Const(b.rowBlocks)}}, sc.columns...)
	}
	// where is e where conds hold (a select of 0 elsewhere, which counts
	// nothing).
	where := func(conds []tir.Expr, e tir.Expr) *tir.Select {
		return &tir.Select{C: allOf(conds), A: e, B: &tir.Const{T: e.Type()}, T: e.Type()}
	}
	index := &tir.Def{Tensor: first.Tensor, Vars: append(slices.Clone(indexVars), sc.sum.Vars...), Body: where(sc.guards, sc.g)}
	terms := &tir.Def{Tensor: first.Tensor, Vars: sc.columns, Body: &tir.Reduce{Kind: tir.Sum, Vars: sc.sum.Vars, Body: where(sc.rest, sc.sel.A), T: sc.sum.T}}
	return []*tir.Def{{Tensor: first.Tensor, Vars: first.Vars, Body: sc.sum}}, []*tir.Def{index, terms}
}

// allOf is the conjunction of conds, true where there are none.
func allOf(conds []tir.Expr) tir.Expr {
	if len(conds) == 0 {
		return &tir.Const{T: lang.Bool, Int: 1}
	}
	all := conds[0]
	for _, c := range conds[1:] {
		all = &tir.Binary{Op: tir.OpAnd, L: all, R: c, T: lang.Bool}
	}
	return all
}

func (scatterForm) Host(f *Func, begin, end value.Value) {
	sc, ok := scatterOf(f.f.k)
	if !ok {
		fail("kernel %s is not of the scatter form", f.f.k.Label)
	}
	f.f.scatterHost(sc, begin, end)
}

// scatter is a kernel of the scatter form: the first stage's sum, the
// output variable u its condition equates with the index g, the
// conjuncts before that equation (tested before g is computed: they may
// guard g's reads) and after it (tested at u = g), the output's other
// variables (the columns) and whether g or a guard reads them (then
// they are computed per column, else once per term, as a gather's index
// is).
type scatter struct {
	sum          *tir.Reduce
	sel          *tir.Select
	u            *tir.Var
	g            tir.Expr
	guards, rest []tir.Expr
	columns      []*tir.Var
	shape        []int64
	perColumn    bool
}

// minScatterValues: below this many values of u, testing each is as
// cheap as computing the index.
const minScatterValues = 4

// scatterOf describes k as a kernel of the scatter form: one top-level
// reduction in its first stage, a sum of more than unrollLimit terms of
// select(C, e, 0) where C is a chain of && with a conjunct u == g (or
// g == u), u an output variable of at least minScatterValues values and
// g an integer, neither g nor the conjuncts before it reading u. Rows,
// chains and GEMMs keep their own forms.
func scatterOf(k *kernel.Kernel) (scatter, bool) {
	if len(k.Reductions) != 1 || k.Rows != nil || k.Before != nil || k.GEMM != nil || k.PackOnly || len(k.Vars) == 0 {
		return scatter{}, false
	}
	sum := k.Reductions[0]
	sel, ok := sum.Body.(*tir.Select)
	if !ok || sum.Kind != tir.Sum || sum.T == lang.Bool || !isZero(sel.B) || tir.Extent(sum.Vars) <= unrollLimit {
		// A sum of at most unrollLimit terms is straight-line vector code
		// element by element, faster than a pass over accumulators (16
		// terms for 50,000 rows of 512 columns: 29 against 43 ms; 64
		// terms: 1,041 against 50 ms).
		return scatter{}, false
	}
	outVars := map[*tir.Var]bool{}
	for _, v := range k.Vars {
		outVars[v] = true
	}
	conjuncts := splitAnd(sel.C)
	for i, c := range conjuncts {
		u, g, ok := equation(c, outVars)
		if !ok || extent(u) < minScatterValues || reads(g, u) || slices.ContainsFunc(conjuncts[:i], func(c tir.Expr) bool { return reads(c, u) }) {
			continue
		}
		sc := scatter{sum: sum, sel: sel, u: u, g: g, guards: conjuncts[:i], rest: conjuncts[i+1:]}
		for j, v := range k.Vars {
			if v != u {
				sc.columns = append(sc.columns, v)
				sc.shape = append(sc.shape, k.Shape[j])
				sc.perColumn = sc.perColumn || reads(g, v) || slices.ContainsFunc(sc.guards, func(c tir.Expr) bool { return reads(c, v) })
			}
		}
		if extent(u)*min(sc.width(), minScatterChunk)*8 > maxScatterScratch {
			return scatter{}, false
		}
		return sc, true
	}
	return scatter{}, false
}

// reads reports whether e reads variable v.
func reads(e tir.Expr, v *tir.Var) bool { return tir.VarRefs(e)[v] }

// isZero reports whether e is the constant 0.
func isZero(e tir.Expr) bool {
	c, ok := e.(*tir.Const)
	return ok && (c.T.IsFloat() && c.Float == 0 || !c.T.IsFloat() && c.Int == 0)
}

// splitAnd is the conjuncts of a chain of &&, left to right.
func splitAnd(e tir.Expr) []tir.Expr {
	if b, ok := e.(*tir.Binary); ok && b.Op == tir.OpAnd {
		return append(splitAnd(b.L), splitAnd(b.R)...)
	}
	return []tir.Expr{e}
}

// equation reports whether c is u == g or g == u for an output variable
// u and an integer g that is not a 64-bit unsigned (whose values above
// 2⁶³ an i64 would read as negative). u may be cast to an integer type
// that holds every value of u (the checker casts it to an i32 index's
// type: ids[i] == i32(u)), where the cast changes no value.
func equation(c tir.Expr, outVars map[*tir.Var]bool) (*tir.Var, tir.Expr, bool) {
	b, ok := c.(*tir.Binary)
	if !ok || b.Op != tir.OpEq {
		return nil, nil, false
	}
	for _, side := range [][2]tir.Expr{{b.L, b.R}, {b.R, b.L}} {
		u, ok := outputVar(side[0], outVars)
		if t := side[1].Type(); ok && t.IsInt() && t != lang.U64 {
			return u, side[1], true
		}
	}
	return nil, nil, false
}

// outputVar is e's output variable where e is one, or one cast to an
// integer type that holds all its values.
func outputVar(e tir.Expr, outVars map[*tir.Var]bool) (*tir.Var, bool) {
	if c, ok := e.(*tir.Cast); ok && c.T.IsInt() {
		_, hi := intRange(c.T)
		u, ok := outputVar(c.X, outVars)
		return u, ok && (c.T == lang.U64 || extent(u)-1 <= hi)
	}
	if ref, ok := e.(*tir.VarRef); ok && outVars[ref.V] {
		return ref.V, true
	}
	return nil, false
}

// terms is the number of terms of each output element's sum.
func (sc scatter) terms() int64 { return tir.Extent(sc.sum.Vars) }

// width is the number of columns: the product of the other variables'
// extents.
func (sc scatter) width() int64 { return tir.Extent(sc.columns) }

// accumulators are a block's sums: chunk of type t a row (row v at
// (v-first)·chunk, its first count in use, for rows [first,
// first+rows)), and a byte a row that says whether a term has reached
// it, so that only those rows are zeroed and read (an embedding table
// of 100,000 rows gets at most a row per token).
type accumulators struct {
	sums, touched      value.Value
	t                  types.Type
	chunk              int64
	first, rows, count value.Value
}

// at is the address of row v's accumulator for column j of the chunk.
func (a *accumulators) at(f *fn, v, j value.Value) value.Value {
	return f.b.NewGetElementPtr(a.t, a.sums, f.b.NewAdd(f.b.NewMul(f.b.NewSub(v, a.first), i64(a.chunk)), j))
}

// holds is whether row v is one of the block's, as an i1.
func (a *accumulators) holds(f *fn, v value.Value) value.Value {
	return f.b.NewAnd(f.b.NewICmp(enum.IPredSGE, v, a.first), f.b.NewICmp(enum.IPredSLT, v, f.b.NewAdd(a.first, a.rows)))
}

// touchedAt is the address of row v's byte.
func (a *accumulators) touchedAt(f *fn, v value.Value) value.Value {
	return f.b.NewGetElementPtr(types.I8, a.touched, f.b.NewSub(v, a.first))
}

// isTouched is whether a term has reached row v, as an i1.
func (a *accumulators) isTouched(f *fn, v value.Value) value.Value {
	return f.b.NewICmp(enum.IPredNE, f.b.NewLoad(types.I8, a.touchedAt(f, v)), constant.NewInt(types.I8, 0))
}

// touch zeroes row v's accumulators the first time a term reaches it.
func (f *fn) touch(a *accumulators, sum *tir.Reduce, v value.Value) {
	f.ifThen(f.b.NewXor(a.isTouched(f, v), constant.True), func() {
		f.vectorLoop(i64(0), a.count, func(j value.Value) {
			f.b.NewStore(f.identity(tir.Sum, sum.T), a.at(f, v, j))
		})
		f.b.NewStore(constant.NewInt(types.I8, 1), a.touchedAt(f, v))
	})
}

// scatterHost computes blocks [begin, end) (scatter.blocks).
func (f *fn) scatterHost(sc scatter, begin, end value.Value) {
	t := f.m.domain(sc.sum.T)
	b := sc.blocks()
	a := &accumulators{t: t, chunk: b.cols, sums: f.scratch(b.rows*b.cols*accBytes(t), t), touched: f.scratch(b.rows, types.I8)}
	f.loop(begin, end, i64(1), func(item value.Value) {
		a.first = f.b.NewMul(f.b.NewUDiv(item, i64(b.colChunks)), i64(b.rows))
		a.rows = f.smin(i64(b.rows), f.b.NewSub(i64(extent(sc.u)), a.first))
		first := f.b.NewMul(f.b.NewURem(item, i64(b.colChunks)), i64(b.cols))
		a.count = f.smin(i64(b.cols), f.b.NewSub(i64(sc.width()), first))
		f.vectorLoop(i64(0), a.rows, func(r value.Value) {
			f.b.NewStore(constant.NewInt(types.I8, 0), f.b.NewGetElementPtr(types.I8, a.touched, r))
		})
		f.scatterTerms(sc, a, first)
		f.scatterStore(sc, a, first)
	})
	f.freeScratch(a.sums)
	f.freeScratch(a.touched)
}

// accBytes is the size of an accumulator of type t (i64, float or
// double).
func accBytes(t types.Type) int64 {
	if t.Equal(types.Float) {
		return 4
	}
	return 8
}

// scatterTerms adds each term, in the order of the sum's variables, to
// the accumulator of its value v = g and each column of [first,
// first+count) whose condition holds there at u = v (the guards and the
// equation hold; the conjuncts after it are tested at u = v, as &&
// tests them): accumulator (v-a.first)·chunk + j for column first + j.
func (f *fn) scatterTerms(sc scatter, a *accumulators, first value.Value) {
	columns := func(body func(j value.Value)) {
		f.loop(i64(0), a.count, i64(1), func(j value.Value) {
			f.unflatten(f.b.NewAdd(first, j), sc.columns, sc.shape)
			body(j)
		})
	}
	// index runs body with u bound to v = g where the guards hold and v
	// is one of the block's rows (in range), row v's accumulators zeroed
	// if no term reached them before.
	index := func(body func(v value.Value)) {
		f.whenAll(sc.guards, func() {
			v := f.expr(sc.g)
			f.ifThen(a.holds(f, v), func() {
				f.vars[sc.u] = v
				f.touch(a, sc.sum, v)
				body(v)
			})
		})
	}
	add := func(v, j value.Value) {
		f.whenAll(sc.rest, func() {
			at := a.at(f, v, j)
			f.b.NewStore(f.combine(tir.Sum, sc.sum.T, f.b.NewLoad(a.t, at), f.exprTo(sc.sel.A, sc.sum.T)), at)
		})
	}
	f.termLoops(sc.sum.Vars, func() {
		if sc.perColumn {
			columns(func(j value.Value) { index(func(v value.Value) { add(v, j) }) })
			return
		}
		index(func(v value.Value) { columns(func(j value.Value) { add(v, j) }) })
	})
}

// termLoops runs body at every value of vars, the last innermost, in
// order, each bound in f.vars.
func (f *fn) termLoops(vars []*tir.Var, body func()) {
	if len(vars) == 0 {
		body()
		return
	}
	f.loop(i64(0), i64(extent(vars[0])), i64(1), func(i value.Value) {
		f.vars[vars[0]] = i
		f.termLoops(vars[1:], body)
	})
}

// whenAll runs body where every condition holds, testing them in order
// and each only where those before it hold, as && evaluates them.
func (f *fn) whenAll(conds []tir.Expr, body func()) {
	if len(conds) == 0 {
		body()
		return
	}
	f.ifThen(f.holds(conds[0]), func() { f.whenAll(conds[1:], body) })
}

// holds is boolean expression e as an i1.
func (f *fn) holds(e tir.Expr) value.Value {
	return f.b.NewICmp(enum.IPredNE, f.truth(f.expr(e), e.Type()), i64(0))
}

// scatterStore runs the kernel's stages at every output element of the
// block's rows and columns [first, first+count), its sum read from the
// accumulators, and stores them.
func (f *fn) scatterStore(sc scatter, a *accumulators, first value.Value) {
	f.loop(a.first, f.b.NewAdd(a.first, a.rows), i64(1), func(v value.Value) {
		// A row no term reached stores its stages at the sum's identity,
		// its accumulators never written.
		row := func(sum func(j value.Value) value.Value) func() {
			return func() {
				f.vectorLoop(i64(0), a.count, func(j value.Value) {
					f.unflatten(f.b.NewAdd(first, j), sc.columns, sc.shape)
					f.vars[sc.u] = v
					f.hoisted = map[*tir.Reduce]value.Value{sc.sum: f.finishReduce(tir.Sum, sc.sum.T, sum(j))}
					f.store(f.bufs[len(f.bufs)-1], flatIndex(f, f.varValues(f.k.Vars), f.k.Shape), f.computeStages(), f.k.Out().DType)
					f.hoisted = nil
				})
			}
		}
		f.ifElse(a.isTouched(f, v),
			row(func(j value.Value) value.Value { return f.b.NewLoad(a.t, a.at(f, v, j)) }),
			row(func(value.Value) value.Value { return f.identity(tir.Sum, sc.sum.T) }))
	})
}
