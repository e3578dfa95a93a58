package schedule

import (
	"slices"

	"tofuc/lang/ir"
)

// maxRow bounds a row of the row form: one GPU block (or one host task)
// computes a whole row, so a longer one is left to the launches of its
// locals, which spread it over many.
const maxRow = 1 << 16

// RowLocal is a local of an instance computed once per row of the
// instance's output (see Rows).
type RowLocal struct {
	Def *ir.Def
	// Key holds, for each variable of Def, the position of the output
	// variable it is read at.
	Key []int
}

// Rows returns the row locals of inst, in the order of its locals: the
// locals holding a reduction (softmax's maximum and sum, layer norm's
// mean and reciprocal deviation) that the only output reads, directly or
// through recomputed locals and other row locals, at one index made of
// its own variables, always the same. Such a local has one value per row
// of the output (an index of those variables, its key), so a kernel can
// compute it once per row and then the row's elements: one launch
// reading the row while it is in cache, instead of a launch per local
// writing a buffer. A local read anywhere else (inside a reduction over
// an output variable, at an index computed from data, by a materialised
// local, or where the output reaches indices beyond the local's extents)
// is not a row local, nor is any when the row is longer than maxRow or the
// output's shape is not known.
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
	out := inst.Outputs[0]
	a := rowAnalysis{inst: inst, cand: cand, key: map[*ir.Def][]int{}, bad: map[*ir.Def]bool{}}
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
	for changed := true; changed; {
		changed = false
		for _, d := range inst.Locals {
			if _, keyed := a.key[d]; cand[d] && (a.bad[d] || !keyed) && !a.spoiled[d] {
				a.markSpoiled(d)
				changed = true
			}
		}
	}
	var rows []RowLocal
	keyed := map[int]bool{}
	for _, d := range inst.Locals {
		if k, ok := a.key[d]; ok && !a.bad[d] {
			rows = append(rows, RowLocal{Def: d, Key: k})
			for _, p := range k {
				keyed[p] = true
			}
		}
	}
	if len(rows) == 0 {
		return nil
	}
	row := int64(1)
	for i, v := range out.Vars {
		n, ok := v.Extent.IsConst()
		if !ok {
			return nil
		}
		if !keyed[i] {
			row *= n
		}
	}
	if row > maxRow {
		return nil
	}
	return rows
}

// IsRowLocal reports whether d is a row local of inst.
func IsRowLocal(inst *ir.Instance, d *ir.Def) bool {
	return slices.ContainsFunc(Rows(inst), func(r RowLocal) bool { return r.Def == d })
}

type rowAnalysis struct {
	inst *ir.Instance
	cand map[*ir.Def]bool
	// key is each candidate's key, as first read; bad marks candidates
	// read elsewhere or at another index.
	key     map[*ir.Def][]int
	bad     map[*ir.Def]bool
	spoiled map[*ir.Def]bool
}

// walk visits e evaluated with its variables bound to output positions
// (bind; variables absent from it are reduction variables or bound to
// other expressions), following recomputed locals and candidates into
// their bodies.
func (a *rowAnalysis) walk(e ir.Expr, bind map[*ir.Var]int) {
	localReads(a.inst, e, func(acc *ir.Access, l *ir.Def) {
		pos := make([]int, len(acc.Index))
		for i, ix := range acc.Index {
			pos[i] = -1
			if r, isVar := ix.(*ir.VarRef); isVar {
				if p, bound := bind[r.V]; bound {
					pos[i] = p
				}
			}
		}
		switch {
		case a.cand[l]:
			a.readCandidate(l, pos)
		case recomputable(a.inst, l):
			a.walk(l.Body, bindVars(l, pos))
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

// readCandidate records a read of candidate l at output positions pos.
// The local must have the output's extents at those positions: a row
// local is computed at every key the output reaches (a read guarded by a
// select or a default may reach fewer, and computing l beyond its extent
// would read out of range).
func (a *rowAnalysis) readCandidate(l *ir.Def, pos []int) {
	if slices.Contains(pos, -1) || hasDuplicate(pos) || !a.sameExtents(l, pos) {
		a.bad[l] = true
		return
	}
	if k, seen := a.key[l]; seen {
		if !slices.Equal(k, pos) {
			a.bad[l] = true
		}
		return
	}
	a.key[l] = pos
	a.walk(l.Body, bindVars(l, pos))
}

// sameExtents reports whether l's variables have the extents of the
// output's variables at pos.
func (a *rowAnalysis) sameExtents(l *ir.Def, pos []int) bool {
	out := a.inst.Outputs[0].Vars
	for i, v := range l.Vars {
		if !v.Extent.Equal(out[pos[i]].Extent) {
			return false
		}
	}
	return true
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

// markSpoiled spoils what a bad candidate reads: it is launched, so the
// candidates it reaches are read element by element.
func (a *rowAnalysis) markSpoiled(d *ir.Def) {
	if a.spoiled == nil {
		a.spoiled = map[*ir.Def]bool{}
	}
	a.spoiled[d] = true
	a.spoil(d.Body, map[*ir.Def]bool{})
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

// holdsReduction reports whether e holds a reduction and no opaque call.
func holdsReduction(e ir.Expr) bool {
	reduces, opaque := false, false
	ir.Walk(e, func(x ir.Expr) bool {
		switch x.(type) {
		case *ir.Reduce:
			reduces = true
		case *ir.Opaque:
			opaque = true
		}
		return !opaque
	})
	return reduces && !opaque
}

// recomputable reports whether local d is recomputed where it is read
// for its size alone (see Inlined).
func recomputable(inst *ir.Instance, d *ir.Def) bool {
	size, ok := inlineSize(inst, d, map[*ir.Def]int{})
	return ok && size <= maxInline
}
