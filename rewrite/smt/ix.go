package smt

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"tofuc/lang"
)

// lin is an integer (index) expression in canonical form: a constant plus
// integer atoms times non-zero coefficients, sorted by the atoms' keys. Two
// lins are the same expression exactly when their keys are equal.
type lin struct {
	k     int64
	terms []linTerm
}

type linTerm struct {
	coef int64
	a    *iatom
}

type iatomKind uint8

const (
	iName     iatomKind = iota // a shape symbol or an index variable
	iFloorDiv                  // floor(x / c), c > 0
	iTruncDiv                  // x / c truncated toward zero (C), c > 0
	iTruncMod                  // x % c with the sign of x (C), c > 0
	iMul                       // x * y, neither constant
	iMax
	iMin
	iTruncDivL // x / y, y not a constant (positive where it is used)
	iTruncModL // x % y, y not a constant
)

// iatom is an integer atom: a name or an operation that does not
// distribute over the linear form.
type iatom struct {
	kind iatomKind
	name string
	x, y lin
	c    int64
	key  string
}

func linConst(k int64) lin { return lin{k: k} }

func linName(n string) lin { return linAtom(&iatom{kind: iName, name: n, key: n}) }

func linAtom(a *iatom) lin { return lin{terms: []linTerm{{1, a}}} }

func (l lin) isConst() (int64, bool) { return l.k, len(l.terms) == 0 }

func (l lin) add(m lin) lin {
	out := lin{k: l.k + m.k}
	byKey := map[string]int{}
	for _, ts := range [][]linTerm{l.terms, m.terms} {
		for _, t := range ts {
			if i, ok := byKey[t.a.key]; ok {
				out.terms[i].coef += t.coef
				continue
			}
			byKey[t.a.key] = len(out.terms)
			out.terms = append(out.terms, t)
		}
	}
	kept := out.terms[:0]
	for _, t := range out.terms {
		if t.coef != 0 {
			kept = append(kept, t)
		}
	}
	out.terms = kept
	sort.Slice(out.terms, func(i, j int) bool { return out.terms[i].a.key < out.terms[j].a.key })
	return out
}

func (l lin) scale(c int64) lin {
	if c == 0 {
		return lin{}
	}
	out := lin{k: l.k * c, terms: make([]linTerm, len(l.terms))}
	for i, t := range l.terms {
		out.terms[i] = linTerm{t.coef * c, t.a}
	}
	return out
}

func (l lin) sub(m lin) lin { return l.add(m.scale(-1)) }

func (l lin) mul(m lin) lin {
	if c, ok := l.isConst(); ok {
		return m.scale(c)
	}
	if c, ok := m.isConst(); ok {
		return l.scale(c)
	}
	x, y := l, m
	if x.key() > y.key() {
		x, y = y, x
	}
	return linAtom(&iatom{kind: iMul, x: x, y: y, key: "(" + x.key() + ")*(" + y.key() + ")"})
}

// divisible reports whether every coefficient and the constant of l are
// multiples of c.
func (l lin) divisible(c int64) bool {
	if l.k%c != 0 {
		return false
	}
	for _, t := range l.terms {
		if t.coef%c != 0 {
			return false
		}
	}
	return true
}

func (l lin) exactDiv(c int64) lin {
	out := lin{k: l.k / c, terms: make([]linTerm, len(l.terms))}
	for i, t := range l.terms {
		out.terms[i] = linTerm{t.coef / c, t.a}
	}
	return out
}

func floorDivInt(a, c int64) int64 {
	q := a / c
	if a%c != 0 && (a < 0) != (c < 0) {
		q--
	}
	return q
}

// divOp divides by a positive constant c with the atom kind's rounding.
func (l lin) divOp(kind iatomKind, c int64) lin {
	if c == 1 {
		return l
	}
	if k, ok := l.isConst(); ok {
		if kind == iFloorDiv {
			return linConst(floorDivInt(k, c))
		}
		return linConst(k / c)
	}
	if kind == iFloorDiv && l.divisible(c) {
		return l.exactDiv(c)
	}
	name := map[iatomKind]string{iFloorDiv: "fdiv", iTruncDiv: "div"}[kind]
	return linAtom(&iatom{kind: kind, x: l, c: c, key: fmt.Sprintf("%s(%s,%d)", name, l.key(), c)})
}

func (l lin) mod(c int64) lin {
	if c == 1 {
		return lin{}
	}
	if k, ok := l.isConst(); ok {
		return linConst(k % c)
	}
	return linAtom(&iatom{kind: iTruncMod, x: l, c: c, key: fmt.Sprintf("mod(%s,%d)", l.key(), c)})
}

// divLin divides by a non-constant integer expression, truncating (rem
// gives the remainder instead).
func (l lin) divLin(m lin, rem bool) lin {
	if c, ok := m.isConst(); ok && c > 0 {
		if rem {
			return l.mod(c)
		}
		return l.divOp(iTruncDiv, c)
	}
	kind, name := iTruncDivL, "ldiv("
	if rem {
		kind, name = iTruncModL, "lmod("
	}
	return linAtom(&iatom{kind: kind, x: l, y: m, key: name + l.key() + ";" + m.key() + ")"})
}

func (l lin) minmax(m lin, kind iatomKind) lin {
	a, aok := l.isConst()
	b, bok := m.isConst()
	if aok && bok {
		if (kind == iMax) == (a > b) {
			return l
		}
		return m
	}
	x, y := l, m
	if x.key() > y.key() {
		x, y = y, x
	}
	name := map[iatomKind]string{iMax: "max", iMin: "min"}[kind]
	return linAtom(&iatom{kind: kind, x: x, y: y, key: name + "(" + x.key() + "," + y.key() + ")"})
}

func (l lin) key() string {
	var b strings.Builder
	for _, t := range l.terms {
		b.WriteString(strconv.FormatInt(t.coef, 10))
		b.WriteString("*")
		b.WriteString(t.a.key)
		b.WriteString("+")
	}
	b.WriteString(strconv.FormatInt(l.k, 10))
	return b.String()
}

// String prints l readably.
func (l lin) String() string {
	var parts []string
	for _, t := range l.terms {
		s := t.a.String()
		if t.coef != 1 {
			s = strconv.FormatInt(t.coef, 10) + "*" + s
		}
		parts = append(parts, s)
	}
	if l.k != 0 || len(parts) == 0 {
		parts = append(parts, strconv.FormatInt(l.k, 10))
	}
	return strings.Join(parts, " + ")
}

func (a *iatom) String() string {
	switch a.kind {
	case iName:
		return a.name
	case iMul:
		return "(" + a.x.String() + ")*(" + a.y.String() + ")"
	case iMax, iMin:
		return a.key
	}
	return a.key
}

// subst replaces names bound by f and rebuilds the canonical form.
func (l lin) subst(f func(string) (lin, bool)) lin {
	out := linConst(l.k)
	for _, t := range l.terms {
		out = out.add(t.a.subst(f).scale(t.coef))
	}
	return out
}

func (a *iatom) subst(f func(string) (lin, bool)) lin {
	switch a.kind {
	case iName:
		if v, ok := f(a.name); ok {
			return v
		}
		return linAtom(a)
	case iMul:
		return a.x.subst(f).mul(a.y.subst(f))
	case iMax, iMin:
		return a.x.subst(f).minmax(a.y.subst(f), a.kind)
	case iTruncMod:
		return a.x.subst(f).mod(a.c)
	case iTruncDivL, iTruncModL:
		return a.x.subst(f).divLin(a.y.subst(f), a.kind == iTruncModL)
	}
	return a.x.subst(f).divOp(a.kind, a.c)
}

// names adds every name l mentions to set.
func (l lin) names(set map[string]bool) {
	for _, t := range l.terms {
		t.a.names(set)
	}
}

func (a *iatom) names(set map[string]bool) {
	if a.kind == iName {
		set[a.name] = true
		return
	}
	a.x.names(set)
	a.y.names(set)
}

func (l lin) mentions(names map[string]bool) bool {
	set := map[string]bool{}
	l.names(set)
	for n := range set {
		if names[n] {
			return true
		}
	}
	return false
}

// eval evaluates l with every name bound.
func (l lin) eval(env map[string]int64) (int64, bool) {
	c, ok := l.subst(func(n string) (lin, bool) {
		v, ok := env[n]
		return linConst(v), ok
	}).isConst()
	return c, ok
}

// dimLin converts a shape dimension.
func dimLin(d lang.Dim) lin {
	return lang.FoldDim(d, lang.DimAlgebra[lin]{
		Const:    linConst,
		Sym:      linName,
		Add:      lin.add,
		Mul:      lin.mul,
		FloorDiv: func(a lin, c int64) lin { return a.divOp(iFloorDiv, c) },
		Max:      func(a, b lin) lin { return a.minmax(b, iMax) },
		Min:      func(a, b lin) lin { return a.minmax(b, iMin) },
	})
}
