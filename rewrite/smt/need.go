package smt

import (
	"sort"
	"strings"

	"tofuc/lang"
)

// maxExtent is the largest tensor extent the verifier assumes: constants
// at or beyond it (ONNX's "to the end" slice bound 2^31 - 1) never meet
// an extent, so they set no bound.
const maxExtent = 1<<31 - 1

// needs computes the bound each shape symbol must reach for a bounded
// verdict to count (docs/rules.md): b(S) = c(S) + v(S) + 1, and at least
// 2, where c(S) is the largest integer constant of the index arithmetic
// connected to S and v(S) the most index variables connected to S that
// occur in one term. Names are connected when they occur in one linear
// form: an index, an extent, a dimension, or one comparison of a guard.
type needs struct {
	parent map[string]string
	konst  map[string]int64 // by name; a component's constant is the largest of its names'
	scopes [][]string       // the index variables of each term
}

func newNeeds() *needs {
	return &needs{parent: map[string]string{}, konst: map[string]int64{}}
}

func (n *needs) root(x string) string {
	for {
		p, ok := n.parent[x]
		if !ok || p == x {
			return x
		}
		n.parent[x] = n.parent[p]
		x = p
	}
}

func (n *needs) union(names []string) {
	for _, x := range names {
		if _, ok := n.parent[x]; !ok {
			n.parent[x] = x
		}
	}
	for _, x := range names[min(1, len(names)):] {
		n.parent[n.root(x)] = n.root(names[0])
	}
}

// constant records c for every name of one linear form.
func (n *needs) constant(names []string, c int64) {
	if c < 0 {
		c = -c
	}
	if c >= maxExtent {
		return
	}
	for _, x := range names {
		n.konst[x] = max(n.konst[x], c)
	}
}

// lin records l's names as connected and its constants: the constant term
// (for a comparison `l >= 0`, its threshold: `k - 1 >= 0` is `k > 0`, so
// a strict bound counts one less), every coefficient other than ±1, and
// the divisors and constants of its integer atoms.
func (n *needs) lin(l lin, comparison bool) {
	set := map[string]bool{}
	l.names(set)
	names := sortedNames(set)
	n.union(names)
	k := l.k
	if comparison && k < 0 {
		k = -k - 1
	}
	n.constant(names, k)
	for _, t := range l.terms {
		if t.coef != 1 && t.coef != -1 {
			n.constant(names, t.coef)
		}
		n.iatom(t.a, names)
	}
}

func (n *needs) iatom(a *iatom, outer []string) {
	switch a.kind {
	case iName:
	case iIte:
		n.cond(a.cond)
	default:
		n.constant(outer, a.c)
		n.lin(a.x, false)
		n.lin(a.y, false)
	}
}

func (n *needs) cond(c *cond) {
	switch c.op {
	case cGE:
		n.lin(c.x, true)
	case cEQ:
		n.lin(c.x, false)
	default:
		for _, a := range c.args {
			n.cond(a)
		}
	}
}

// poly records every term of p as a scope of its own.
func (n *needs) poly(p poly) {
	for _, t := range p {
		vars := map[string]bool{}
		n.term(t, vars)
		n.scope(vars)
	}
}

// scope records the index variables of one term (names starting with %).
func (n *needs) scope(names map[string]bool) {
	var vars []string
	for x := range names {
		if strings.HasPrefix(x, "%") {
			vars = append(vars, x)
		}
	}
	n.scopes = append(n.scopes, vars)
}

// term walks t and the terms nested in its atoms, collecting into vars
// every name they mention.
func (n *needs) term(t *term, vars map[string]bool) {
	n.bvars(t.bound, vars)
	for _, c := range t.guard {
		n.cond(c)
		c.names(vars)
	}
	for _, a := range t.atoms {
		n.atom(a, vars)
	}
}

func (n *needs) bvars(bs []bvar, vars map[string]bool) {
	for _, v := range bs {
		n.lin(v.ext, false)
		set := map[string]bool{v.name: true}
		v.ext.names(set)
		n.union(sortedNames(set))
		vars[v.name] = true
	}
}

func (n *needs) atom(a *atom, vars map[string]bool) {
	a.names(vars)
	for _, x := range a.idx {
		n.lin(x, false)
	}
	n.lin(a.num, false)
	n.bvars(a.bound, vars)
	for _, p := range a.args {
		for _, t := range p {
			n.term(t, vars)
		}
	}
}

// dims records shape dimensions; vars, when set, are index variables
// ranging over them (a rule output's indices).
func (n *needs) dims(shape []lang.Dim, vars []lin) {
	for i, d := range shape {
		x := dimLin(d)
		if i < len(vars) {
			x = x.sub(vars[i])
		}
		n.lin(x, false)
	}
}

// bounds gives b(S) for every symbol.
func (n *needs) bounds(syms []string) map[string]int {
	konst := map[string]int64{}
	for x, c := range n.konst {
		r := n.root(x)
		konst[r] = max(konst[r], c)
	}
	vars := map[string]int{}
	for _, sc := range n.scopes {
		count := map[string]int{}
		for _, v := range sc {
			count[n.root(v)]++
		}
		for r, c := range count {
			vars[r] = max(vars[r], c)
		}
	}
	out := map[string]int{}
	for _, s := range syms {
		r := n.root(s)
		out[s] = max(2, int(konst[r])+vars[r]+1)
	}
	return out
}

func sortedNames(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for x := range set {
		out = append(out, x)
	}
	sort.Strings(out)
	return out
}
