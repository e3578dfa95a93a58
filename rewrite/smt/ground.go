package smt

import (
	"fmt"
	"math/big"
	"sort"
	"strings"

	"github.com/aclements/go-z3/z3"

	"tofuc/lang"
)

// grounder turns a normal form at concrete shapes and indices into Z3 real
// terms: sums unrolled, guards decided, each input element a real
// constant. max, min, abs, comparisons and the integer conversions are
// encoded exactly; every other function (exp, tanh, the rounding of a
// narrowing float cast, ...) is uninterpreted, with no facts.
//
// Infinities (a -inf padding, an empty max) are tracked as IEEE values:
// skipped as the identity of a max (min), absorbing in max and min, and
// passed through selections; an infinity that would meet arithmetic is
// not modelled (notModelled), since real arithmetic is wrong for it
// (-inf - -inf is NaN, not 0).
type grounder struct {
	ctx     *z3.Context
	dl      *deadline
	shapes  map[string][]int // the rule inputs' concrete shapes
	atoms   map[string]*gatom
	z3atoms map[int]z3.Real
	elems   map[string]z3.Real // the input elements translated to Z3, by name
	fns     map[string]z3.FuncDecl
	memo    map[string]gval       // function and reduction atoms, by key and the values of their free names
	free    map[*atom][]string    // the names an atom mentions, sorted
	parts   map[*term]*factorized // each term's independent sums
	oob     string                // a read outside an input, when one happened
}

// gval is a grounded value: a polynomial, or an infinity of sign inf.
type gval struct {
	p   gpoly
	inf int8
}

func newGrounder(ctx *z3.Context, dl *deadline, shapes map[string][]int) *grounder {
	return &grounder{ctx: ctx, dl: dl, shapes: shapes, atoms: map[string]*gatom{}, z3atoms: map[int]z3.Real{},
		elems: map[string]z3.Real{}, fns: map[string]z3.FuncDecl{},
		memo: map[string]gval{}, free: map[*atom][]string{}, parts: map[*term]*factorized{}}
}

func (g *grounder) real(n int64) z3.Real {
	return g.ctx.FromInt(n, g.ctx.RealSort()).(z3.Real)
}

// finite is v's polynomial; an infinity here is not modelled.
func (g *grounder) finite(v gval, where string) gpoly {
	if v.inf != 0 {
		panic(notModelled{"an infinity meets " + where + " (the encoding does not model IEEE arithmetic on infinities)"})
	}
	return v.p
}

func (g *grounder) poly(p poly, env map[string]int64) gval {
	var live []gval
	for _, t := range p {
		if v, ok := g.term(t, env); ok {
			live = append(live, v)
		}
	}
	return g.sum(live)
}

// sum adds values; an infinity may only stand alone.
func (g *grounder) sum(vs []gval) gval {
	switch len(vs) {
	case 0:
		return gval{p: gpoly{}}
	case 1:
		return vs[0]
	}
	out := gpoly{}
	for _, v := range vs {
		out.accumulate(g.finite(v, "a sum"), g.dl)
	}
	return gval{p: out}
}

// product multiplies coef by the values; an infinity may only stand
// alone (times a non-zero coefficient, which sets its sign).
func (g *grounder) product(coef *big.Rat, vs []gval) gval {
	if len(vs) == 1 && vs[0].inf != 0 && coef.Sign() != 0 {
		return gval{inf: vs[0].inf * int8(coef.Sign())}
	}
	out := constGpoly(coef)
	for _, v := range vs {
		out = out.mul(g.finite(v, "a product"), g.dl)
	}
	return gval{p: out}
}

// term sums t over its bound variables; live is false when no binding's
// guard holds (the term is 0 there).
func (g *grounder) term(t *term, env map[string]int64) (v gval, live bool) {
	f := g.factor(t)
	for _, c := range f.free.guard {
		if !holds(c, env) {
			return gval{}, false
		}
	}
	vals := make([]gval, 0, len(f.free.atoms)+len(f.sums))
	for _, a := range f.free.atoms {
		vals = append(vals, g.atom(a, env))
	}
	for _, s := range f.sums {
		v, ok := g.indepSum(s, env)
		if !ok {
			return gval{}, false
		}
		vals = append(vals, v)
	}
	return g.product(t.coef, vals), true
}

// factorized splits a term's summation into independent sums: variables
// that share no condition, atom or extent are summed separately, so
// sum_{i,j} a_i b_j costs |i| + |j| instead of |i| * |j|.
type factorized struct {
	free *indep // the conditions and atoms without summation variables
	sums []*indep
}

type indep struct {
	vars  []bvar
	guard []*cond
	atoms []*atom
}

func (g *grounder) factor(t *term) *factorized {
	if f, ok := g.parts[t]; ok {
		return f
	}
	own := boundSet(t.bound)
	uf := newNeeds() // its union-find
	// mine unions and returns t's variables among names (nil: none).
	mine := func(names func(map[string]bool)) []string {
		set := map[string]bool{}
		names(set)
		var vs []string
		for x := range set {
			if own[x] {
				vs = append(vs, x)
			}
		}
		sort.Strings(vs)
		uf.union(vs)
		return vs
	}
	for _, v := range t.bound {
		mine(func(set map[string]bool) { set[v.name] = true; v.ext.names(set) })
	}
	condVars := make([][]string, len(t.guard))
	for i, c := range t.guard {
		condVars[i] = mine(c.names)
	}
	atomVars := make([][]string, len(t.atoms))
	for i, a := range t.atoms {
		atomVars[i] = mine(a.names)
	}
	f := &factorized{free: &indep{}}
	byRoot := map[string]*indep{}
	for _, v := range t.bound {
		r := uf.root(v.name)
		if byRoot[r] == nil {
			byRoot[r] = &indep{}
			f.sums = append(f.sums, byRoot[r])
		}
		byRoot[r].vars = append(byRoot[r].vars, v)
	}
	sumOf := func(vs []string) *indep {
		if len(vs) == 0 {
			return f.free
		}
		return byRoot[uf.root(vs[0])]
	}
	for i, c := range t.guard {
		s := sumOf(condVars[i])
		s.guard = append(s.guard, c)
	}
	for i, a := range t.atoms {
		s := sumOf(atomVars[i])
		s.atoms = append(s.atoms, a)
	}
	g.parts[t] = f
	return f
}

// indepSum sums one group of variables; live is false when no binding
// holds.
func (g *grounder) indepSum(s *indep, env map[string]int64) (v gval, live bool) {
	var vals []gval
	forEachBinding(s.vars, env, func(env map[string]int64) {
		g.dl.check("unrolling the sums")
		for _, c := range s.guard {
			if !holds(c, env) {
				return
			}
		}
		factors := make([]gval, len(s.atoms))
		for i, a := range s.atoms {
			factors[i] = g.atom(a, env)
		}
		vals = append(vals, g.product(big.NewRat(1, 1), factors))
	})
	return g.sum(vals), len(vals) > 0
}

// forEachBinding calls f with env extended by every value of the bound
// variables (an extent that is not positive gives no values). env is
// modified in place and restored: f must not keep it.
func forEachBinding(bound []bvar, env map[string]int64, f func(map[string]int64)) {
	if len(bound) == 0 {
		f(env)
		return
	}
	n := mustEval(bound[0].ext, env)
	for i := int64(0); i < n; i++ {
		env[bound[0].name] = i
		forEachBinding(bound[1:], env, f)
	}
	delete(env, bound[0].name)
}

// mustEval evaluates l with every name bound (a name left unbound is a
// bug of the encoding).
func mustEval(l lin, env map[string]int64) int64 {
	v, ok := l.eval(env)
	if !ok {
		panic(fmt.Sprintf("smt: %s has unbound names", l))
	}
	return v
}

func holds(c *cond, env map[string]int64) bool {
	v, ok := c.eval(env)
	if !ok {
		panic(fmt.Sprintf("smt: condition %s has unbound names", c))
	}
	return v
}

func (g *grounder) atom(a *atom, env map[string]int64) gval {
	switch a.kind {
	case aAccess:
		return gval{p: g.element(a, env)}
	case aNum:
		return gval{p: constGpoly(ratInt(mustEval(a.num, env)))}
	case aInf:
		if a.name == "inf" {
			return gval{inf: 1}
		}
		return gval{inf: -1}
	}
	key := g.memoKey(a, env)
	if v, ok := g.memo[key]; ok {
		return v
	}
	var v gval
	if a.kind == aRed {
		v = g.reduce(a, env)
	} else {
		args := make([]gval, len(a.args))
		for i, p := range a.args {
			args[i] = g.poly(p, env)
		}
		v = g.fn(a.name, args)
	}
	g.memo[key] = v
	return v
}

// memoKey is a's key with the values of the names it mentions that env
// binds (its own bound variables are not bound yet).
func (g *grounder) memoKey(a *atom, env map[string]int64) string {
	names, ok := g.free[a]
	if !ok {
		set := map[string]bool{}
		a.names(set)
		names = sortedNames(set)
		g.free[a] = names
	}
	var b strings.Builder
	b.WriteString(a.key)
	for _, n := range names {
		if v, ok := env[n]; ok {
			fmt.Fprintf(&b, "|%s=%d", n, v)
		}
	}
	return b.String()
}

func (g *grounder) element(a *atom, env map[string]int64) gpoly {
	shape := g.shapes[a.name]
	idx := make([]int, len(a.idx))
	for i, x := range a.idx {
		v := mustEval(x, env)
		if v < 0 || i >= len(shape) || v >= int64(shape[i]) {
			g.oob = fmt.Sprintf("%s read at index %d of dimension %d", a.name, v, i)
			return gpoly{}
		}
		idx[i] = int(v)
	}
	name := elementName(a.name, idx)
	return atomGpoly(g.intern("e:"+name, name, true, nil))
}

func (g *grounder) ite(c z3.Bool, a, b z3.Real) z3.Real { return c.IfThenElse(a, b).(z3.Real) }

// fn applies a function; max, min and abs follow IEEE on infinities, and
// isinf:-inf (isinf:inf) tells whether its argument is -inf (+inf).
func (g *grounder) fn(name string, args []gval) gval {
	if v, ok := ieeeInf(name, args); ok {
		return v
	}
	if sign, ok := map[string]int8{"isinf:-inf": -1, "isinf:inf": 1}[name]; ok {
		return gval{p: constGpoly(big.NewRat(int64(b2i(args[0].inf == sign)), 1))}
	}
	ps := make([]gpoly, len(args))
	for i, a := range args {
		ps[i] = g.finite(a, "function "+name)
	}
	return gval{p: g.apply(name, ps)}
}

// ieeeInf is max, min or abs with an infinite argument.
func ieeeInf(name string, args []gval) (gval, bool) {
	switch {
	case name == "abs" && args[0].inf != 0:
		return gval{inf: 1}, true
	case (name == "max" || name == "min") && len(args) == 2:
		absorbing := int8(1)
		if name == "min" {
			absorbing = -1
		}
		for i, a := range args {
			switch a.inf {
			case absorbing:
				return a, true
			case -absorbing:
				return args[1-i], true
			}
		}
	}
	return gval{}, false
}

// uninterpreted applies the uninterpreted function name of len(args)
// reals.
func (g *grounder) uninterpreted(name string, args []z3.Real) z3.Real {
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

// trunc rounds toward zero.
func (g *grounder) trunc(x z3.Real) z3.Real {
	floor := func(v z3.Real) z3.Real { return v.ToInt().ToReal() }
	return g.ite(x.GE(g.real(0)), floor(x), floor(x.Neg()).Neg())
}

// wrap reduces an integer to dtype t's range, two's complement, as the
// interpreter's WrapInt.
func (g *grounder) wrap(x z3.Real, t lang.DType) z3.Real {
	m := new(big.Int).Lsh(big.NewInt(1), uint(t.Bits()))
	shift := new(big.Int)
	if t.IsSigned() {
		shift.Rsh(m, 1)
	}
	mr := g.ctx.FromBigInt(m, g.ctx.RealSort()).(z3.Real)
	sr := g.ctx.FromBigInt(shift, g.ctx.RealSort()).(z3.Real)
	q := x.Add(sr).Div(mr).ToInt().ToReal()
	return x.Sub(q.Mul(mr))
}

// reduce unrolls a max, min or prod. Every element counts (a zero too);
// for max (min) an element that is -inf (+inf), the identity, changes
// nothing and the opposite infinity absorbs; an empty max is -inf.
func (g *grounder) reduce(a *atom, env map[string]int64) gval {
	identity := map[string]int8{"max": -1, "min": 1}[a.name]
	var elems []gpoly
	absorbed := int8(0)
	forEachBinding(a.bound, env, func(env map[string]int64) {
		g.dl.check("unrolling a " + a.name + " reduction")
		v := g.poly(a.args[0], env)
		switch {
		case a.name == "prod":
			elems = append(elems, g.finite(v, "a product reduction"))
		case absorbed != 0 || v.inf == identity:
		case v.inf != 0:
			absorbed = v.inf
		default:
			elems = append(elems, v.p)
		}
	})
	switch {
	case absorbed != 0:
		return gval{inf: absorbed}
	case a.name == "prod":
		out := constGpoly(big.NewRat(1, 1))
		for _, e := range elems {
			out = out.mul(e, g.dl)
		}
		return gval{p: out}
	case len(elems) == 0:
		return gval{inf: identity}
	}
	return gval{p: g.extremum(a.name, elems)}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
