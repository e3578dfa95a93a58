package smt

import (
	"fmt"
	"strings"

	"github.com/aclements/go-z3/z3"
)

// grounder turns a normal form at concrete shapes and indices into a Z3
// real term: sums unrolled, guards decided, each input element a real
// constant. max, min, abs and comparisons are encoded exactly; every other
// function (exp, tanh, ...) is uninterpreted, with no facts.
type grounder struct {
	ctx    *z3.Context
	shapes map[string][]int // the rule inputs' concrete shapes
	elems  map[string]z3.Real
	fns    map[string]z3.FuncDecl
	oob    string // a read outside an input, when one happened
}

func newGrounder(ctx *z3.Context, shapes map[string][]int) *grounder {
	return &grounder{ctx: ctx, shapes: shapes, elems: map[string]z3.Real{}, fns: map[string]z3.FuncDecl{}}
}

func (g *grounder) real(n int64) z3.Real {
	return g.ctx.FromInt(n, g.ctx.RealSort()).(z3.Real)
}

func (g *grounder) poly(p poly, env map[string]int64) z3.Real {
	out := g.real(0)
	for _, t := range p {
		out = out.Add(g.term(t, env))
	}
	return out
}

// term sums t over its bound variables' ranges.
func (g *grounder) term(t *term, env map[string]int64) z3.Real {
	out := g.real(0)
	forEachBinding(t.bound, env, func(env map[string]int64) {
		for _, c := range t.guard {
			if v, _ := c.eval(env); !v {
				return
			}
		}
		prod := g.ctx.FromBigRat(t.coef)
		for _, a := range t.atoms {
			prod = prod.Mul(g.atom(a, env))
		}
		out = out.Add(prod)
	})
	return out
}

// forEachBinding calls f with env extended by every value of the bound
// variables (an extent that is not positive gives no values).
func forEachBinding(bound []bvar, env map[string]int64, f func(map[string]int64)) {
	if len(bound) == 0 {
		f(env)
		return
	}
	n, _ := bound[0].ext.eval(env)
	for i := int64(0); i < n; i++ {
		e := make(map[string]int64, len(env)+1)
		for k, v := range env {
			e[k] = v
		}
		e[bound[0].name] = i
		forEachBinding(bound[1:], e, f)
	}
}

func (g *grounder) atom(a *atom, env map[string]int64) z3.Real {
	switch a.kind {
	case aAccess:
		return g.element(a, env)
	case aNum:
		v, _ := a.num.eval(env)
		return g.real(v)
	case aInf:
		return g.ctx.Const(a.name, g.ctx.RealSort()).(z3.Real)
	case aRed:
		return g.reduce(a, env)
	}
	args := make([]z3.Real, len(a.args))
	for i, p := range a.args {
		args[i] = g.poly(p, env)
	}
	return g.fn(a.name, args)
}

func (g *grounder) element(a *atom, env map[string]int64) z3.Real {
	shape := g.shapes[a.name]
	idx := make([]string, len(a.idx))
	for i, x := range a.idx {
		v, _ := x.eval(env)
		if v < 0 || i >= len(shape) || v >= int64(shape[i]) {
			g.oob = fmt.Sprintf("%s read at index %d of dimension %d", a.name, v, i)
			return g.real(0)
		}
		idx[i] = fmt.Sprint(v)
	}
	name := a.name + "[" + strings.Join(idx, ",") + "]"
	if r, ok := g.elems[name]; ok {
		return r
	}
	r := g.ctx.RealConst(name)
	g.elems[name] = r
	return r
}

func (g *grounder) ite(c z3.Bool, a, b z3.Real) z3.Real { return c.IfThenElse(a, b).(z3.Real) }

func (g *grounder) fn(name string, args []z3.Real) z3.Real {
	one, zero := g.real(1), g.real(0)
	switch {
	case name == "max" && len(args) == 2:
		return g.ite(args[0].GE(args[1]), args[0], args[1])
	case name == "min" && len(args) == 2:
		return g.ite(args[0].LE(args[1]), args[0], args[1])
	case name == "abs":
		return g.ite(args[0].GE(zero), args[0], args[0].Neg())
	case name == "pos":
		return g.ite(args[0].GT(zero), one, zero)
	case name == "nneg":
		return g.ite(args[0].GE(zero), one, zero)
	case name == "zero":
		return g.ite(args[0].Eq(zero), one, zero)
	case name == "recip":
		return one.Div(args[0])
	}
	key := fmt.Sprintf("%s/%d", name, len(args))
	f, ok := g.fns[key]
	if !ok {
		dom := make([]z3.Sort, len(args))
		for i := range dom {
			dom[i] = g.ctx.RealSort()
		}
		f = g.ctx.FuncDecl(name, dom, g.ctx.RealSort())
		g.fns[key] = f
	}
	vals := make([]z3.Value, len(args))
	for i, a := range args {
		vals[i] = a
	}
	return f.Apply(vals...).(z3.Real)
}

// reduce unrolls a max, min or prod; for max (min) an element that is
// -inf (+inf), the reducer's identity, is skipped.
func (g *grounder) reduce(a *atom, env map[string]int64) z3.Real {
	identity := map[string]string{"max": "-inf", "min": "inf"}[a.name]
	var acc *z3.Real
	forEachBinding(a.bound, env, func(env map[string]int64) {
		live := liveTerms(a.args[0], env)
		if len(live) == 0 && a.name != "prod" {
			return
		}
		if len(live) == 1 && len(live[0].atoms) == 1 && live[0].atoms[0].kind == aInf && live[0].atoms[0].name == identity && live[0].coef.Cmp(ratInt(1)) == 0 {
			return
		}
		v := g.poly(live, env)
		if acc == nil {
			acc = &v
			return
		}
		var r z3.Real
		switch a.name {
		case "max":
			r = g.ite(acc.GE(v), *acc, v)
		case "min":
			r = g.ite(acc.LE(v), *acc, v)
		default:
			r = acc.Mul(v)
		}
		acc = &r
	})
	if acc == nil {
		if a.name == "prod" {
			return g.real(1)
		}
		return g.ctx.Const(identity, g.ctx.RealSort()).(z3.Real)
	}
	return *acc
}

// liveTerms drops the terms without summation variables whose guard fails.
func liveTerms(p poly, env map[string]int64) poly {
	var out poly
	for _, t := range p {
		if len(t.bound) > 0 {
			out = append(out, t)
			continue
		}
		ok := true
		for _, c := range t.guard {
			if v, _ := c.eval(env); !v {
				ok = false
				break
			}
		}
		if ok {
			n := *t
			n.guard = nil
			out = append(out, &n)
		}
	}
	return out
}
