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
	if t = pin(t); t == nil {
		return &term{coef: new(big.Rat)}
	}
	own := map[string]bool{}
	for _, v := range t.bound {
		own[v.name] = true
	}
	// The masked keys only order the variables: a guard relating two of
	// them (j < k) must not be folded with the variables merged.
	mask := func(n string) (lin, bool) {
		if own[n] {
			return linName("_"), true
		}
		return lin{}, false
	}
	masked := make([]string, len(t.atoms))
	for i, a := range t.atoms {
		masked[i] = a.subst(mask).key
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
func boundOrder(t *term, masked []string) []bvar {
	type keyed struct {
		key string
		a   *atom
	}
	ks := make([]keyed, len(t.atoms))
	for i := range t.atoms {
		ks[i] = keyed{masked[i], t.atoms[i]}
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

// pin substitutes every summation variable that its term's guard fixes to
// one value (v == a, or a <= v <= a), so that sum_{k < 3} [k == 1] f(k)
// and f(1) have one form; nil when the guard becomes false.
func pin(t *term) *term {
	for {
		v, val, ok := pinned(t)
		if !ok {
			return t
		}
		n := t.subst(func(x string) (lin, bool) {
			if x == v {
				return val, true
			}
			return lin{}, false
		})
		if n == nil {
			return nil
		}
		kept := n.bound[:0:0]
		for _, b := range n.bound {
			if b.name != v {
				kept = append(kept, b)
			}
		}
		n.bound = kept
		t = n
	}
}

// pinned finds a summation variable of t fixed by its guard, and its value.
func pinned(t *term) (string, lin, bool) {
	for _, v := range t.bound {
		lows, highs := map[string]bool{}, map[string]lin{}
		for _, c := range t.guard {
			if c.op != cGE && c.op != cEQ {
				continue
			}
			coef, rest, ok := split(c.x, v.name)
			switch {
			case !ok:
			case c.op == cEQ:
				return v.name, rest.scale(-coef), true
			case coef == 1: // v >= -rest
				lows[rest.scale(-1).key()] = true
			default: // v <= rest
				highs[rest.key()] = rest
			}
		}
		for k, val := range highs {
			if lows[k] {
				return v.name, val, true
			}
		}
	}
	return "", lin{}, false
}

// split writes x as coef*v + rest with coef ±1 and rest free of v; ok is
// false when x does not have that form.
func split(x lin, v string) (coef int64, rest lin, ok bool) {
	for _, t := range x.terms {
		if t.a.kind == iName && t.a.name == v && (t.coef == 1 || t.coef == -1) {
			coef = t.coef
		}
	}
	if coef == 0 {
		return 0, lin{}, false
	}
	rest = x.sub(linName(v).scale(coef))
	if rest.mentions(map[string]bool{v: true}) {
		return 0, lin{}, false
	}
	return coef, rest, true
}
