package smt

import (
	"github.com/aclements/go-z3/z3"
)

// prover decides whether a normal form is zero for every shape, by the
// procedure of docs/rules.md: merge terms equal up to renaming, drop terms
// whose guard cannot hold, join disjoint guards of equal terms, then pair
// every remaining term with one of opposite coefficient that equals it
// after a bijective change of summation variables, each step's index
// facts discharged by Z3 over the integers.
type prover struct {
	e   *enc
	ctx z3.Bool // the shape symbols are positive; free indices in range
	// holdsSomewhere, when set, finds a point of ctx where a guard holds
	// without the solver (a guard it finds true somewhere is not empty).
	holdsSomewhere func(guard) bool
}

// zero reports whether d is identically zero; reason names a term left
// over when it is not shown.
func (p *prover) zero(d poly) (bool, string, error) {
	d = canon(d, 0)
	d, err := p.dropEmpty(d)
	if err != nil {
		return false, "", err
	}
	if d, err = p.joinGuards(d); err != nil {
		return false, "", err
	}
	used := make([]bool, len(d))
	for i, t := range d {
		p.e.dl.check("the proof")
		if used[i] {
			continue
		}
		found := false
		for j := i + 1; j < len(d) && !found; j++ {
			if used[j] || d[j].coef.Cmp(negRat(t.coef)) != 0 {
				continue
			}
			ok, err := p.matchTerms(t, d[j])
			if err != nil {
				return false, "", err
			}
			if ok {
				used[i], used[j], found = true, true, true
			}
		}
		if !found {
			return false, t.String(), nil
		}
	}
	return true, "", nil
}

// dropEmpty removes terms whose guard is unsatisfiable.
func (p *prover) dropEmpty(d poly) (poly, error) {
	var out poly
	for _, t := range d {
		if p.holdsSomewhere != nil && p.holdsSomewhere(t.guard) {
			out = append(out, t)
			continue
		}
		empty, err := p.e.valid(p.ctx.And(p.e.guard(t.guard)), p.e.ctx.FromBool(false))
		if err != nil {
			return nil, err
		}
		if !empty {
			out = append(out, t)
		}
	}
	return out, nil
}

// joinGuards merges terms that differ only in their guards, when the
// guards are disjoint: [g1] x + [g2] x = [g1 || g2] x.
func (p *prover) joinGuards(d poly) (poly, error) {
	var out poly
	for _, t := range d {
		merged := false
		for i, u := range out {
			if t.coef.Cmp(u.coef) != 0 || bodyKey(t) != bodyKey(u) {
				continue
			}
			disjoint, err := p.e.valid(p.ctx.And(p.e.guard(t.guard), p.e.guard(u.guard)), p.e.ctx.FromBool(false))
			if err != nil {
				return nil, err
			}
			if disjoint {
				out[i] = orGuards(u, t)
				merged = true
				break
			}
		}
		if !merged {
			out = append(out, t)
		}
	}
	return out, nil
}

func bodyKey(t *term) string {
	u := *t
	u.guard = nil
	return u.key()
}

func orGuards(a, b *term) *term {
	ga, gk := a.guard.cond()
	gb, bk := b.guard.cond()
	c, k := mkJunction(cOr, []*cond{ga, gb}, []condConst{gk, bk})
	n := *a
	n.guard, _ = guard(nil).with(c, k)
	return &n
}
