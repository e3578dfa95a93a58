package schedule

import (
	"slices"

	"tofuc/lang/ir"
)

// maxRow bounds a row of the row form: one GPU block (or one host task)
// computes a whole row, so a longer one is left to the launches of its
// locals, which spread it over many.
const maxRow = 1 << 16

// maxRowBuffer bounds the elements of a row's buffered locals together
// (see Rows): held in f64, they fill at most 32 KiB of a GPU block's
// shared memory (or of a host task's cache).
const maxRowBuffer = 4096

// RowLocal is a local of an instance computed once per row of the
// instance's output (see Rows).
type RowLocal struct {
	Def *ir.Def
	// Key holds, for each variable of Def, the position of the output
	// variable it is read at, or -1 for a variable the row's buffer
	// spans: every value of it is computed for the row.
	Key []int
}

// Buffered reports whether the local is held in a row buffer: some of
// its variables are not the row's key.
func (r RowLocal) Buffered() bool { return slices.Contains(r.Key, -1) }

// BufferLen is the number of elements of a buffered local's row buffer
// (1 for a local of one value per row).
func (r RowLocal) BufferLen() int64 {
	n := int64(1)
	for i, p := range r.Key {
		if p < 0 {
			e, _ := r.Def.Vars[i].Extent.IsConst()
			n *= e
		}
	}
	return n
}

// Rows returns the row locals of inst, in the order of its locals: the
// locals holding a reduction (softmax's maximum and sum, layer norm's
// mean and reciprocal deviation) that the only output reads, directly or
// through recomputed locals and other row locals, at one index made of
// its own variables, always the same. Such a local has one value per row
// of the output (an index of those variables, its key), so a kernel can
// compute it once per row and then the row's elements: one launch
// reading the row while it is in cache, instead of a launch per local
// writing a buffer.
//
// A local whose reads agree on some of its variables (the key) and at
// the others read at variables of their extents (anywhere in range:
// attention's scores, read by their maximum and sum over the keys and by
// the output at its own key) is a buffered row local: every element of
// it at the row's key is computed once per row into a buffer, at most
// maxRowBuffer elements for all of them, and read from there. Its key
// must be the key of the whole row (else it would be computed again for
// each row that shares its key), and not empty, and its buffer not
// empty.
//
// An element-wise local that calls a costly math function (ir.CostlyFunc)
// is a candidate too, where the instance has row locals: it is a row
// local only if buffered and read at two places or more (softmax's and
// attention's exponentials, read by the sum and by the output, computed
// once instead of twice), and else recomputed where it is read.
//
// A local read anywhere else (at an index computed from data, by a
// materialised local, or where the output reaches indices beyond the
// local's extents) is not a row local, nor is any when the row is longer
// than maxRow or the output's shape is not known.
func Rows(inst *ir.Instance) []RowLocal {
	if len(inst.Outputs) != 1 {
		return nil
	}
	cand := map[*ir.Def]bool{}
	for _, d := range inst.Locals {
		if holdsReduction(d.Body) {
			cand[d] = true
		}
	}
	if len(cand) == 0 {
		return nil
	}
	for _, d := range inst.Locals {
		if !cand[d] && holdsCostlyCall(d.Body) {
			cand[d] = true
		}
	}
	excluded := map[*ir.Def]bool{}
	for {
		rows, again := rowLocals(inst, cand, excluded)
		if !again {
			return rows
		}
	}
}

// rowLocals is Rows without the candidates excluded; when a buffered
// local does not fit the row it is excluded and again is true.
func rowLocals(inst *ir.Instance, cand, excluded map[*ir.Def]bool) (rows []RowLocal, again bool) {
	out := inst.Outputs[0]
	a := rowAnalysis{inst: inst, cand: cand, reads: map[*ir.Def][]rowRead{}, key: map[*ir.Def][]int{}, bad: map[*ir.Def]bool{}}
	for d := range excluded {
		a.bad[d] = true
	}
	bind := map[*ir.Var]int{}
	for i, v := range out.Vars {
		bind[v] = i
	}
	a.walk(out.Body, bind)
	// A local launched as a kernel of its own reads the candidates it
	// reaches element by element: they are launched too (and what they
	// read in turn).
	for _, d := range inst.Locals {
		if !cand[d] && !recomputable(inst, d) {
			a.spoil(d.Body, map[*ir.Def]bool{})
		}
	}
	// A local is read only by later locals and the outputs: going back,
	// every read of a candidate is known when it is reached.
	for i := len(inst.Locals) - 1; i >= 0; i-- {
		d := inst.Locals[i]
		if !cand[d] {
			continue
		}
		key, ok := a.keyOf(d)
		if ok && !a.bad[d] {
			a.key[d] = key
			a.walk(d.Body, bindVars(d, key))
			continue
		}
		if !holdsReduction(d.Body) {
			// A costly element-wise candidate that is no row local is
			// recomputed where it is read, as before it was one.
			delete(cand, d)
			return nil, true
		}
		a.bad[d] = true
		a.spoil(d.Body, map[*ir.Def]bool{})
	}
	for _, d := range inst.Locals {
		// A costly element-wise local pays for its buffer only where it
		// is read at several places of the row, and has one value per
		// row only if buffered (else each element would be a row).
		if cand[d] && !holdsReduction(d.Body) && (!slices.Contains(a.key[d], -1) || len(a.reads[d]) < 2) {
			delete(cand, d)
			return nil, true
		}
	}
	keyed := map[int]bool{}
	for _, d := range inst.Locals {
		if k, ok := a.key[d]; ok {
			rows = append(rows, RowLocal{Def: d, Key: k})
			for _, p := range k {
				if p >= 0 {
					keyed[p] = true
				}
			}
		}
	}
	if len(rows) == 0 {
		return nil, false
	}
	buffered := int64(0)
	for _, r := range rows {
		if !r.Buffered() {
			continue
		}
		n := r.BufferLen()
		buffered += n
		if buffered > maxRowBuffer {
			// Over the budget: a costly local gives way first, to be
			// recomputed, before a reduction is launched.
			for _, c := range rows {
				if c.Buffered() && !holdsReduction(c.Def.Body) {
					delete(cand, c.Def)
					return nil, true
				}
			}
		}
		if n == 0 || buffered > maxRowBuffer || !keysAll(r.Key, keyed) {
			if holdsReduction(r.Def.Body) {
				excluded[r.Def] = true
			} else {
				delete(cand, r.Def) // recomputed instead
			}
			return nil, true
		}
	}
	row := int64(1)
	for i, v := range out.Vars {
		n, ok := v.Extent.IsConst()
		if !ok {
			return nil, false
		}
		if !keyed[i] {
			row *= n
		}
	}
	if row > maxRow {
		return nil, false
	}
	return rows, false
}

// keysAll reports whether key holds every position of the row's key.
func keysAll(key []int, keyed map[int]bool) bool {
	for p := range keyed {
		if !slices.Contains(key, p) {
			return false
		}
	}
	return true
}

// IsRowLocal reports whether d is a row local of inst.
func IsRowLocal(inst *ir.Instance, d *ir.Def) bool {
	return slices.ContainsFunc(Rows(inst), func(r RowLocal) bool { return r.Def == d })
}

type rowAnalysis struct {
	inst *ir.Instance
	cand map[*ir.Def]bool
	// reads are each candidate's reads; key is its key once decided;
	// bad marks candidates that are launched.
	reads map[*ir.Def][]rowRead
	key   map[*ir.Def][]int
	bad   map[*ir.Def]bool
}

// rowRead is a read of a candidate: per index, the position of the
// output variable it is (-1 if none), and whether it is a variable of the
// candidate's extent there, so in range whatever its value.
type rowRead struct {
	pos  []int
	fits []bool
}

// walk visits e evaluated with its variables bound to output positions
// (bind; variables absent from it are reduction variables or bound to
// other expressions), following recomputed locals into their bodies and
// recording the reads of candidates.
func (a *rowAnalysis) walk(e ir.Expr, bind map[*ir.Var]int) {
	localReads(a.inst, e, func(acc *ir.Access, l *ir.Def) {
		r := rowRead{pos: make([]int, len(acc.Index)), fits: make([]bool, len(acc.Index))}
		for i, ix := range acc.Index {
			r.pos[i] = -1
			if ref, isVar := ix.(*ir.VarRef); isVar {
				if p, bound := bind[ref.V]; bound {
					r.pos[i] = p
				}
				r.fits[i] = i < len(l.Vars) && ref.V.Extent.Equal(l.Vars[i].Extent)
			}
		}
		switch {
		case a.cand[l]:
			a.reads[l] = append(a.reads[l], r)
		case recomputable(a.inst, l):
			a.walk(l.Body, bindVars(l, r.pos))
		}
	})
}

// localReads calls read for each access of e to a local of inst (the
// index expressions of an access are walked too: they may read locals).
func localReads(inst *ir.Instance, e ir.Expr, read func(acc *ir.Access, l *ir.Def)) {
	ir.Walk(e, func(x ir.Expr) bool {
		if acc, ok := x.(*ir.Access); ok {
			if l := Local(inst, acc.T); l != nil {
				read(acc, l)
			}
		}
		return true
	})
}

// keyOf is candidate l's key from its reads: the output position each
// variable is always read at, -1 where the reads differ (or are not at
// output variables) and every read is of a variable of l's extent. A
// local of one value per row must have the output's extents at its key
// (a read guarded by a select or a default may reach fewer keys, and
// computing l beyond its extent would read out of range).
func (a *rowAnalysis) keyOf(l *ir.Def) ([]int, bool) {
	reads := a.reads[l]
	if len(reads) == 0 {
		return nil, false
	}
	key := slices.Clone(reads[0].pos)
	for _, r := range reads[1:] {
		for i, p := range r.pos {
			if key[i] != p {
				key[i] = -1
			}
		}
	}
	out := a.inst.Outputs[0].Vars
	var positions []int
	for i, p := range key {
		if p >= 0 && l.Vars[i].Extent.Equal(out[p].Extent) {
			positions = append(positions, p)
			continue
		}
		key[i] = -1
		if _, known := l.Vars[i].Extent.IsConst(); !known {
			return nil, false
		}
		for _, r := range reads {
			if !r.fits[i] {
				return nil, false
			}
		}
	}
	if hasDuplicate(positions) || len(positions) == 0 && len(key) > 0 {
		return nil, false // a buffer for the whole output is no row
	}
	return key, true
}

// spoil marks bad every candidate that e reaches through recomputed
// locals.
func (a *rowAnalysis) spoil(e ir.Expr, seen map[*ir.Def]bool) {
	localReads(a.inst, e, func(_ *ir.Access, l *ir.Def) {
		switch {
		case seen[l]:
		case a.cand[l]:
			a.bad[l] = true
		case recomputable(a.inst, l):
			seen[l] = true
			a.spoil(l.Body, seen)
		}
	})
}

// bindVars binds l's variables to the output positions its index reads.
func bindVars(l *ir.Def, pos []int) map[*ir.Var]int {
	bind := map[*ir.Var]int{}
	for i, v := range l.Vars {
		if i < len(pos) && pos[i] >= 0 {
			bind[v] = pos[i]
		}
	}
	return bind
}

func hasDuplicate(pos []int) bool {
	for i := range pos {
		if slices.Contains(pos[i+1:], pos[i]) {
			return true
		}
	}
	return false
}

// holdsCostlyCall reports whether e calls a costly math function
// (ir.CostlyFunc: a row buffer keeps its result rather than computing
// it again at each read, softmax's exp) and no opaque function.
func holdsCostlyCall(e ir.Expr) bool {
	return holds(e, func(x ir.Expr) bool {
		c, ok := x.(*ir.Call)
		return ok && ir.CostlyFunc(c.Fn)
	})
}

// holdsReduction reports whether e holds a reduction and no opaque call.
func holdsReduction(e ir.Expr) bool {
	return holds(e, func(x ir.Expr) bool {
		_, ok := x.(*ir.Reduce)
		return ok
	})
}

// holds reports whether e holds an expression that is is true of, and
// no opaque call.
func holds(e ir.Expr, is func(ir.Expr) bool) bool {
	found, opaque := false, false
	ir.Walk(e, func(x ir.Expr) bool {
		if _, ok := x.(*ir.Opaque); ok {
			opaque = true
		}
		found = found || is(x)
		return !opaque
	})
	return found && !opaque
}

// recomputable reports whether local d is recomputed where it is read
// for its size alone (see Inlined), and not launched because a costly
// call would run again at every term of a sum reading it (summedAgain).
func recomputable(inst *ir.Instance, d *ir.Def) bool {
	size, ok := inlineSize(inst, d, map[*ir.Def]int{})
	return ok && size <= maxInline && !(costlyToRecompute(inst, d, map[*ir.Def]bool{}) && summedAgain(inst, d))
}

// costlyToRecompute says whether local d, recomputed, calls a costly
// math function (ir.CostlyFunc), itself or through the locals it
// recomputes (seen: those visited).
func costlyToRecompute(inst *ir.Instance, d *ir.Def, seen map[*ir.Def]bool) bool {
	seen[d] = true
	if holdsCostlyCall(d.Body) {
		return true
	}
	costly := false
	localReads(inst, d.Body, func(_ *ir.Access, l *ir.Def) {
		if size, ok := inlineSize(inst, l, map[*ir.Def]int{}); !costly && !seen[l] && ok && size <= maxInline {
			costly = costlyToRecompute(inst, l, seen)
		}
	})
	return costly
}

// summedAgain says whether a Def of inst reads local d inside a
// reduction at an index that leaves out one of the reader's variables:
// each element of d is read once for every value of it (the attention
// weights' gradient, summed over the keys at every channel of a query),
// so that, recomputed, d's costly calls would run that many times.
func summedAgain(inst *ir.Instance, d *ir.Def) bool {
	for _, r := range append(slices.Clone(inst.Locals), inst.Outputs...) {
		again := false
		ir.Walk(r.Body, func(x ir.Expr) bool {
			if _, ok := x.(*ir.Reduce); !ok || again {
				return !again
			}
			ir.Walk(x, func(y ir.Expr) bool {
				if acc, ok := y.(*ir.Access); ok && acc.T == d.Tensor && !indexesAll(acc, r.Vars) {
					again = true
				}
				return !again
			})
			return false
		})
		if again {
			return true
		}
	}
	return false
}

// indexesAll says whether acc's index reads every one of vars.
func indexesAll(acc *ir.Access, vars []*ir.Var) bool {
	read := map[*ir.Var]bool{}
	for _, ix := range acc.Index {
		for v := range ir.VarRefs(ix) {
			read[v] = true
		}
	}
	for _, v := range vars {
		if !read[v] {
			return false
		}
	}
	return true
}
