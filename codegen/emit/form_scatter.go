package emit

import (
	"slices"

	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

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
// tokens, 256 columns) took 174 ms. Here a call computes a range of the
// output's other variables (its columns): for each term r in order it
// computes v = g(r) once, and where 0 ≤ v < V adds the term to v's
// accumulators (the rest of the condition tested per column, as the
// element-by-element code would at u = v); then it runs the kernel's
// stages from the accumulators and stores: O(R + V) per column.
//
// Each output element's terms are added in the order of r, in the
// accumulator's domain (double in the exact mode), as one element's sum
// would add them; the skipped terms are the zeros the select gives. The
// accumulators, V a column, are scratch memory of at most
// scatterScratch bytes: wider ranges go a chunk of columns at a time.
// The GPU computes the kernel as the threads form does.
type scatterForm struct{}

func (scatterForm) Name() string { return "scatter" }

func (scatterForm) Applies(k *kernel.Kernel, _ precision.Mode) bool {
	_, ok := scatterOf(k)
	return ok
}

func (scatterForm) Launch(k *kernel.Kernel, p precision.Mode) Launch {
	return threadsForm{}.Launch(k, p)
}

// HostRange: the columns (the output's other variables, flat), a grain
// of at least scatterWork terms and stores.
func (scatterForm) HostRange(k *kernel.Kernel) (items, grain int64) {
	sc, _ := scatterOf(k)
	perColumn := sc.terms() + extent(sc.u)
	return sc.width(), max(1, scatterWork/perColumn)
}

// scatterWork is the least work (terms added, values stored) a host
// thread is given.
const scatterWork = 1 << 14

// scatterScratch bounds a call's accumulators, in bytes.
const scatterScratch = 1 << 20

func (scatterForm) GPU(f *Func) { threadsForm{}.GPU(f) }

// HostWork: the stages at every output element, less the sum's terms
// there, plus each column's terms, counted once (the condition, the
// index and the term where selected, as the sum of e).
func (scatterForm) HostWork(k *kernel.Kernel, count func(*tir.Def) (int64, error)) (int64, error) {
	sc, _ := scatterOf(k)
	var total int64
	for _, d := range k.Stages {
		n, err := count(d)
		if err != nil {
			return 0, err
		}
		total += n
	}
	first := k.Stages[0]
	dense, err := count(&tir.Def{Tensor: first.Tensor, Vars: first.Vars, Body: sc.sum})
	if err != nil {
		return 0, err
	}
	terms, err := count(&tir.Def{Tensor: first.Tensor, Vars: sc.columns, Body: &tir.Reduce{Kind: tir.Sum, Vars: sc.sum.Vars, Body: sc.sel.A, T: sc.sum.T}})
	return total - dense + terms, err
}

func (scatterForm) Host(f *Func, begin, end value.Value) {
	sc, _ := scatterOf(f.f.k)
	f.f.scatterHost(sc, begin, end)
}

// scatter is a kernel of the scatter form: the first stage's sum, the
// output variable u its condition equates with the index g, the
// conjuncts before that equation (tested before g is computed: they may
// guard g's reads), the output's other variables (the columns) and
// whether g or a guard reads them (then they are computed per column,
// as a sort's ranks are, else once per term, as a gather's index is).
type scatter struct {
	sum       *tir.Reduce
	sel       *tir.Select
	u         *tir.Var
	g         tir.Expr
	guards    []tir.Expr
	columns   []*tir.Var
	shape     []int64
	perColumn bool
}

// minScatterValues: below this many values of u, testing each is as
// cheap as computing the index.
const minScatterValues = 4

// scatterOf describes k as a kernel of the scatter form: one top-level
// reduction in its first stage, a sum of select(C, e, 0) where C is a
// chain of && with a conjunct u == g (or g == u), u an output variable
// of at least minScatterValues values and g an integer, neither g nor
// the conjuncts before it reading u. Rows, chains and GEMMs keep their
// own forms.
func scatterOf(k *kernel.Kernel) (scatter, bool) {
	if len(k.Reductions) != 1 || k.Rows != nil || k.Before != nil || k.GEMM != nil || k.PackOnly || len(k.Vars) == 0 {
		return scatter{}, false
	}
	sum := k.Reductions[0]
	sel, ok := sum.Body.(*tir.Select)
	if !ok || sum.Kind != tir.Sum || sum.T == lang.Bool || !isZero(sel.B) {
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
		sc := scatter{sum: sum, sel: sel, u: u, g: g, guards: conjuncts[:i]}
		for j, v := range k.Vars {
			if v != u {
				sc.columns = append(sc.columns, v)
				sc.shape = append(sc.shape, k.Shape[j])
				sc.perColumn = sc.perColumn || reads(g, v) || slices.ContainsFunc(sc.guards, func(c tir.Expr) bool { return reads(c, v) })
			}
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
// 2⁶³ an i64 would read as negative).
func equation(c tir.Expr, outVars map[*tir.Var]bool) (*tir.Var, tir.Expr, bool) {
	b, ok := c.(*tir.Binary)
	if !ok || b.Op != tir.OpEq {
		return nil, nil, false
	}
	for _, side := range [][2]tir.Expr{{b.L, b.R}, {b.R, b.L}} {
		ref, isVar := side[0].(*tir.VarRef)
		if !isVar || !outVars[ref.V] {
			continue
		}
		if t := side[1].Type(); t.IsInt() && t != lang.U64 {
			return ref.V, side[1], true
		}
	}
	return nil, nil, false
}

// terms is the number of terms of each output element's sum.
func (sc scatter) terms() int64 { return tir.Extent(sc.sum.Vars) }

// width is the number of columns: the product of the other variables'
// extents.
func (sc scatter) width() int64 { return tir.Extent(sc.columns) }

// scatterHost computes columns [begin, end), chunk columns at a time.
func (f *fn) scatterHost(sc scatter, begin, end value.Value) {
	acc := f.m.domain(sc.sum.T)
	values := extent(sc.u)
	chunk := min(max(1, scatterScratch/(values*accBytes(acc))), sc.width())
	scratch := f.scratch(values*chunk*accBytes(acc), acc)
	f.loop(begin, end, i64(chunk), func(first value.Value) {
		count := f.smin(i64(chunk), f.b.NewSub(end, first))
		f.loop(i64(0), i64(values*chunk), i64(1), func(i value.Value) {
			f.b.NewStore(f.identity(tir.Sum, sc.sum.T), f.b.NewGetElementPtr(acc, scratch, i))
		})
		f.scatterTerms(sc, scratch, acc, chunk, first, count)
		f.scatterStore(sc, scratch, acc, chunk, first, count)
	})
	f.freeScratch(scratch)
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
// first+count) whose condition holds there at u = v (C tested whole, as
// the element's code tests it): accumulator v·chunk + j for column
// first + j.
func (f *fn) scatterTerms(sc scatter, scratch value.Value, acc types.Type, chunk int64, first, count value.Value) {
	columns := func(body func(j value.Value)) {
		f.loop(i64(0), count, i64(1), func(j value.Value) {
			f.unflatten(f.b.NewAdd(first, j), sc.columns, sc.shape)
			body(j)
		})
	}
	// index runs body with u bound to v = g where the guards hold and v
	// is in range.
	index := func(body func(v value.Value)) {
		f.whenAll(sc.guards, func() {
			v := f.expr(sc.g)
			f.ifThen(f.b.NewAnd(f.b.NewICmp(enum.IPredSGE, v, i64(0)), f.b.NewICmp(enum.IPredSLT, v, i64(extent(sc.u)))), func() {
				f.vars[sc.u] = v
				body(v)
			})
		})
	}
	add := func(v, j value.Value) {
		f.ifThen(f.holds(sc.sel.C), func() {
			at := f.b.NewGetElementPtr(acc, scratch, f.b.NewAdd(f.b.NewMul(v, i64(chunk)), j))
			f.b.NewStore(f.combine(tir.Sum, sc.sum.T, f.b.NewLoad(acc, at), f.exprTo(sc.sel.A, sc.sum.T)), at)
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

// scatterStore runs the kernel's stages at every output element of
// columns [first, first+count), its sum read from the accumulators, and
// stores them.
func (f *fn) scatterStore(sc scatter, scratch value.Value, acc types.Type, chunk int64, first, count value.Value) {
	f.loop(i64(0), i64(extent(sc.u)), i64(1), func(v value.Value) {
		f.loop(i64(0), count, i64(1), func(j value.Value) {
			f.unflatten(f.b.NewAdd(first, j), sc.columns, sc.shape)
			f.vars[sc.u] = v
			sum := f.b.NewLoad(acc, f.b.NewGetElementPtr(acc, scratch, f.b.NewAdd(f.b.NewMul(v, i64(chunk)), j)))
			f.hoisted = map[*tir.Reduce]value.Value{sc.sum: f.finishReduce(tir.Sum, sc.sum.T, sum)}
			f.store(f.bufs[len(f.bufs)-1], flatIndex(f, f.varValues(f.k.Vars), f.k.Shape), f.computeStages(), f.k.Out().DType)
			f.hoisted = nil
		})
	})
}
