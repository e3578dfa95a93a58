package smt

import (
	"maps"
	"math/big"
	"slices"
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
// occur in one term (the terms inside a function's arguments or a
// reduction are terms of their own). Names are connected when they occur in one linear
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
// a strict bound counts one less), and every constant inside it
// (linConstants).
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
	n.linConstants(l, names)
}

// linConstants records for names the coefficients of l other than ±1 and
// the constants of its integer atoms: divisors, the constants and
// coefficients of their operands (min(N, 4) meets N at 4), and the value
// 1 of a condition used as an integer.
func (n *needs) linConstants(l lin, names []string) {
	for _, t := range l.terms {
		if t.coef != 1 && t.coef != -1 {
			n.constant(names, t.coef)
		}
		switch a := t.a; a.kind {
		case iName:
		case iIte:
			n.constant(names, 1)
			n.condConstants(a.cond, names)
		default:
			n.constant(names, a.c)
			for _, x := range []lin{a.x, a.y} {
				n.constant(names, x.k)
				n.linConstants(x, names)
			}
		}
	}
}

func (n *needs) condConstants(c *cond, names []string) {
	for _, a := range c.args {
		n.condConstants(a, names)
	}
	if c.op == cGE || c.op == cEQ {
		n.constant(names, c.x.k)
		n.linConstants(c.x, names)
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

// term walks t, collecting into vars every name it mentions; the terms
// inside its atoms' arguments are scopes of their own.
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

// atom adds to vars the names a mentions from outside; each term of its
// arguments (with a reduction's own variables) is a scope.
func (n *needs) atom(a *atom, vars map[string]bool) {
	n.piecewise(a)
	for _, x := range a.idx {
		n.lin(x, false)
	}
	n.lin(a.num, false)
	free := map[string]bool{}
	a.names(free)
	inner := map[string]bool{}
	for _, v := range a.bound {
		inner[v.name] = true
	}
	for _, p := range a.args {
		boundNames(p, inner)
	}
	for x := range free {
		if !inner[x] {
			vars[x] = true
		}
	}
	for _, p := range a.args {
		for _, t := range p {
			scope := map[string]bool{}
			n.bvars(a.bound, scope)
			n.term(t, scope)
			n.scope(scope)
		}
	}
}

// boundNames adds the summation variables of p's terms and of the terms
// nested in their atoms.
func boundNames(p poly, set map[string]bool) {
	for _, t := range p {
		for _, v := range t.bound {
			set[v.name] = true
		}
		for _, a := range t.atoms {
			for _, v := range a.bound {
				set[v.name] = true
			}
			for _, q := range a.args {
				boundNames(q, set)
			}
		}
	}
}

// piecewise records, for a function that compares its arguments (max,
// min, abs, the comparisons, the integer wraps) or a max/min reduction,
// the value constants that may meet a shape: where an argument depends
// on extents as a value (a count, sum_j c = c*N, or an index used as a
// value), the sides may differ only once the count passes a constant
// (min(N, 7.0)), so the ratios of the arguments' coefficients bound the
// extents involved.
func (n *needs) piecewise(a *atom) {
	if !(a.kind == aFn && comparesArgs(a.name) || a.kind == aRed && a.name != "prod") {
		return
	}
	set := map[string]bool{}
	for _, p := range a.args {
		countNames(p, set)
	}
	if len(set) == 0 {
		return
	}
	lo, hi := new(big.Rat), new(big.Rat)
	if i := strings.IndexByte(a.name, ':'); i >= 0 {
		hi.SetInt64(1 << lang.ParseDType(a.name[i+1:]).Bits())
	}
	for _, p := range a.args {
		for _, t := range p {
			c := new(big.Rat).Abs(t.coef)
			if lo.Sign() == 0 || c.Cmp(lo) < 0 {
				lo = c
			}
			if c.Cmp(hi) > 0 {
				hi = c
			}
		}
	}
	if lo.Sign() == 0 {
		return
	}
	ratio := new(big.Rat).Quo(hi, lo)
	q := new(big.Int).Quo(ratio.Num(), ratio.Denom())
	k := int64(maxExtent - 1) // a ratio this large needs a bound no check reaches
	if q.IsInt64() && q.Int64() < k {
		k = q.Int64() + 1
	}
	n.constant(sortedNames(set), k)
}

// comparesArgs lists the functions whose value is piecewise in their
// arguments.
func comparesArgs(name string) bool {
	switch name {
	case "max", "min", "abs", "pos", "nneg", "zero", "sign", "floor", "ceil":
		return true
	}
	return strings.HasPrefix(name, "wrap:") || strings.HasPrefix(name, "toint:")
}

// countNames adds the names p's value depends on other than through
// reads: the extents of summation variables that a term's atoms do not
// mention (the term counts them), and the names of indices used as
// values.
func countNames(p poly, set map[string]bool) {
	for _, t := range p {
		mentioned := map[string]bool{}
		for _, a := range t.atoms {
			a.names(mentioned)
			if a.kind == aNum {
				a.num.names(set)
			}
		}
		for _, v := range t.bound {
			if !mentioned[v.name] {
				v.ext.names(set)
			}
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

func sortedNames(set map[string]bool) []string { return slices.Sorted(maps.Keys(set)) }
