package smt

import (
	"fmt"
	"math/big"
	"sort"
)

// canon renames the summation variables of every term (and of the terms
// nested in its atoms) in a canonical order, so that terms equal up to
// renaming get equal keys, then merges terms with equal keys.
func canon(p poly, depth int) poly {
	byKey := map[string]*term{}
	var order []string
	for _, t := range p {
		c := canonTerm(t, depth)
		k := c.key()
		if prev, ok := byKey[k]; ok {
			prev.coef = new(big.Rat).Add(prev.coef, c.coef)
			continue
		}
		byKey[k] = c
		order = append(order, k)
	}
	sort.Strings(order)
	var out poly
	for _, k := range order {
		if t := byKey[k]; t.coef.Sign() != 0 {
			out = append(out, t)
		}
	}
	return out
}

func canonTerm(t *term, depth int) *term {
	own := map[string]bool{}
	for _, v := range t.bound {
		own[v.name] = true
	}
	masked := t.subst(func(n string) (lin, bool) {
		if own[n] {
			return linName("_"), true
		}
		return lin{}, false
	})
	if masked == nil {
		return &term{coef: new(big.Rat)}
	}
	order := boundOrder(t, masked)
	rename := map[string]lin{}
	bound := make([]bvar, len(order))
	for i, v := range order {
		n := fmt.Sprintf("%%c%d.%d", depth, i)
		rename[v.name] = linName(n)
		bound[i] = bvar{n, v.ext}
	}
	r := t.subst(func(n string) (lin, bool) { v, ok := rename[n]; return v, ok })
	if r == nil {
		return &term{coef: new(big.Rat)}
	}
	for i := range bound {
		bound[i].ext = bound[i].ext.subst(func(n string) (lin, bool) { v, ok := rename[n]; return v, ok })
	}
	r.bound = bound
	for i, a := range r.atoms {
		r.atoms[i] = canonAtom(a, depth+1)
	}
	sortAtoms(r.atoms)
	return r
}

// boundOrder orders t's summation variables by where they first appear in
// its atoms sorted with the variables masked, then by extent.
func boundOrder(t, masked *term) []bvar {
	type keyed struct {
		key string
		a   *atom
	}
	ks := make([]keyed, len(t.atoms))
	for i := range t.atoms {
		ks[i] = keyed{masked.atoms[i].key, t.atoms[i]}
	}
	sort.SliceStable(ks, func(i, j int) bool { return ks[i].key < ks[j].key })
	placed := map[string]bool{}
	var order []bvar
	for _, k := range ks {
		set := map[string]bool{}
		k.a.names(set)
		for _, v := range t.bound {
			if set[v.name] && !placed[v.name] {
				placed[v.name] = true
				order = append(order, v)
			}
		}
	}
	var rest []bvar
	for _, v := range t.bound {
		if !placed[v.name] {
			rest = append(rest, v)
		}
	}
	sort.SliceStable(rest, func(i, j int) bool { return rest[i].ext.key() < rest[j].ext.key() })
	return append(order, rest...)
}

func canonAtom(a *atom, depth int) *atom {
	switch a.kind {
	case aFn:
		args := make([]poly, len(a.args))
		for i, p := range a.args {
			args[i] = canon(p, depth)
		}
		return newFn(a.name, args)
	case aRed:
		rename := map[string]lin{}
		bound := make([]bvar, len(a.bound))
		for i, v := range a.bound {
			n := fmt.Sprintf("%%r%d.%d", depth, i)
			rename[v.name] = linName(n)
			bound[i] = bvar{n, v.ext}
		}
		body := a.args[0].subst(func(n string) (lin, bool) { v, ok := rename[n]; return v, ok })
		return newRed(a.name, bound, canon(body, depth))
	}
	return a
}

// names adds the index names a mentions (its own bound variables too).
func (a *atom) names(set map[string]bool) {
	for _, x := range a.idx {
		x.names(set)
	}
	a.num.names(set)
	for _, p := range a.args {
		for _, t := range p {
			for _, c := range t.guard {
				c.names(set)
			}
			for _, b := range t.atoms {
				b.names(set)
			}
		}
	}
}
