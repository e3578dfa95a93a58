package smt

// fnPoly applies an uninterpreted function to polys. Index conditions in
// the arguments' guards are lifted out first (f(select(c, a, b)) is
// [c] f(a) + [!c] f(b)), so that the function's arguments are free of
// conditions that do not depend on summation variables.
func fnPoly(name string, args ...poly) poly {
	c := liftable(args)
	if c == nil {
		return atomPoly(newFn(name, args))
	}
	nc, nk := c.not()
	var out poly
	out = out.add(fnPoly(name, restrictAll(args, c, true)...).withGuard(c, condConst{}))
	return out.add(fnPoly(name, restrictAll(args, c, false)...).withGuard(nc, nk))
}

// liftable finds a guard condition of an argument term that mentions none
// of that term's summation variables.
func liftable(args []poly) *cond {
	for _, p := range args {
		for _, t := range p {
			own := map[string]bool{}
			for _, v := range t.bound {
				own[v.name] = true
			}
			for _, c := range t.guard {
				if !c.mentions(own) {
					return c
				}
			}
		}
	}
	return nil
}

func restrictAll(args []poly, c *cond, val bool) []poly {
	out := make([]poly, len(args))
	for i, p := range args {
		out[i] = restrict(p, c, val)
	}
	return out
}

// conjuncts lists the conditions a guard holds when c holds (nil when c
// is a constant).
func conjuncts(c *cond, k condConst) []*cond {
	if k.known {
		return nil
	}
	if c.op == cAnd {
		return c.args
	}
	return []*cond{c}
}

// restrict simplifies p knowing that c is val: terms that require the
// opposite are dropped, and c (or its negation) leaves the guards.
func restrict(p poly, c *cond, val bool) poly {
	pos := conjuncts(c, condConst{})
	nc, nk := c.not()
	neg := conjuncts(nc, nk)
	if !val {
		pos, neg = neg, pos
	}
	var out poly
	for _, t := range p {
		switch {
		case len(neg) > 0 && t.guard.hasAll(neg):
			continue
		case len(pos) > 0 && t.guard.hasAll(pos):
			n := *t
			n.guard = t.guard.without(pos)
			out = append(out, &n)
		default:
			out = append(out, t)
		}
	}
	return out
}

func (g guard) hasAll(cs []*cond) bool {
	for _, c := range cs {
		found := false
		for _, x := range g {
			if x.key == c.key {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func (g guard) without(cs []*cond) guard {
	drop := map[string]bool{}
	for _, c := range cs {
		drop[c.key] = true
	}
	var out guard
	for _, x := range g {
		if !drop[x.key] {
			out = append(out, x)
		}
	}
	return out
}
