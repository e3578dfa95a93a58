package lang

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Dim is an integer expression over shape symbols, kept in a canonical form:
// a sum of terms, each an integer coefficient times a product of atoms. An
// atom is a symbol or an expression that does not distribute (floor division
// or remainder by a constant, max, min). Two Dims are equal as expressions
// exactly when their canonical strings are equal, and a Dim with no atoms is
// a constant. The zero Dim is 0. Dims are immutable.
//
// Arithmetic whose coefficients leave int64 gives the Dim Overflow instead
// of a wrapped value: it absorbs every operation (only a product with the
// constant 0 is 0), is never constant, and prints as "overflow", so no pass
// computes with a wrapped extent (Dim.Overflows reports it).
type Dim struct {
	terms []term // sorted by key; the constant term, if any, has no factors
}

type term struct {
	coef    int64
	factors []atom // sorted by key
}

type atomKind uint8

const (
	atomSym      atomKind = iota
	atomDiv               // floor(a / c)
	atomMax               // max(a, b)
	atomMin               // min(a, b)
	atomOverflow          // a value outside int64 (the only atom of Overflow)
)

type atom struct {
	kind atomKind
	sym  string
	a, b Dim
	c    int64
	key  string
}

// Const is the constant dimension n.
func Const(n int64) Dim {
	if n == 0 {
		return Dim{}
	}
	return Dim{terms: []term{{coef: n}}}
}

// Sym is the dimension named by the shape symbol s.
func Sym(s string) Dim {
	return Dim{terms: []term{{coef: 1, factors: []atom{{kind: atomSym, sym: s, key: s}}}}}
}

func atomDim(a atom) Dim { return Dim{terms: []term{{coef: 1, factors: []atom{a}}}} }

// Overflow is the result of arithmetic outside int64.
var Overflow = atomDim(atom{kind: atomOverflow, key: "overflow"})

// Overflows reports whether d is Overflow: some arithmetic that built it
// left int64.
func (d Dim) Overflows() bool {
	return len(d.terms) == 1 && len(d.terms[0].factors) == 1 && d.terms[0].factors[0].kind == atomOverflow
}

// overflows reports whether a term holds Overflow, directly or inside a
// floor division, max or min.
func (t term) overflows() bool {
	for _, f := range t.factors {
		if f.kind == atomOverflow || f.a.Overflows() || f.b.Overflows() {
			return true
		}
	}
	return false
}

// MulInt64 and AddInt64 are checked int64 arithmetic: ok is false when the
// result leaves int64.
func MulInt64(a, b int64) (int64, bool) {
	if a == 0 || b == 0 {
		return 0, true
	}
	p := a * b
	if p/b != a || (a == -1 && b == math.MinInt64) || (b == -1 && a == math.MinInt64) {
		return 0, false
	}
	return p, true
}

func AddInt64(a, b int64) (int64, bool) {
	s := a + b
	if (a > 0 && b > 0 && s < 0) || (a < 0 && b < 0 && s >= 0) {
		return 0, false
	}
	return s, true
}

func (t term) key() string {
	switch len(t.factors) {
	case 0:
		return ""
	case 1:
		return t.factors[0].key
	}
	keys := make([]string, len(t.factors))
	for i, f := range t.factors {
		keys[i] = f.key
	}
	return strings.Join(keys, "*")
}

// normalize merges terms with equal factors, drops zero terms and sorts:
// by degree, higher first, then by the factors' keys, the constant last.
// A term holding Overflow, or a sum leaving int64, gives Overflow.
func normalize(ts []term) Dim {
	type keyed struct {
		t   term
		key string
	}
	// Most Dims have a few terms: they are merged on the stack by a
	// linear search (normalize is the symbolic analyses' hot spot); many
	// terms go through a map.
	var small [8]keyed
	out := small[:0]
	var byKey map[string]int
	if len(ts) > len(small) {
		out = make([]keyed, 0, len(ts))
		byKey = make(map[string]int, len(ts))
	}
	for _, t := range ts {
		if t.overflows() {
			return Overflow
		}
		k := t.key()
		i, ok := -1, false
		if byKey != nil {
			i, ok = byKey[k]
		} else {
			i = slices.IndexFunc(out, func(o keyed) bool { return o.key == k })
			ok = i >= 0
		}
		if ok {
			sum, ok := AddInt64(out[i].t.coef, t.coef)
			if !ok {
				return Overflow
			}
			out[i].t.coef = sum
			continue
		}
		if byKey != nil {
			byKey[k] = len(out)
		}
		out = append(out, keyed{t, k})
	}
	kept := out[:0]
	for _, kt := range out {
		if kt.t.coef != 0 {
			kept = append(kept, kt)
		}
	}
	if len(kept) == 0 {
		return Dim{}
	}
	// The keys are distinct: the order is total, so any sort gives it.
	slices.SortFunc(kept, func(a, b keyed) int {
		switch {
		case a.key == "" && b.key != "":
			return 1 // the constant last
		case a.key != "" && b.key == "":
			return -1
		}
		if len(a.t.factors) != len(b.t.factors) {
			return cmp.Compare(len(b.t.factors), len(a.t.factors))
		}
		return strings.Compare(a.key, b.key)
	})
	terms := make([]term, len(kept))
	for i, kt := range kept {
		terms[i] = kt.t
	}
	return Dim{terms: terms}
}

// Add returns d + e.
func (d Dim) Add(e Dim) Dim {
	var buf [8]term // normalize copies what it keeps
	return normalize(append(append(buf[:0], d.terms...), e.terms...))
}

// Neg returns -d.
func (d Dim) Neg() Dim { return d.Scale(-1) }

// Sub returns d - e.
func (d Dim) Sub(e Dim) Dim { return d.Add(e.Neg()) }

// Scale returns k * d.
func (d Dim) Scale(k int64) Dim {
	var buf [8]term // normalize copies what it keeps
	ts := buf[:0]
	for _, t := range d.terms {
		coef, ok := MulInt64(t.coef, k)
		if !ok {
			return Overflow
		}
		ts = append(ts, term{coef: coef, factors: t.factors})
	}
	return normalize(ts)
}

// Mul returns d * e.
func (d Dim) Mul(e Dim) Dim {
	var ts []term
	for _, a := range d.terms {
		for _, b := range e.terms {
			fs := append(append([]atom(nil), a.factors...), b.factors...)
			sort.Slice(fs, func(i, j int) bool { return fs[i].key < fs[j].key })
			coef, ok := MulInt64(a.coef, b.coef)
			if !ok {
				return Overflow
			}
			ts = append(ts, term{coef: coef, factors: fs})
		}
	}
	return normalize(ts)
}

// IsConst reports whether d has no symbols, and its value.
func (d Dim) IsConst() (int64, bool) {
	switch len(d.terms) {
	case 0:
		return 0, true
	case 1:
		if len(d.terms[0].factors) == 0 {
			return d.terms[0].coef, true
		}
	}
	return 0, false
}

// constPart splits d into its constant and the rest.
func (d Dim) constPart() (int64, Dim) {
	if n := len(d.terms); n > 0 && len(d.terms[n-1].factors) == 0 {
		return d.terms[n-1].coef, Dim{terms: d.terms[:n-1]}
	}
	return 0, d
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

func floorMod(a, b int64) int64 { return a - floorDiv(a, b)*b }

// FloorDiv returns floor(d / c) for a positive constant c, exact where d is
// divisible term by term.
func (d Dim) FloorDiv(c int64) Dim {
	if c <= 0 {
		panic("lang: FloorDiv by a non-positive constant")
	}
	if c == 1 {
		return d
	}
	if n, ok := d.IsConst(); ok {
		return Const(floorDiv(n, c))
	}
	if len(d.terms) == 1 && d.terms[0].coef == 1 && len(d.terms[0].factors) == 1 && d.terms[0].factors[0].kind == atomDiv {
		// floor(floor(a / b) / c) = floor(a / (b c)) for positive b, c.
		inner := d.terms[0].factors[0]
		if bc, ok := MulInt64(inner.c, c); ok {
			return inner.a.FloorDiv(bc)
		}
	}
	// floor((c*q + r) / c) = q + floor(r / c) for integer-valued q.
	var q, r []term
	for _, t := range d.terms {
		if t.coef%c == 0 {
			q = append(q, term{coef: t.coef / c, factors: t.factors})
		} else {
			r = append(r, t)
		}
	}
	quot := normalize(q)
	rest := normalize(r)
	k, sym := rest.constPart()
	quot = quot.Add(Const(floorDiv(k, c)))
	if len(sym.terms) == 0 {
		return quot
	}
	rest = sym.Add(Const(floorMod(k, c)))
	return quot.Add(atomDim(atom{kind: atomDiv, a: rest, c: c, key: "(" + rest.String() + ")/" + strconv.FormatInt(c, 10)}))
}

// CeilDiv returns ceil(d / c) for a positive constant c.
func (d Dim) CeilDiv(c int64) Dim { return d.Add(Const(c - 1)).FloorDiv(c) }

// Mod returns d mod c (in [0, c)) for a positive constant c.
func (d Dim) Mod(c int64) Dim {
	return d.Sub(d.FloorDiv(c).Scale(c))
}

// Max returns max(d, e).
func (d Dim) Max(e Dim) Dim { return minmax(d, e, atomMax) }

// Min returns min(d, e).
func (d Dim) Min(e Dim) Dim { return minmax(d, e, atomMin) }

func minmax(d, e Dim, kind atomKind) Dim {
	if d.Overflows() || e.Overflows() {
		return Overflow
	}
	x, xok := d.IsConst()
	y, yok := e.IsConst()
	if xok && yok {
		if (x > y) == (kind == atomMax) {
			return d
		}
		return e
	}
	if d.Equal(e) {
		return d
	}
	if r, ok := absorb(d, e, kind); ok {
		return r
	}
	if r, ok := absorb(e, d, kind); ok {
		return r
	}
	if diff := d.Sub(e); diff.NonNegative() || diff.Neg().NonNegative() {
		// Provably ordered (shape symbols are non-negative).
		if diff.NonNegative() == (kind == atomMax) {
			return d
		}
		return e
	}
	a, b := d, e
	if a.String() > b.String() {
		a, b = b, a
	}
	name := "max"
	if kind == atomMin {
		name = "min"
	}
	return atomDim(atom{kind: kind, a: a, b: b, key: name + "(" + a.String() + ", " + b.String() + ")"})
}

// absorb simplifies max(d, e) (or min) when e is itself a max or min
// holding d: max(d, max(d, y)) = max(d, y), and max(d, min(d, y)) = d.
func absorb(d, e Dim, kind atomKind) (Dim, bool) {
	if len(e.terms) != 1 || e.terms[0].coef != 1 || len(e.terms[0].factors) != 1 {
		return Dim{}, false
	}
	f := e.terms[0].factors[0]
	if (f.kind != atomMax && f.kind != atomMin) || !(f.a.Equal(d) || f.b.Equal(d)) {
		return Dim{}, false
	}
	if f.kind == kind {
		return e, true // max(d, max(d, y)) = max(d, y)
	}
	return d, true // max(d, min(d, y)) = d
}

// Equal reports whether d and e are the same canonical expression.
func (d Dim) Equal(e Dim) bool {
	if a, ok := d.IsConst(); ok { // the common case, without printing
		b, ok := e.IsConst()
		return ok && a == b
	}
	return d.String() == e.String()
}

// Symbols returns the shape symbols d mentions, sorted.
func (d Dim) Symbols() []string {
	set := map[string]bool{}
	d.collect(set)
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

func (d Dim) collect(set map[string]bool) {
	for _, t := range d.terms {
		for _, f := range t.factors {
			if f.kind == atomSym {
				set[f.sym] = true
			} else {
				f.a.collect(set)
				f.b.collect(set)
			}
		}
	}
}

// Subst replaces symbols by the dimensions bound to them.
func (d Dim) Subst(bind func(sym string) (Dim, bool)) Dim {
	out := Dim{}
	for _, t := range d.terms {
		p := Const(t.coef)
		for _, f := range t.factors {
			p = p.Mul(f.subst(bind))
		}
		out = out.Add(p)
	}
	return out
}

func (f atom) subst(bind func(string) (Dim, bool)) Dim {
	switch f.kind {
	case atomSym:
		if v, ok := bind(f.sym); ok {
			return v
		}
		return atomDim(f)
	case atomDiv:
		return f.a.Subst(bind).FloorDiv(f.c)
	case atomMax:
		return f.a.Subst(bind).Max(f.b.Subst(bind))
	default:
		return f.a.Subst(bind).Min(f.b.Subst(bind))
	}
}

// Eval evaluates d with every symbol bound to an integer.
func (d Dim) Eval(env map[string]int64) (int64, error) {
	var missing string
	v := d.Subst(func(s string) (Dim, bool) {
		n, ok := env[s]
		if !ok && missing == "" {
			missing = s
		}
		return Const(n), ok
	})
	if missing != "" {
		return 0, fmt.Errorf("shape symbol %s has no value", missing)
	}
	if v.Overflows() {
		return 0, fmt.Errorf("%s overflows 64-bit integers", d)
	}
	n, _ := v.IsConst()
	return n, nil
}

// Linear reports whether d is a sum of symbols times constants plus a
// constant, and gives the coefficients.
func (d Dim) Linear() (coefs map[string]int64, constant int64, ok bool) {
	coefs = map[string]int64{}
	for _, t := range d.terms {
		switch {
		case len(t.factors) == 0:
			constant = t.coef
		case len(t.factors) == 1 && t.factors[0].kind == atomSym:
			coefs[t.factors[0].sym] = t.coef
		default:
			return nil, 0, false
		}
	}
	return coefs, constant, true
}

// String prints d canonically, e.g. "H - KH + 1" or "(H - 1)/2 + 1".
func (d Dim) String() string {
	if len(d.terms) == 0 {
		return "0"
	}
	var b strings.Builder
	for i, t := range d.terms {
		// the magnitude as text: -math.MinInt64 is not an int64
		mag := strings.TrimPrefix(strconv.FormatInt(t.coef, 10), "-")
		switch {
		case i == 0 && t.coef < 0:
			b.WriteString("-")
		case i > 0 && t.coef < 0:
			b.WriteString(" - ")
		case i > 0:
			b.WriteString(" + ")
		}
		if len(t.factors) == 0 {
			b.WriteString(mag)
			continue
		}
		if mag != "1" {
			b.WriteString(mag)
			b.WriteString("*")
		}
		b.WriteString(t.product(mag != "1"))
	}
	return b.String()
}

// product prints a term's factors. Inside a longer product a floor
// division is parenthesised, so that the text reads back as the same
// dimension: 2*((N + 2)/3), not 2*(N + 2)/3, which is (2*(N + 2))/3.
func (t term) product(scaled bool) string {
	if !scaled && len(t.factors) == 1 {
		return t.factors[0].key
	}
	parts := make([]string, len(t.factors))
	for i, f := range t.factors {
		parts[i] = f.key
		if f.kind == atomDiv {
			parts[i] = "(" + f.key + ")"
		}
	}
	return strings.Join(parts, "*")
}

// ShapeString prints a shape as "[2, N, 3]".
func ShapeString(s []Dim) string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = d.String()
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// ShapeEqual reports whether two shapes are the same expressions.
func ShapeEqual(a, b []Dim) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].Equal(b[i]) {
			return false
		}
	}
	return true
}

// ConstShape returns the integer extents of a shape with no symbols.
func ConstShape(s []Dim) ([]int, bool) {
	out := make([]int, len(s))
	for i, d := range s {
		n, ok := d.IsConst()
		if !ok {
			return nil, false
		}
		out[i] = int(n)
	}
	return out, true
}

// ShapeElements is the number of elements of a tensor of shape s; ok is
// false when s has a symbol, or the count leaves int64.
func ShapeElements(s []Dim) (n int64, ok bool) {
	n = 1
	for _, d := range s {
		e, isConst := d.IsConst()
		if !isConst {
			return 0, false
		}
		if n, ok = MulInt64(n, e); !ok {
			return 0, false
		}
	}
	return n, true
}

// ShapeBytes is the size of a tensor of dtype dt (at least one byte an
// element) and shape s; ok is false when s has a symbol, or the size
// leaves int64.
func ShapeBytes(dt DType, s []Dim) (int64, bool) {
	n, ok := ShapeElements(s)
	if !ok {
		return 0, false
	}
	return MulInt64(n, int64(max(1, dt.Size())))
}

// NonNegative reports whether d is provably >= 0, taking every shape
// symbol as non-negative: all coefficients are non-negative and every atom
// is.
func (d Dim) NonNegative() bool {
	for _, t := range d.terms {
		if t.coef < 0 {
			return false
		}
		for _, f := range t.factors {
			if !f.nonNegative() {
				return false
			}
		}
	}
	return true
}

func (f atom) nonNegative() bool {
	switch f.kind {
	case atomSym:
		return true
	case atomDiv:
		return f.a.NonNegative()
	case atomMax:
		return f.a.NonNegative() || f.b.NonNegative()
	case atomOverflow:
		return false
	}
	return f.a.NonNegative() && f.b.NonNegative()
}

// FormatBytes writes a byte count with a binary unit ("1.50 GiB").
func FormatBytes(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	f, u := float64(n), 0
	for f >= 1024 && u < len(units)-1 {
		f /= 1024
		u++
	}
	if u == 0 {
		return fmt.Sprintf("%d B", n)
	}
	return fmt.Sprintf("%.2f %s", f, units[u])
}
