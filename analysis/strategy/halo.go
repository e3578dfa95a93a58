package strategy

import (
	"tofuc/analysis/interval"
	"tofuc/lang"
	"tofuc/lang/ir"
)

// WholeDim reports whether a worker reads dimension d of the region's
// tensor entirely.
func (r Region) WholeDim(d int) bool {
	if r.Whole[d] {
		return true
	}
	full := interval.Range(r.Tensor.Shape[d])
	return r.Dims[d].Lo.Equal(full.Lo) && r.Dims[d].Hi.Equal(full.Hi)
}

// Unread reports whether a worker reads nothing of the region's tensor.
func (r Region) Unread() bool {
	if len(r.Dims) == 0 {
		return false
	}
	for _, iv := range r.Dims {
		if !iv.Size().Equal(lang.Const(0)) {
			return false
		}
	}
	return true
}

// Halo is how much longer than the worker's part of an output split a
// region dimension that follows the split variable is, when that excess
// does not depend on the part: a window's overlap, e.g. K - 1 for a
// convolution split along its output width. Regions are clamped to the
// tensor, which only shortens the first and last workers' windows; the
// halo is an interior worker's, taken from the unclamped indices where
// the output bodies read the input directly. iv is the region's
// dimension d of input t under strategy s.
func (a *Analysis) Halo(s *Strategy, t *ir.Tensor, d int, iv interval.Interval) (lang.Dim, bool) {
	if s.Kind != SplitOutput {
		return lang.Dim{}, false // a halo is relative to a part of the output
	}
	lo, hi := s.PartSymbols()
	if !mentions(iv.Lo, lo, hi) && !mentions(iv.Hi, lo, hi) {
		return lang.Dim{}, false
	}
	if u, ok := a.unclamped(s, t, d); ok {
		iv = u
	}
	part := lang.Sym(hi).Sub(lang.Sym(lo)).Add(lang.Const(1))
	h := iv.Size().Sub(part)
	if mentions(h, lo, hi) {
		return lang.Dim{}, false
	}
	if n, ok := h.IsConst(); ok && n <= 0 {
		return lang.Dim{}, false
	}
	return h, true
}

// unclamped bounds dimension d of what the outputs read of input t under
// strategy s, without clamping it to the tensor. It fails where t is read
// through a local, an opaque function or a data-dependent index.
func (a *Analysis) unclamped(s *Strategy, t *ir.Tensor, d int) (interval.Interval, bool) {
	lo, hi := s.PartSymbols()
	part := interval.Interval{Lo: lang.Sym(lo), Hi: lang.Sym(hi)}
	env := interval.Env{}
	if s.Kind == SplitOutput {
		for i, o := range a.Inst.Outputs {
			env[o.Vars[s.Dims[i]]] = part
		}
	} else {
		env[s.Var] = part
	}
	var out interval.Interval
	found, ok := false, true
	visit := func(e ir.Expr) bool {
		switch x := e.(type) {
		case *ir.Opaque:
			for _, v := range x.Args {
				ok = ok && v.T != t
			}
		case *ir.Access:
			if x.T != t {
				break
			}
			iv, err := interval.Of(x.Index[d], env)
			if err != nil {
				ok = false
				break
			}
			if found {
				iv = interval.Hull(out, iv)
			}
			out, found = iv, true
		}
		return ok
	}
	for _, l := range a.Inst.Locals {
		ir.Walk(l.Body, func(e ir.Expr) bool {
			if x, isAccess := e.(*ir.Access); isAccess && x.T == t {
				ok = false
			}
			return ok
		})
	}
	for _, o := range a.Inst.Outputs {
		ir.Walk(o.Body, visit)
	}
	return out, ok && found
}

func mentions(d lang.Dim, syms ...string) bool {
	for _, s := range d.Symbols() {
		for _, t := range syms {
			if s == t {
				return true
			}
		}
	}
	return false
}
