package smt

import (
	"sort"
	"strings"
)

type condOp uint8

const (
	cGE  condOp = iota // x >= 0
	cEQ                // x == 0
	cAnd               // every arg
	cOr                // some arg
)

// cond is a condition on integers in canonical form: comparisons are
// x >= 0 or x == 0 with x a lin; and/or hold sorted, distinct arguments.
type cond struct {
	op   condOp
	x    lin
	args []*cond
	key  string
}

// condConst is the result of building a condition that folded to a
// constant: known reports it, val is its truth.
type condConst struct{ known, val bool }

func mkGE(x lin) (*cond, condConst) {
	if k, ok := x.isConst(); ok {
		return nil, condConst{true, k >= 0}
	}
	return &cond{op: cGE, x: x, key: "ge(" + x.key() + ")"}, condConst{}
}

func mkEQ(x lin) (*cond, condConst) {
	if k, ok := x.isConst(); ok {
		return nil, condConst{true, k == 0}
	}
	if len(x.terms) > 0 && x.terms[0].coef < 0 {
		x = x.scale(-1)
	}
	return &cond{op: cEQ, x: x, key: "eq(" + x.key() + ")"}, condConst{}
}

// mkJunction builds and/or of conditions that may be constants.
func mkJunction(op condOp, cs []*cond, consts []condConst) (*cond, condConst) {
	absorbing := op == cOr // true absorbs an or, false an and
	seen := map[string]*cond{}
	for i, c := range cs {
		if consts[i].known {
			if consts[i].val == absorbing {
				return nil, condConst{true, absorbing}
			}
			continue
		}
		if c.op == op {
			for _, a := range c.args {
				seen[a.key] = a
			}
			continue
		}
		seen[c.key] = c
	}
	if len(seen) == 0 {
		return nil, condConst{true, !absorbing}
	}
	args := make([]*cond, 0, len(seen))
	for _, c := range seen {
		args = append(args, c)
	}
	sort.Slice(args, func(i, j int) bool { return args[i].key < args[j].key })
	if len(args) == 1 {
		return args[0], condConst{}
	}
	keys := make([]string, len(args))
	for i, a := range args {
		keys[i] = a.key
	}
	name := map[condOp]string{cAnd: "and(", cOr: "or("}[op]
	return &cond{op: op, args: args, key: name + strings.Join(keys, ",") + ")"}, condConst{}
}

// negate negates a condition that may be a constant.
func negate(c *cond, k condConst) (*cond, condConst) {
	if k.known {
		return nil, condConst{true, !k.val}
	}
	return c.not()
}

// not negates c.
func (c *cond) not() (*cond, condConst) {
	switch c.op {
	case cGE:
		return mkGE(c.x.scale(-1).add(linConst(-1)))
	case cEQ:
		a, ac := mkGE(c.x.add(linConst(-1)))
		b, bc := mkGE(c.x.scale(-1).add(linConst(-1)))
		return mkJunction(cOr, []*cond{a, b}, []condConst{ac, bc})
	}
	args := make([]*cond, len(c.args))
	consts := make([]condConst, len(c.args))
	for i, a := range c.args {
		args[i], consts[i] = a.not()
	}
	return mkJunction(cAnd+cOr-c.op, args, consts)
}

func (c *cond) subst(f func(string) (lin, bool)) (*cond, condConst) {
	switch c.op {
	case cGE:
		return mkGE(c.x.subst(f))
	case cEQ:
		return mkEQ(c.x.subst(f))
	}
	args := make([]*cond, len(c.args))
	consts := make([]condConst, len(c.args))
	for i, a := range c.args {
		args[i], consts[i] = a.subst(f)
	}
	return mkJunction(c.op, args, consts)
}

func (c *cond) names(set map[string]bool) {
	c.x.names(set)
	for _, a := range c.args {
		a.names(set)
	}
}

func (c *cond) mentions(names map[string]bool) bool {
	set := map[string]bool{}
	c.names(set)
	for n := range set {
		if names[n] {
			return true
		}
	}
	return false
}

// eval decides c; ok is false when a name is unbound.
func (c *cond) eval(env map[string]int64) (v, ok bool) {
	switch c.op {
	case cGE, cEQ:
		x, ok := c.x.eval(env)
		return c.op == cGE && x >= 0 || c.op == cEQ && x == 0, ok
	}
	for _, a := range c.args {
		x, ok := a.eval(env)
		if !ok {
			return false, false
		}
		if x == (c.op == cOr) {
			return x, true
		}
	}
	return c.op == cAnd, true
}

func (c *cond) String() string {
	switch c.op {
	case cGE:
		return c.x.String() + " >= 0"
	case cEQ:
		return c.x.String() + " == 0"
	}
	parts := make([]string, len(c.args))
	for i, a := range c.args {
		parts[i] = "(" + a.String() + ")"
	}
	return strings.Join(parts, map[condOp]string{cAnd: " && ", cOr: " || "}[c.op])
}

// guard is a conjunction of conditions, sorted and distinct; the empty
// guard is true.
type guard []*cond

// with adds c (flattening a conjunction); ok is false when the guard is
// now false.
func (g guard) with(c *cond, k condConst) (guard, bool) {
	if k.known {
		return g, k.val
	}
	if c.op == cAnd {
		out := g
		for _, a := range c.args {
			out, _ = out.with(a, condConst{})
		}
		return out, true
	}
	for _, x := range g {
		if x.key == c.key {
			return g, true
		}
	}
	out := append(append(guard(nil), g...), c)
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out, true
}

func (g guard) key() string {
	keys := make([]string, len(g))
	for i, c := range g {
		keys[i] = c.key
	}
	return strings.Join(keys, "&")
}

// cond returns the conjunction as one condition.
func (g guard) cond() (*cond, condConst) {
	consts := make([]condConst, len(g))
	return mkJunction(cAnd, g, consts)
}

func (g guard) subst(f func(string) (lin, bool)) (guard, bool) {
	var out guard
	for _, c := range g {
		s, k := c.subst(f)
		var ok bool
		if out, ok = out.with(s, k); !ok {
			return nil, false
		}
	}
	return out, true
}

// holdsAt evaluates g with every name bound.
func (g guard) holdsAt(env map[string]int64) bool {
	for _, c := range g {
		if v, ok := c.eval(env); !ok || !v {
			return false
		}
	}
	return true
}
