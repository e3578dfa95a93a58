package strategy

import (
	"strings"

	"tofuc/analysis/interval"
	"tofuc/lang"
)

// partFacts is what the interval analysis may assume of a strategy's
// symbols: 0 <= VAR.lo and VAR.hi <= extent - 1 for the part of the split
// variable, and every extent at least 1 (an empty tensor has no region to
// speak of). They prove bands apart (lstm_cell's gate blocks [j.lo, j.hi]
// and [H + j.lo, H + j.hi] are separated because j.hi <= H - 1) and, with
// a constant extent, bound the part symbols numerically, which makes
// division and remainder by a constant exact within one period.
type partFacts struct {
	lo, hi, slack string
	last          lang.Dim        // extent - 1, every shape symbol S written S' + 1
	extent        int64           // 0 when the extent is not constant
	known         map[string]bool // NonNegative's answers: a region reads many alike
}

func (s *Strategy) facts() interval.Facts {
	lo, hi := s.PartSymbols()
	f := &partFacts{lo: lo, hi: hi, slack: s.Var.Name + ".slack", known: map[string]bool{}}
	f.last = s.Var.Extent.Sub(lang.Const(1)).Subst(shiftShape)
	if n, ok := s.Var.Extent.IsConst(); ok {
		f.extent = n
	}
	return f
}

// NonNegative writes VAR.hi as extent - 1 - slack (slack >= 0) and every
// shape symbol S as S' + 1 (S' >= 0), then asks whether every term is
// non-negative.
func (f *partFacts) NonNegative(d lang.Dim) bool {
	key := d.String()
	if ok, done := f.known[key]; done {
		return ok
	}
	ok := d.Subst(func(name string) (lang.Dim, bool) {
		if name == f.hi {
			return f.last.Sub(lang.Sym(f.slack)), true
		}
		return shiftShape(name)
	}).NonNegative()
	f.known[key] = ok
	return ok
}

// shiftShape writes a shape symbol S as S + 1 and keeps part symbols.
func shiftShape(name string) (lang.Dim, bool) {
	if strings.Contains(name, ".") {
		return lang.Dim{}, false
	}
	return lang.Sym(name).Add(lang.Const(1)), true
}

// Range bounds a linear d when its only symbols are the part symbols of
// a split variable of constant extent.
func (f *partFacts) Range(d lang.Dim) (lo, hi int64, ok bool) {
	coefs, c, ok := d.Linear()
	if !ok || len(coefs) > 0 && f.extent == 0 {
		return 0, 0, false
	}
	lo, hi = c, c
	for name, k := range coefs {
		if name != f.lo && name != f.hi {
			return 0, 0, false
		}
		a, b := int64(0), k*(f.extent-1)
		lo, hi = lo+min(a, b), hi+max(a, b)
	}
	return lo, hi, true
}
