package interval

import (
	"fmt"

	"tofuc/lang"
	"tofuc/lang/ir"
)

// Interval is the set of integers [Lo, Hi]; it is empty when Hi < Lo.
type Interval struct {
	Lo, Hi lang.Dim
}

// Point is the interval [d, d].
func Point(d lang.Dim) Interval { return Interval{d, d} }

// Range is [0, n-1], the values of an index over an extent n.
func Range(n lang.Dim) Interval { return Interval{lang.Const(0), n.Sub(lang.Const(1))} }

// Size is the number of integers in the interval (Hi - Lo + 1), which may
// be zero or negative for an empty interval.
func (iv Interval) Size() lang.Dim { return iv.Hi.Sub(iv.Lo).Add(lang.Const(1)) }

func (iv Interval) String() string { return "[" + iv.Lo.String() + ", " + iv.Hi.String() + "]" }

// Subst substitutes symbols in both bounds.
func (iv Interval) Subst(bind func(string) (lang.Dim, bool)) Interval {
	return Interval{iv.Lo.Subst(bind), iv.Hi.Subst(bind)}
}

// Hull is the smallest interval holding a and b.
func Hull(a, b Interval) Interval { return Interval{a.Lo.Min(b.Lo), a.Hi.Max(b.Hi)} }

// Clamp intersects iv with [0, n-1].
func (iv Interval) Clamp(n lang.Dim) Interval {
	return Interval{iv.Lo.Max(lang.Const(0)), iv.Hi.Min(n.Sub(lang.Const(1)))}
}

// Env gives the interval of each index variable.
type Env map[*ir.Var]Interval

// Error says why an expression cannot be bounded.
type Error struct {
	Expr   ir.Expr
	Reason string
}

func (e *Error) Error() string {
	return fmt.Sprintf("cannot bound %s: %s", ir.ExprString(e.Expr), e.Reason)
}

// Of bounds an integer index expression (i64 arithmetic; conversions and
// arithmetic of narrower integers, which wrap, are not bounded): every
// value it takes while each
// variable ranges over its interval in env lies in the result. Variables
// missing from env range over their whole extent. A data-dependent value
// (an element read from a tensor) cannot be bounded here: the caller gives
// the indexed dimension its whole range.
func Of(e ir.Expr, env Env) (Interval, error) { return of(e, env, nil) }

// of is Of with what is known of the symbols (nil: nothing beyond shape
// symbols being non-negative), which makes division and remainder by a
// constant exact where the bounds lie in one period.
func of(e ir.Expr, env Env, f Facts) (Interval, error) {
	switch e := e.(type) {
	case *ir.Const:
		if e.T.IsFloat() {
			return Interval{}, &Error{e, "a float index"}
		}
		return Point(lang.Const(e.Int)), nil
	case *ir.Size:
		return Point(e.D), nil
	case *ir.VarRef:
		if iv, ok := env[e.V]; ok {
			return iv, nil
		}
		return Range(e.V.Extent), nil
	case *ir.Unary:
		if e.Op != "-" {
			return Interval{}, &Error{e, "a logical operation"}
		}
		if e.T != lang.I64 {
			return Interval{}, &Error{e, "arithmetic in " + e.T.String() + ", which wraps"}
		}
		x, err := of(e.X, env, f)
		return Interval{x.Hi.Neg(), x.Lo.Neg()}, err
	case *ir.Binary:
		return binary(e, env, f)
	case *ir.Select:
		a, err := of(e.A, env, f)
		if err != nil {
			return a, err
		}
		b, err := of(e.B, env, f)
		return Hull(a, b), err
	case *ir.Cast:
		switch {
		case e.T.IsFloat() || e.X.Type().IsFloat():
			return Interval{}, &Error{e, "a conversion from or to a float"}
		case e.T != lang.I64 || !e.X.Type().IsInt():
			return Interval{}, &Error{e, "a conversion to " + e.T.String() + ", which may wrap"}
		}
		return of(e.X, env, f)
	case *ir.Call:
		return call(e, env, f)
	case *ir.Access, *ir.Opaque:
		return Interval{}, &Error{e, "a value read from a tensor (data-dependent)"}
	}
	return Interval{}, &Error{e, "not an index expression"}
}

// call bounds the integer functions an index can use: max, min, abs.
func call(e *ir.Call, env Env, f Facts) (Interval, error) {
	args := make([]Interval, len(e.Args))
	for i, x := range e.Args {
		iv, err := of(x, env, f)
		if err != nil {
			return iv, err
		}
		args[i] = iv
	}
	switch e.Fn {
	case "max":
		return Interval{args[0].Lo.Max(args[1].Lo), args[0].Hi.Max(args[1].Hi)}, nil
	case "min":
		return Interval{args[0].Lo.Min(args[1].Lo), args[0].Hi.Min(args[1].Hi)}, nil
	case "abs":
		a := args[0]
		if nonNegative(a.Lo) {
			return a, nil
		}
		return Interval{lang.Const(0), a.Lo.Neg().Max(a.Hi)}, nil
	}
	return Interval{}, &Error{e, "the function " + e.Fn + " in an index"}
}

func binary(e *ir.Binary, env Env, f Facts) (Interval, error) {
	if e.T != lang.I64 && !e.Op.IsComparison() {
		// Index arithmetic is i64; arithmetic of a narrower integer
		// wraps at its width, which intervals do not model.
		return Interval{}, &Error{e, "arithmetic in " + e.T.String() + ", which wraps"}
	}
	a, err := of(e.L, env, f)
	if err != nil {
		return a, err
	}
	b, err := of(e.R, env, f)
	if err != nil {
		return b, err
	}
	switch e.Op {
	case ir.OpAdd:
		return Interval{a.Lo.Add(b.Lo), a.Hi.Add(b.Hi)}, nil
	case ir.OpSub:
		return Interval{a.Lo.Sub(b.Hi), a.Hi.Sub(b.Lo)}, nil
	case ir.OpMul:
		return mul(e, a, b)
	case ir.OpDiv:
		c, ok := positiveConst(b)
		if !ok {
			if b.Lo.Equal(b.Hi) && nonNegative(b.Lo) && nonNegative(a.Lo) {
				// A non-negative value divided by an extent (0 gives 0): it
				// shrinks, so [0, hi] holds it; loose but sound.
				return Interval{lang.Const(0), a.Hi}, nil
			}
			return Interval{}, &Error{e, "division by a value that is not a positive constant or an extent"}
		}
		if q, ok := onePeriod(a, c, f); ok {
			return Point(lang.Const(q)), nil
		}
		// Integer division truncates toward zero, a monotonic function:
		// floor(lo/c) <= trunc(lo/c), and trunc(hi/c) <= ceil(hi/c), with
		// floor exact for a non-negative bound.
		hi := a.Hi.CeilDiv(c)
		if nonNegative(a.Hi) {
			hi = a.Hi.FloorDiv(c)
		}
		return Interval{a.Lo.FloorDiv(c), hi}, nil
	case ir.OpMod:
		return mod(e, a, b, f)
	}
	return Interval{}, &Error{e, "a comparison or logical operation"}
}

// mul multiplies by a constant (either side) or by a symbolic point such
// as an extent N: scaling by a provably non-negative point keeps the order
// of the bounds, by a provably non-positive one swaps them.
func mul(e *ir.Binary, a, b Interval) (Interval, error) {
	if k, ok := pointConst(b); ok {
		return scale(a, k), nil
	}
	if k, ok := pointConst(a); ok {
		return scale(b, k), nil
	}
	for _, p := range [][2]Interval{{a, b}, {b, a}} {
		x, pt := p[0], p[1]
		if !pt.Lo.Equal(pt.Hi) {
			continue
		}
		switch s := pt.Lo; {
		case nonNegative(s):
			return Interval{x.Lo.Mul(s), x.Hi.Mul(s)}, nil
		case nonNegative(s.Neg()):
			return Interval{x.Hi.Mul(s), x.Lo.Mul(s)}, nil
		}
	}
	return Interval{}, &Error{e, "a product of two varying values, or by a value of unknown sign"}
}

func scale(a Interval, k int64) Interval {
	if k < 0 {
		return Interval{a.Hi.Scale(k), a.Lo.Scale(k)}
	}
	return Interval{a.Lo.Scale(k), a.Hi.Scale(k)}
}

// mod is exact when the whole interval lies in one period, and [0, c-1]
// (conservative) otherwise.
func mod(e *ir.Binary, a, b Interval, f Facts) (Interval, error) {
	if c, ok := positiveConst(b); ok {
		if q, ok := onePeriod(a, c, f); ok {
			return Interval{a.Lo.Sub(lang.Const(q * c)), a.Hi.Sub(lang.Const(q * c))}, nil
		}
	}
	if !nonNegative(a.Lo) {
		// C's remainder takes the sign of the dividend: |x % c| < c.
		if c, ok := positiveConst(b); ok {
			return Interval{lang.Const(1 - c), lang.Const(c - 1)}, nil
		}
		return Interval{}, &Error{e, "remainder of a possibly negative value by a varying value"}
	}
	if c, ok := positiveConst(b); ok {
		if a.Lo.FloorDiv(c).Equal(a.Hi.FloorDiv(c)) {
			return Interval{a.Lo.Mod(c), a.Hi.Mod(c)}, nil
		}
		return Interval{lang.Const(0), lang.Const(c - 1)}, nil
	}
	if b.Lo.Equal(b.Hi) && nonNegative(b.Lo) {
		return Interval{lang.Const(0), b.Lo.Sub(lang.Const(1))}, nil
	}
	return Interval{}, &Error{e, "remainder by a varying or possibly negative value"}
}

// onePeriod reports whether the facts place every value of a, which is
// non-negative, in one period of c, [q·c, q·c + c - 1], and gives q.
func onePeriod(a Interval, c int64, f Facts) (int64, bool) {
	if f == nil {
		return 0, false
	}
	lo, _, ok1 := f.Range(a.Lo)
	_, hi, ok2 := f.Range(a.Hi)
	if !ok1 || !ok2 || lo < 0 || lo/c != hi/c {
		return 0, false
	}
	return lo / c, true
}

func pointConst(iv Interval) (int64, bool) {
	lo, ok := iv.Lo.IsConst()
	hi, ok2 := iv.Hi.IsConst()
	return lo, ok && ok2 && lo == hi
}

func positiveConst(iv Interval) (int64, bool) {
	k, ok := pointConst(iv)
	return k, ok && k > 0
}

// nonNegative reports whether d is provably >= 0: a non-negative constant,
// or a polynomial whose terms all have non-negative coefficients (shape
// symbols are non-negative).
func nonNegative(d lang.Dim) bool { return d.NonNegative() }

// Affine reports whether e is affine in its variables (ir.AffineOf, with
// shape symbols kept symbolic). Of bounds such an expression tightly: both
// bounds are attained.
func Affine(e ir.Expr) bool { return ir.IsAffine(e) }
