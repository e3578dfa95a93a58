package ir

import "tofuc/lang"

// Affine is an index expression Const + Σ Terms[k].Coef · Terms[k].Var: the
// one symbolic affine-index analysis of tofuc. The interpreter folds affine
// accesses into flat offsets with it, the interval analysis and the
// checker's bounds test read it, and the code generator lowers accesses
// and proves them in range with it.
type Affine struct {
	Const lang.Dim
	Terms []AffineTerm // one per variable, no zero coefficient
}

// AffineTerm is one variable of an affine expression with its coefficient.
type AffineTerm struct {
	Var  *Var
	Coef int64
}

// AffineOf recognises an i64 index expression made of VarRef, integer
// Const, Size, +, -, unary - and * by a constant. Shape symbols found in
// syms are replaced by their values (syms may be nil); a product is affine
// only when one factor is a constant integer once they are.
func AffineOf(e Expr, syms map[string]int64) (Affine, bool) {
	switch e := e.(type) {
	case *Const:
		if e.T.IsFloat() {
			return Affine{}, false
		}
		return Affine{Const: lang.Const(e.T.WrapInt(e.Int))}, true
	case *Size:
		return Affine{Const: bindDim(e.D, syms)}, true
	case *VarRef:
		return Affine{Const: lang.Const(0), Terms: []AffineTerm{{e.V, 1}}}, true
	case *Unary:
		if e.Op != "-" || e.T != lang.I64 {
			return Affine{}, false
		}
		x, ok := AffineOf(e.X, syms)
		return x.Scale(-1), ok
	case *Binary:
		if e.T != lang.I64 || e.L.Type().IsFloat() || e.R.Type().IsFloat() {
			return Affine{}, false
		}
		l, ok := AffineOf(e.L, syms)
		if !ok {
			return Affine{}, false
		}
		r, ok := AffineOf(e.R, syms)
		if !ok {
			return Affine{}, false
		}
		switch e.Op {
		case OpAdd:
			return l.Add(r), true
		case OpSub:
			return l.Add(r.Scale(-1)), true
		case OpMul:
			if k, ok := l.IsConst(); ok {
				return r.Scale(k), true
			}
			if k, ok := r.IsConst(); ok {
				return l.Scale(k), true
			}
			if len(l.Terms) == 0 && len(r.Terms) == 0 {
				return Affine{Const: l.Const.Mul(r.Const)}, true
			}
		}
	}
	return Affine{}, false
}

// IsAffine reports whether e is affine with symbols kept symbolic.
func IsAffine(e Expr) bool {
	_, ok := AffineOf(e, nil)
	return ok
}

func bindDim(d lang.Dim, syms map[string]int64) lang.Dim {
	if len(syms) == 0 {
		return d
	}
	return d.Subst(func(s string) (lang.Dim, bool) {
		v, ok := syms[s]
		return lang.Const(v), ok
	})
}

// IsConst returns the value of an affine expression without variables
// whose constant is a number.
func (a Affine) IsConst() (int64, bool) {
	if len(a.Terms) > 0 {
		return 0, false
	}
	return a.Const.IsConst()
}

// Coef is the coefficient of v in a (0 where a does not name it).
func (a Affine) Coef(v *Var) int64 {
	for _, t := range a.Terms {
		if t.Var == v {
			return t.Coef
		}
	}
	return 0
}

// Scale returns k·a.
func (a Affine) Scale(k int64) Affine {
	out := Affine{Const: a.Const.Scale(k)}
	for _, t := range a.Terms {
		out = out.Add(Affine{Const: lang.Const(0), Terms: []AffineTerm{{t.Var, t.Coef * k}}})
	}
	return out
}

// Add returns a + b with the terms of equal variables merged and zero
// terms dropped; the order of first appearance is kept.
func (a Affine) Add(b Affine) Affine {
	out := Affine{Const: a.Const.Add(b.Const)}
	for _, x := range [2]Affine{a, b} {
	terms:
		for _, t := range x.Terms {
			for j := range out.Terms {
				if out.Terms[j].Var == t.Var {
					out.Terms[j].Coef += t.Coef
					continue terms
				}
			}
			out.Terms = append(out.Terms, t)
		}
	}
	kept := out.Terms[:0:0]
	for _, t := range out.Terms {
		if t.Coef != 0 {
			kept = append(kept, t)
		}
	}
	out.Terms = kept
	return out
}

// Bounds returns the smallest and largest value of a when each variable v
// ranges over [0, extent(v)) and the constant is a number; ok is false
// when it is not, or when a variable's range is empty.
func (a Affine) Bounds(extent func(*Var) (int64, bool)) (lo, hi int64, ok bool) {
	c, ok := a.Const.IsConst()
	if !ok {
		return 0, 0, false
	}
	lo, hi = c, c
	for _, t := range a.Terms {
		n, ok := extent(t.Var)
		if !ok || n <= 0 {
			return 0, 0, false
		}
		v := t.Coef * (n - 1)
		if v < 0 {
			lo += v
		} else {
			hi += v
		}
	}
	return lo, hi, true
}
