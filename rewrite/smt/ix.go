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
	iTruncDivL // x / y truncated, y not a constant; 0 where y is 0 (as the interpreter)
	iTruncModL // x % y with the sign of x, y not a constant; 0 where y is 0
	iIte       // 1 where cond holds, else 0: a bool used as an integer
)

// iatom is an integer atom: a name or an operation that does not
// distribute over the linear form.
type iatom struct {
	kind iatomKind
	name string
	x, y lin
	c    int64
	cond *cond // iIte
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

// divLin divides by an integer expression, truncating toward zero (rem
// gives the remainder, with the sign of l); division by zero gives 0, as
// in the interpreter.
func (l lin) divLin(m lin, rem bool) lin {
	if c, ok := m.isConst(); ok {
		switch {
		case c == 0:
			return lin{}
		case c < 0 && rem:
			return l.mod(-c) // C's remainder has the dividend's sign
		case c < 0:
			return l.divOp(iTruncDiv, -c).scale(-1)
		case rem:
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

// indicator is 1 where c holds and 0 elsewhere.
func indicator(c *cond, k condConst) lin {
	if k.known {
		if k.val {
			return linConst(1)
		}
		return lin{}
	}
	return linAtom(&iatom{kind: iIte, cond: c, key: "[" + c.key + "]"})
}

// wrap converts l to the integer dtype t as the interpreter does: a bool
// is l != 0, a narrower type wraps around (two's complement), i64 is taken
// not to overflow (docs/rules.md); u64 is not modelled (its comparisons
// are unsigned).
func (l lin) wrap(t lang.DType) (lin, bool) {
	if k, ok := l.isConst(); ok && t != lang.U64 {
		return linConst(t.WrapInt(k)), true
	}
	switch {
	case t == lang.Bool:
		c, k := mkEQ(l)
		nc, nk := negate(c, k)
		return indicator(nc, nk), true
	case t == lang.I64:
		return l, true
	case !t.IsInt() || t == lang.U64:
		return lin{}, false
	}
	m := int64(1) << t.Bits()
	shift := int64(0)
	if t.IsSigned() {
		shift = m / 2
	}
	return l.sub(l.add(linConst(shift)).divOp(iFloorDiv, m).scale(m)), true
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
	case iIte:
		return indicator(a.cond.subst(f))
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
	switch a.kind {
	case iName:
		set[a.name] = true
	case iIte:
		a.cond.names(set)
	default:
		a.x.names(set)
		a.y.names(set)
	}
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

// eval evaluates l; ok is false when a name is unbound. It computes as
// the interpreter does (truncating division, 0 for a division by zero)
// and agrees with the Z3 encoding.
func (l lin) eval(env map[string]int64) (v int64, ok bool) {
	v = l.k
	for _, t := range l.terms {
		x, ok := t.a.eval(env)
		if !ok {
			return 0, false
		}
		v += t.coef * x
	}
	return v, true
}

func (a *iatom) eval(env map[string]int64) (int64, bool) {
	switch a.kind {
	case iName:
		v, ok := env[a.name]
		return v, ok
	case iIte:
		v, ok := a.cond.eval(env)
		if v {
			return 1, ok
		}
		return 0, ok
	}
	x, xok := a.x.eval(env)
	y, yok := a.y.eval(env) // 0 for the atoms without y
	if !xok || !yok {
		return 0, false
	}
	switch a.kind {
	case iFloorDiv:
		return floorDivInt(x, a.c), true
	case iTruncDiv:
		return x / a.c, true
	case iTruncMod:
		return x % a.c, true
	case iMul:
		return x * y, true
	case iMax:
		return max(x, y), true
	case iMin:
		return min(x, y), true
	case iTruncDivL, iTruncModL:
		switch {
		case y == 0:
			return 0, true
		case a.kind == iTruncDivL:
			return x / y, true
		}
		return x % y, true
	}
	return 0, false
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
