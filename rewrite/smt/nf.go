package smt

import (
	"math/big"
	"sort"
	"strings"
)

// poly is a value in normal form: a sum of terms.
type poly []*term

// term is coef * [guard] * sum over bound vars of the product of atoms.
// The guard holds the bound variables' ranges.
type term struct {
	coef  *big.Rat
	bound []bvar
	guard guard
	atoms []*atom // sorted by key
}

// bvar is a summation variable ranging over [0, ext).
type bvar struct {
	name string
	ext  lin
}

type atomKind uint8

const (
	aAccess atomKind = iota // a rule input read at idx
	aFn                     // an uninterpreted function of polys
	aRed                    // max, min or prod over bound vars
	aNum                    // an integer index expression used as a value
	aInf                    // +inf (name "inf") or -inf ("-inf")
)

// atom is a factor of a term.
type atom struct {
	kind  atomKind
	name  string // the tensor, the function or the reducer
	idx   []lin
	args  []poly
	bound []bvar // aRed: its variables; the guard is in its body's terms
	num   lin
	key   string
}

func ratInt(n int64) *big.Rat { return new(big.Rat).SetInt64(n) }

func constPoly(c *big.Rat) poly {
	if c.Sign() == 0 {
		return nil
	}
	return poly{{coef: c}}
}

func atomPoly(a *atom) poly { return poly{{coef: ratInt(1), atoms: []*atom{a}}} }

func guardPoly(g guard) poly { return poly{{coef: ratInt(1), guard: g}} }

func (p poly) add(q poly) poly { return append(append(poly(nil), p...), q...) }

func (p poly) scale(c *big.Rat) poly {
	if c.Sign() == 0 {
		return nil
	}
	out := make(poly, len(p))
	for i, t := range p {
		n := *t
		n.coef = new(big.Rat).Mul(t.coef, c)
		out[i] = &n
	}
	return out
}

func (p poly) sub(q poly) poly { return p.add(q.scale(ratInt(-1))) }

func (p poly) mul(q poly) poly {
	var out poly
	for _, a := range p {
		for _, b := range q {
			if t := a.mul(b); t != nil {
				out = append(out, t)
			}
		}
	}
	return out
}

// mul multiplies two terms whose bound variables are distinct; nil when
// the guards contradict syntactically.
func (a *term) mul(b *term) *term {
	g := a.guard
	for _, c := range b.guard {
		var ok bool
		if g, ok = g.with(c, condConst{}); !ok {
			return nil
		}
	}
	atoms := append(append([]*atom(nil), a.atoms...), b.atoms...)
	sortAtoms(atoms)
	return &term{
		coef:  new(big.Rat).Mul(a.coef, b.coef),
		bound: append(append([]bvar(nil), a.bound...), b.bound...),
		guard: g,
		atoms: atoms,
	}
}

func sortAtoms(as []*atom) {
	sort.SliceStable(as, func(i, j int) bool { return as[i].key < as[j].key })
}

// withGuard restricts every term by c.
func (p poly) withGuard(c *cond, k condConst) poly {
	var out poly
	for _, t := range p {
		g, ok := t.guard.with(c, k)
		if !ok {
			continue
		}
		n := *t
		n.guard = g
		out = append(out, &n)
	}
	return out
}

func (p poly) key() string {
	keys := make([]string, len(p))
	for i, t := range p {
		keys[i] = t.key()
	}
	sort.Strings(keys)
	return strings.Join(keys, " + ")
}

func (t *term) key() string {
	var b strings.Builder
	b.WriteString(t.coef.RatString())
	for _, v := range t.bound {
		b.WriteString(" S[" + v.name + "<" + v.ext.key() + "]")
	}
	if len(t.guard) > 0 {
		b.WriteString(" [" + t.guard.key() + "]")
	}
	for _, a := range t.atoms {
		b.WriteString(" " + a.key)
	}
	return b.String()
}

func newAccess(name string, idx []lin) *atom {
	keys := make([]string, len(idx))
	for i, x := range idx {
		keys[i] = x.key()
	}
	return &atom{kind: aAccess, name: name, idx: idx, key: name + "[" + strings.Join(keys, ",") + "]"}
}

// commutative lists functions whose arguments may be sorted.
var commutative = map[string]bool{"max": true, "min": true}

func newFn(name string, args []poly) *atom {
	args = append([]poly(nil), args...)
	if commutative[name] {
		sort.SliceStable(args, func(i, j int) bool { return args[i].key() < args[j].key() })
	}
	keys := make([]string, len(args))
	for i, a := range args {
		keys[i] = a.key()
	}
	return &atom{kind: aFn, name: name, args: args, key: name + "(" + strings.Join(keys, "; ") + ")"}
}

func newRed(name string, bound []bvar, body poly) *atom {
	vs := make([]string, len(bound))
	for i, v := range bound {
		vs[i] = v.name + "<" + v.ext.key()
	}
	return &atom{kind: aRed, name: name, bound: bound, args: []poly{body},
		key: name + "{" + strings.Join(vs, ",") + ": " + body.key() + "}"}
}

func newNum(x lin) *atom { return &atom{kind: aNum, num: x, key: "#(" + x.key() + ")"} }

// subst renames or replaces index names inside a; bound variables of a
// reduction are never among the replaced names.
func (a *atom) subst(f func(string) (lin, bool)) *atom {
	switch a.kind {
	case aAccess:
		idx := make([]lin, len(a.idx))
		for i, x := range a.idx {
			idx[i] = x.subst(f)
		}
		return newAccess(a.name, idx)
	case aFn:
		return newFn(a.name, substPolys(a.args, f))
	case aRed:
		bound := make([]bvar, len(a.bound))
		for i, v := range a.bound {
			bound[i] = bvar{v.name, v.ext.subst(f)}
		}
		return newRed(a.name, bound, a.args[0].subst(f))
	case aNum:
		return newNum(a.num.subst(f))
	}
	return a
}

func substPolys(ps []poly, f func(string) (lin, bool)) []poly {
	out := make([]poly, len(ps))
	for i, p := range ps {
		out[i] = p.subst(f)
	}
	return out
}

// subst replaces names in every term, dropping terms whose guard becomes
// false.
func (p poly) subst(f func(string) (lin, bool)) poly {
	var out poly
	for _, t := range p {
		if n := t.subst(f); n != nil {
			out = append(out, n)
		}
	}
	return out
}

func (t *term) subst(f func(string) (lin, bool)) *term {
	g, ok := t.guard.subst(f)
	if !ok {
		return nil
	}
	bound := make([]bvar, len(t.bound))
	for i, v := range t.bound {
		bound[i] = bvar{v.name, v.ext.subst(f)}
	}
	atoms := make([]*atom, len(t.atoms))
	for i, a := range t.atoms {
		atoms[i] = a.subst(f)
	}
	sortAtoms(atoms)
	return &term{coef: t.coef, bound: bound, guard: g, atoms: atoms}
}

func (t *term) String() string { return t.key() }
