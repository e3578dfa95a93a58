package interval

import (
	"slices"

	"tofuc/lang"
	"tofuc/lang/ir"
)

// MaxBands bounds the intervals of a Set: a union of more becomes its
// hull. Eight covers the widest fused operator of the standard library
// (lstm_cell's two biases of four gates each).
const MaxBands = 8

// maxCases bounds the cases one index expression is bounded in (the
// product of its enumerated variables' values and banded variables'
// bands); beyond it the remaining variables take their hulls.
const maxCases = 64

// Set is a union of bands: intervals in increasing order, each provably
// separated from the next (a gap of zero or more values between them),
// at most MaxBands of them. A nil or empty Set is empty.
type Set []Interval

// Hull is the smallest interval holding every band.
func (s Set) Hull() Interval {
	h := s[0]
	for _, b := range s[1:] {
		h = Hull(h, b)
	}
	return h
}

// Size is the number of values in the bands.
func (s Set) Size() lang.Dim {
	n := lang.Const(0)
	for _, b := range s {
		n = n.Add(b.Size())
	}
	return n
}

// Subst substitutes symbols in every band.
func (s Set) Subst(bind func(string) (lang.Dim, bool)) Set {
	out := make(Set, len(s))
	for i, b := range s {
		out[i] = b.Subst(bind)
	}
	return out
}

func (s Set) String() string {
	out := ""
	for i, b := range s {
		if i > 0 {
			out += " ∪ "
		}
		out += b.String()
	}
	return out
}

// Facts is what is known of the symbols of the bounds beyond their
// being non-negative.
type Facts interface {
	// NonNegative reports whether d is provably >= 0.
	NonNegative(d lang.Dim) bool
	// Range bounds d numerically; ok is false when some symbol of d has
	// no known range.
	Range(d lang.Dim) (lo, hi int64, ok bool)
}

// Plain knows only that shape symbols are non-negative.
type Plain struct{}

func (Plain) NonNegative(d lang.Dim) bool { return d.NonNegative() }

func (Plain) Range(d lang.Dim) (int64, int64, bool) {
	n, ok := d.IsConst()
	return n, n, ok
}

// separated reports whether b lies after a with at least no overlap:
// b.Lo - a.Hi - 1 >= 0.
func separated(a, b Interval, f Facts) bool {
	gap := b.Lo.Sub(a.Hi).Sub(lang.Const(1))
	if lo, _, ok := f.Range(gap); ok {
		return lo >= 0
	}
	return gap.NonNegative() || f.NonNegative(gap)
}

// adjacent reports whether b starts right after a, whatever the symbols.
func adjacent(a, b Interval) bool {
	n, ok := b.Lo.Sub(a.Hi).IsConst()
	return ok && n == 1
}

// Add is s ∪ {iv}: bands not provably separated from iv, or adjacent to
// it, merge with it into their hull; more than MaxBands become one hull.
func (s Set) Add(iv Interval, f Facts) Set {
	for _, b := range s {
		if b.Lo.Equal(iv.Lo) && b.Hi.Equal(iv.Hi) {
			return s
		}
	}
	out := slices.Clone(s)
	for merged := true; merged; {
		merged = false
		for i, b := range out {
			apart := separated(b, iv, f) && !adjacent(b, iv) || separated(iv, b, f) && !adjacent(iv, b)
			if !apart {
				iv, merged = Hull(b, iv), true
				out = slices.Delete(out, i, i+1)
				break
			}
		}
	}
	at := 0
	for at < len(out) && separated(out[at], iv, f) {
		at++
	}
	out = slices.Insert(out, at, iv)
	if len(out) > MaxBands {
		return Set{out.Hull()}
	}
	return out
}

// Union is a ∪ b.
func Union(a, b Set, f Facts) Set {
	for _, iv := range b {
		a = a.Add(iv, f)
	}
	return a
}

// SetEnv gives the bands of each index variable.
type SetEnv map[*ir.Var]Set

// OfSet bounds an index expression by a union of bands: Of in every case
// of the variables that make bands, the union of the results. Those are
// the variables ranging over several bands (in env: a local's variables
// over the bands read of it), case by case, and the variables taking at
// most MaxBands constant values that are multiplied, divided or reduced
// modulo inside e (u in 2*u*H + j, lstm_cell's gate blocks), value by
// value. Other variables take their hull or their whole extent, as in Of.
func OfSet(e ir.Expr, env SetEnv, f Facts) (Set, error) {
	if f == nil {
		f = Plain{}
	}
	base := Env{}
	for v, s := range env {
		base[v] = s.Hull()
	}
	cases := enumerated(e, env)
	var out Set
	err := eachCase(cases, base, func(env Env) error {
		iv, err := of(e, env, f)
		if err == nil {
			out = out.Add(iv, f)
		}
		return err
	})
	return out, err
}

// alternatives are the values a variable takes case by case.
type alternatives struct {
	v   *ir.Var
	ivs []Interval
}

// enumerated lists the variables of e that make bands, while the product
// of their cases stays within maxCases.
func enumerated(e ir.Expr, env SetEnv) []alternatives {
	var out []alternatives
	seen := map[*ir.Var]bool{}
	total := 1
	visit := func(v *ir.Var, strided bool) {
		if seen[v] {
			return
		}
		seen[v] = true
		s, ok := env[v]
		if !ok {
			s = Set{Range(v.Extent)}
		}
		ivs := []Interval(s)
		if strided {
			if pts := points(s); len(pts) > 0 {
				ivs = pts
			}
		}
		if len(ivs) < 2 {
			return
		}
		if len(ivs) == 0 || total*len(ivs) > maxCases {
			return
		}
		total *= len(ivs)
		out = append(out, alternatives{v, ivs})
	}
	var walk func(x ir.Expr, strided bool)
	walk = func(x ir.Expr, strided bool) {
		if r, ok := x.(*ir.VarRef); ok {
			visit(r.V, strided)
			return
		}
		if b, ok := x.(*ir.Binary); ok && (b.Op == ir.OpMul || b.Op == ir.OpDiv || b.Op == ir.OpMod) && !unit(b.L) && !unit(b.R) {
			strided = true
		}
		for _, c := range ir.Children(x) {
			walk(c, strided)
		}
	}
	walk(e, false)
	return out
}

// unit reports a constant 1 or -1: a product by it makes no stride (a
// convolution's default dilation).
func unit(e ir.Expr) bool {
	k, ok := ir.ConstInt(e)
	return ok && (k == 1 || k == -1)
}

// points lists the values of s when they are constants, at most
// MaxBands of them.
func points(s Set) []Interval {
	var out []Interval
	for _, b := range s {
		lo, ok1 := b.Lo.IsConst()
		hi, ok2 := b.Hi.IsConst()
		if !ok1 || !ok2 || len(out)+int(hi-lo+1) > MaxBands {
			return nil
		}
		for x := lo; x <= hi; x++ {
			out = append(out, Point(lang.Const(x)))
		}
	}
	return out
}

// eachCase calls fn with base extended by every combination of the
// alternatives.
func eachCase(cases []alternatives, base Env, fn func(Env) error) error {
	if len(cases) == 0 {
		return fn(base)
	}
	env := Env{}
	for v, iv := range base {
		env[v] = iv
	}
	pick := make([]int, len(cases))
	for {
		for i, c := range cases {
			env[c.v] = c.ivs[pick[i]]
		}
		if err := fn(env); err != nil {
			return err
		}
		i := 0
		for ; i < len(pick); i++ {
			if pick[i]++; pick[i] < len(cases[i].ivs) {
				break
			}
			pick[i] = 0
		}
		if i == len(pick) {
			return nil
		}
	}
}

// Clamp intersects every band with [0, n-1].
func (s Set) Clamp(n lang.Dim) Set {
	out := make(Set, len(s))
	for i, b := range s {
		out[i] = b.Clamp(n)
	}
	return out
}
