package smt

import (
	"math/big"

	"github.com/aclements/go-z3/z3"
)

func negRat(r *big.Rat) *big.Rat { return new(big.Rat).Neg(r) }

// maxPairings bounds how many ways of pairing atoms of the same name are
// tried for one pair of terms.
const maxPairings = 120

// matchTerms reports whether t and -u cancel: a bijective change of u's
// summation variables makes u's guard and atoms t's.
func (p *prover) matchTerms(t, u *term) (bool, error) {
	if len(t.bound) != len(u.bound) || len(t.atoms) != len(u.atoms) {
		return false, nil
	}
	for _, perm := range pairings(t.atoms, u.atoms) {
		sigma, ok := unify(t, u, perm)
		if !ok {
			continue
		}
		ok, err := p.checkMatch(t, u, perm, sigma)
		if err != nil || ok {
			return ok, err
		}
	}
	return false, nil
}

// pairings lists the ways to pair each atom of a with an atom of b of the
// same name and kind: perm[i] is the index in b paired with a[i].
func pairings(a, b []*atom) [][]int {
	var out [][]int
	perm := make([]int, len(a))
	used := make([]bool, len(b))
	var rec func(i int)
	rec = func(i int) {
		if len(out) >= maxPairings {
			return
		}
		if i == len(a) {
			out = append(out, append([]int(nil), perm...))
			return
		}
		for j, x := range b {
			if used[j] || x.name != a[i].name || x.kind != a[i].kind {
				continue
			}
			used[j], perm[i] = true, j
			rec(i + 1)
			used[j] = false
		}
	}
	rec(0)
	return out
}

// unify finds u's summation variables as expressions of t's from the
// paired atoms' indices, and checks that the change is a bijection: each
// of u's variables is plus or minus a distinct one of t's plus an offset
// free of t's variables.
func unify(t, u *term, perm []int) (map[string]lin, bool) {
	tv, uv := boundSet(t.bound), boundSet(u.bound)
	sigma := map[string]lin{}
	for i, a := range t.atoms {
		unifyAtoms(a, u.atoms[perm[i]], uv, sigma)
	}
	used := map[string]bool{}
	for _, v := range u.bound {
		s, ok := sigma[v.name]
		if !ok {
			return nil, false
		}
		var pivot string
		for _, x := range s.terms {
			if x.a.kind == iName && tv[x.a.name] && (x.coef == 1 || x.coef == -1) && pivot == "" {
				pivot = x.a.name
				continue
			}
			set := map[string]bool{}
			x.a.names(set)
			for n := range set {
				if tv[n] {
					return nil, false
				}
			}
		}
		if pivot == "" || used[pivot] {
			return nil, false
		}
		used[pivot] = true
	}
	return sigma, true
}

func boundSet(bs []bvar) map[string]bool {
	set := map[string]bool{}
	for _, v := range bs {
		set[v.name] = true
	}
	return set
}

func applySigma(sigma map[string]lin) func(string) (lin, bool) {
	return func(n string) (lin, bool) { v, ok := sigma[n]; return v, ok }
}

// unifyAtoms extends sigma from an index of b that holds exactly one
// unsolved variable of uv with coefficient ±1.
func unifyAtoms(a, b *atom, uv map[string]bool, sigma map[string]lin) {
	if a.kind == aAccess && len(a.idx) == len(b.idx) {
		for d := range a.idx {
			solveIndex(a.idx[d], b.idx[d], uv, sigma)
		}
	}
	if a.kind == aNum {
		solveIndex(a.num, b.num, uv, sigma)
	}
	if len(a.args) != len(b.args) {
		return
	}
	for i := range a.args {
		pa, pb := a.args[i], b.args[i]
		if len(pa) != len(pb) {
			continue
		}
		for j := range pa {
			if len(pa[j].atoms) != len(pb[j].atoms) {
				continue
			}
			for k := range pa[j].atoms {
				unifyAtoms(pa[j].atoms[k], pb[j].atoms[k], uv, sigma)
			}
		}
	}
}

func solveIndex(x, y lin, uv map[string]bool, sigma map[string]lin) {
	var free string
	var coef int64
	for _, t := range y.terms {
		if t.a.kind != iName || !uv[t.a.name] {
			continue
		}
		if _, done := sigma[t.a.name]; done {
			continue
		}
		if free != "" || (t.coef != 1 && t.coef != -1) {
			return
		}
		free, coef = t.a.name, t.coef
	}
	if free == "" {
		return
	}
	rest := y.sub(linName(free).scale(coef)).subst(applySigma(sigma))
	set := map[string]bool{}
	rest.names(set)
	for n := range set {
		if uv[n] {
			if _, done := sigma[n]; !done {
				return
			}
		}
	}
	sigma[free] = x.sub(rest).scale(coef)
}

// checkMatch asks Z3 whether, with u's variables replaced by sigma, u's
// guard is t's and every paired atom is equal where t's guard holds.
func (p *prover) checkMatch(t, u *term, perm []int, sigma map[string]lin) (bool, error) {
	ug, ok := u.guard.subst(applySigma(sigma))
	if !ok {
		return false, nil
	}
	gu := p.e.guard(ug)
	concl := []z3.Bool{gu}
	for i, a := range t.atoms {
		eq, ok := p.atomEq(a, u.atoms[perm[i]].subst(applySigma(sigma)))
		if !ok {
			return false, nil
		}
		concl = append(concl, eq)
	}
	gt := p.e.guard(t.guard)
	fwd, err := p.e.valid(p.ctx.And(gt), concl[0].And(concl[1:]...))
	if err != nil || !fwd {
		return false, err
	}
	return p.e.valid(p.ctx.And(gu), gt)
}

// atomEq is the condition under which two atoms are equal; ok is false
// when they cannot be.
func (p *prover) atomEq(a, b *atom) (z3.Bool, bool) {
	tr := p.e.ctx.FromBool(true)
	if a.kind != b.kind || a.name != b.name || len(a.idx) != len(b.idx) || len(a.args) != len(b.args) || len(a.bound) != len(b.bound) {
		return tr, false
	}
	out := tr
	for d := range a.idx {
		out = out.And(p.e.lin(a.idx[d]).Eq(p.e.lin(b.idx[d])))
	}
	if a.kind == aNum {
		out = out.And(p.e.lin(a.num).Eq(p.e.lin(b.num)))
	}
	for i := range a.bound {
		out = out.And(p.e.lin(a.bound[i].ext).Eq(p.e.lin(b.bound[i].ext)))
	}
	for i := range a.args {
		eq, ok := p.polyEq(a.args[i], b.args[i])
		if !ok {
			return tr, false
		}
		out = out.And(eq)
	}
	return out, true
}

// polyEq is a sufficient condition for two nested polys to be equal: their
// terms, in canonical order, pairwise equal.
func (p *prover) polyEq(x, y poly) (z3.Bool, bool) {
	out := p.e.ctx.FromBool(true)
	if len(x) != len(y) {
		return out, false
	}
	for i := range x {
		a, b := x[i], y[i]
		if a.coef.Cmp(b.coef) != 0 || len(a.bound) != len(b.bound) || len(a.atoms) != len(b.atoms) {
			return out, false
		}
		ga, gb := p.e.guard(a.guard), p.e.guard(b.guard)
		out = out.And(ga.Iff(gb))
		for j := range a.bound {
			out = out.And(p.e.lin(a.bound[j].ext).Eq(p.e.lin(b.bound[j].ext)))
		}
		for j := range a.atoms {
			eq, ok := p.atomEq(a.atoms[j], b.atoms[j])
			if !ok {
				return out, false
			}
			out = out.And(ga.Implies(eq))
		}
	}
	return out, true
}
