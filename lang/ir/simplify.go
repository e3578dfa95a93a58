package ir

import (
	"slices"

	"tofuc/lang"
)

// Index ranges and the simplification of divided indices. A reshape
// reads its input at unravel(ravel(o, T), S): divisions and remainders of
// a linear index, which AffineOf cannot read. Composed (a channel shuffle
// is a reshape, a transpose and a reshape), they cost a dozen divisions
// an element and read nothing a bounds test could prove in range.
// SimplifyIndex removes the divisions that the ranges of the variables
// make exact: (784·c + 28·h + w) / 784 is c where h < 28 and w < 28.

// rangeLimit bounds the values IndexRange works with, so that its sums
// and products cannot overflow.
const rangeLimit = 1 << 60

// IndexRange returns the smallest and largest value of i64 index
// expression e with each variable v in [0, extent(v)); ok is false where
// e holds anything but integer constants, sizes, variables, +, -, *, and
// / or % by a positive constant (% of a non-negative value), or where a
// bound is unknown or huge.
func IndexRange(e Expr, extent func(*Var) (int64, bool)) (lo, hi int64, ok bool) {
	switch e := e.(type) {
	case *Const:
		if e.T.IsFloat() {
			return 0, 0, false
		}
		return e.Int, e.Int, small(e.Int)
	case *Size:
		n, ok := e.D.IsConst()
		return n, n, ok && small(n)
	case *VarRef:
		n, ok := extent(e.V)
		return 0, n - 1, ok && n > 0 && small(n)
	case *Unary:
		if e.Op != "-" || e.T != lang.I64 {
			return 0, 0, false
		}
		l, h, ok := IndexRange(e.X, extent)
		return -h, -l, ok
	case *Select:
		if e.T != lang.I64 {
			return 0, 0, false
		}
		la, ha, okA := IndexRange(e.A, extent)
		lb, hb, okB := IndexRange(e.B, extent)
		return min(la, lb), max(ha, hb), okA && okB
	case *Binary:
		if e.T != lang.I64 {
			return 0, 0, false
		}
		l1, h1, ok1 := IndexRange(e.L, extent)
		l2, h2, ok2 := IndexRange(e.R, extent)
		if !ok1 || !ok2 {
			return 0, 0, false
		}
		return binaryRange(e.Op, l1, h1, l2, h2)
	}
	return 0, 0, false
}

func binaryRange(op BinOp, l1, h1, l2, h2 int64) (lo, hi int64, ok bool) {
	switch op {
	case OpAdd:
		lo, hi = l1+l2, h1+h2
	case OpSub:
		lo, hi = l1-h2, h1-l2
	case OpMul:
		if !productSmall(max(abs(l1), abs(h1)), max(abs(l2), abs(h2))) {
			return 0, 0, false
		}
		p := []int64{l1 * l2, l1 * h2, h1 * l2, h1 * h2}
		lo, hi = slices.Min(p), slices.Max(p)
	case OpDiv:
		if l2 != h2 || l2 <= 0 {
			return 0, 0, false
		}
		return l1 / l2, h1 / l2, true // truncation is monotonic
	case OpMod:
		if l2 != h2 || l2 <= 0 || l1 < 0 {
			return 0, 0, false
		}
		if h1 < l2 {
			return l1, h1, true
		}
		return 0, l2 - 1, true
	default:
		return 0, 0, false
	}
	return lo, hi, small(lo) && small(hi)
}

func small(n int64) bool { return n > -rangeLimit && n < rangeLimit }

// productSmall reports whether a·b is below rangeLimit, a and b at
// least 0 (and below it).
func productSmall(a, b int64) bool { return a == 0 || b < rangeLimit/a }

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

// SimplifyIndex returns i64 index expression e with every division and
// remainder by a positive constant k of a non-negative linear sum
// simplified where the ranges make it exact: the sum is g·A + B with B
// in [0, g) for a divisor g of k, so sum / k is A / (k/g) and sum % k is
// g·(A % (k/g)) + B (A alone, B alone, where g is k), and a sum in
// [0, k) divided is 0 and its remainder itself. Variables range over
// [0, extent(v)); e is not changed.
func SimplifyIndex(e Expr, extent func(*Var) (int64, bool)) Expr {
	return Map(e, func(x Expr) Expr {
		b, ok := x.(*Binary)
		if !ok || b.T != lang.I64 || (b.Op != OpDiv && b.Op != OpMod) {
			return x
		}
		k, ok := ConstInt(b.R)
		switch {
		case !ok || k <= 0:
			return x
		case k == 1 && b.Op == OpDiv:
			return b.L
		case k == 1:
			return IndexConst(0)
		}
		if s, ok := divided(b.Op, b.L, k, extent); ok {
			return s
		}
		return x
	})
}

// linear is an index expression as Σ coef·atom + c, atoms being the
// parts that are no sum, difference, negation or product by a constant.
type linear struct {
	terms []linTerm
	c     int64
}

type linTerm struct {
	coef   int64
	atom   Expr
	lo, hi int64 // the atom's range
}

// linearOf reads e as a linear sum of atoms with known ranges; atoms of
// one value fold into c.
func linearOf(e Expr, extent func(*Var) (int64, bool)) (linear, bool) {
	switch x := e.(type) {
	case *Const:
		return linear{c: x.Int}, !x.T.IsFloat() && small(x.Int)
	case *Unary:
		if x.Op == "-" && x.T == lang.I64 {
			l, ok := linearOf(x.X, extent)
			return l.scale(-1), ok
		}
	case *Binary:
		if x.T != lang.I64 {
			break
		}
		switch x.Op {
		case OpAdd, OpSub:
			l, okL := linearOf(x.L, extent)
			r, okR := linearOf(x.R, extent)
			if x.Op == OpSub {
				r = r.scale(-1)
			}
			return linear{terms: append(l.terms, r.terms...), c: l.c + r.c}, okL && okR
		case OpMul:
			if k, ok := ConstInt(x.R); ok && small(k) {
				l, ok := linearOf(x.L, extent)
				return l.scale(k), ok
			}
			if k, ok := ConstInt(x.L); ok && small(k) {
				r, ok := linearOf(x.R, extent)
				return r.scale(k), ok
			}
		}
	}
	lo, hi, ok := IndexRange(e, extent)
	if !ok {
		return linear{}, false
	}
	if lo == hi {
		return linear{c: lo}, true
	}
	return linear{terms: []linTerm{{coef: 1, atom: e, lo: lo, hi: hi}}}, true
}

func (l linear) scale(k int64) linear {
	out := linear{c: l.c * k}
	for _, t := range l.terms {
		t.coef *= k
		out.terms = append(out.terms, t)
	}
	return out
}

// bounds is the range of the sum of terms and c.
func bounds(terms []linTerm, c int64) (lo, hi int64) {
	lo, hi = c, c
	for _, t := range terms {
		a, b := t.coef*t.lo, t.coef*t.hi
		lo, hi = lo+min(a, b), hi+max(a, b)
	}
	return lo, hi
}

// expr rebuilds Σ (coef/g)·atom + c as an expression.
func (l linear) expr(g int64) Expr {
	var out Expr = IndexConst(0)
	for _, t := range l.terms {
		out = IndexAdd(out, IndexMul(t.atom, t.coef/g))
	}
	return IndexAdd(out, IndexConst(l.c))
}

// divided simplifies sum op k (op / or %), or reports that it cannot.
func divided(op BinOp, sum Expr, k int64, extent func(*Var) (int64, bool)) (Expr, bool) {
	l, ok := linearOf(sum, extent)
	if !ok {
		return nil, false
	}
	// Every term, and their sum, stays below rangeLimit: a term at most
	// rangeLimit / (terms + 1).
	limit := rangeLimit / int64(len(l.terms)+1)
	if abs(l.c) >= limit {
		return nil, false
	}
	for _, t := range l.terms {
		if !productSmall(abs(t.coef), max(abs(t.lo), abs(t.hi))) || abs(t.coef)*max(abs(t.lo), abs(t.hi)) >= limit {
			return nil, false
		}
	}
	if lo, hi := bounds(l.terms, l.c); lo < 0 || !small(hi) {
		return nil, false // truncation is no floor below 0
	} else if hi < k {
		if op == OpDiv {
			return IndexConst(0), true
		}
		return l.expr(1), true
	}
	// The candidate divisors g of k, largest first: k and the greatest
	// common divisors of k with the coefficients.
	gs := []int64{k}
	for _, t := range l.terms {
		gs = append(gs, gcd(abs(t.coef), k))
	}
	slices.Sort(gs)
	slices.Reverse(gs)
	for _, g := range slices.Compact(gs) {
		if g < 2 {
			break
		}
		var a, b linear
		for _, t := range l.terms {
			if t.coef%g == 0 {
				a.terms = append(a.terms, t)
			} else {
				b.terms = append(b.terms, t)
			}
		}
		a.c, b.c = floorDiv(l.c, g)*g, l.c-floorDiv(l.c, g)*g
		if lo, hi := bounds(b.terms, b.c); lo < 0 || hi >= g {
			continue
		}
		a.c /= g
		m := k / g
		q := a.expr(g)
		if op == OpDiv {
			if m == 1 {
				return q, true
			}
			return simplifyOnce(OpDiv, q, m, extent), true
		}
		rest := b.expr(1)
		if m == 1 {
			return rest, true
		}
		return IndexAdd(IndexMul(simplifyOnce(OpMod, q, m, extent), g), rest), true
	}
	return nil, false
}

// simplifyOnce is q op m, simplified by divided where it can be.
func simplifyOnce(op BinOp, q Expr, m int64, extent func(*Var) (int64, bool)) Expr {
	if s, ok := divided(op, q, m, extent); ok {
		return s
	}
	return IndexBin(op, q, IndexConst(m))
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}
