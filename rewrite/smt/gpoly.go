package smt

import (
	"fmt"
	"math/big"
	"sort"
	"strconv"
	"strings"

	"github.com/aclements/go-z3/z3"

	"tofuc/lang"
)

// gpoly is a grounded value in canonical form: a polynomial with rational
// coefficients over interned atoms (input elements, function
// applications, n-ary max and min), by monomial key, without zero
// coefficients. Two output elements whose polynomials are identical are
// equal, so the bounded check sends Z3 only the differences that do not
// cancel in Go.
type gpoly map[string]*gmono

type gmono struct {
	coef  *big.Rat
	atoms []*gatom // sorted by id, repeated for powers
}

// gatom is an input element (elem), or a function, "max" or "min" of
// grounded arguments (max and min n-ary: flattened, without repeats, in
// key order, so that max(max(a, b), b) and max(b, a) are one atom).
type gatom struct {
	id   int
	key  string
	name string
	elem bool
	args []gpoly
}

func monoKey(atoms []*gatom) string {
	var b strings.Builder
	for i, a := range atoms {
		if i > 0 {
			b.WriteByte('*')
		}
		b.WriteString(strconv.Itoa(a.id))
	}
	return b.String()
}

func constGpoly(c *big.Rat) gpoly {
	if c.Sign() == 0 {
		return gpoly{}
	}
	return gpoly{"": {coef: c}}
}

func atomGpoly(a *gatom) gpoly {
	return gpoly{strconv.Itoa(a.id): {coef: big.NewRat(1, 1), atoms: []*gatom{a}}}
}

// constant reports whether p is a constant, and which.
func (p gpoly) constant() (*big.Rat, bool) {
	switch len(p) {
	case 0:
		return new(big.Rat), true
	case 1:
		if m, ok := p[""]; ok {
			return m.coef, true
		}
	}
	return nil, false
}

// single reports whether p is one atom with coefficient 1.
func (p gpoly) single() (*gatom, bool) {
	if len(p) != 1 {
		return nil, false
	}
	for _, m := range p {
		if len(m.atoms) == 1 && m.coef.Cmp(big.NewRat(1, 1)) == 0 {
			return m.atoms[0], true
		}
	}
	return nil, false
}

func (p gpoly) addMono(k string, coef *big.Rat, atoms []*gatom) {
	if m, ok := p[k]; ok {
		c := new(big.Rat).Add(m.coef, coef)
		if c.Sign() == 0 {
			delete(p, k)
			return
		}
		p[k] = &gmono{coef: c, atoms: m.atoms}
		return
	}
	if coef.Sign() != 0 {
		p[k] = &gmono{coef: coef, atoms: atoms}
	}
}

func (p gpoly) add(q gpoly) gpoly {
	out := make(gpoly, len(p)+len(q))
	for k, m := range p {
		out[k] = m
	}
	out.accumulate(q, nil)
	return out
}

// accumulate adds q to p in place (p must not be shared), checking dl as
// it goes.
func (p gpoly) accumulate(q gpoly, dl *deadline) {
	n := 0
	for k, m := range q {
		if n++; n%4096 == 0 {
			dl.check("adding unrolled terms")
		}
		p.addMono(k, m.coef, m.atoms)
	}
}

func (p gpoly) scale(c *big.Rat) gpoly {
	out := make(gpoly, len(p))
	for k, m := range p {
		out.addMono(k, new(big.Rat).Mul(m.coef, c), m.atoms)
	}
	return out
}

// maxMonomials bounds one product of the bounded check: beyond it the
// rule is left unknown rather than filling memory.
const maxMonomials = 1 << 20

// mul multiplies, checking dl as it goes.
func (p gpoly) mul(q gpoly, dl *deadline) gpoly {
	if c, ok := q.constant(); ok {
		return p.scale(c)
	}
	if c, ok := p.constant(); ok {
		return q.scale(c)
	}
	if len(p)*len(q) > maxMonomials {
		panic(notModelled{fmt.Sprintf("a product of %d by %d monomials when unrolled (the bounded check stops at %d)", len(p), len(q), maxMonomials)})
	}
	out := gpoly{}
	for _, a := range p {
		dl.check("multiplying unrolled terms")
		for _, b := range q {
			atoms := append(append(make([]*gatom, 0, len(a.atoms)+len(b.atoms)), a.atoms...), b.atoms...)
			sort.Slice(atoms, func(i, j int) bool { return atoms[i].id < atoms[j].id })
			out.addMono(monoKey(atoms), new(big.Rat).Mul(a.coef, b.coef), atoms)
		}
	}
	return out
}

// key is p's canonical text, for interning the atoms p is an argument of.
func (p gpoly) key() string {
	parts := make([]string, 0, len(p))
	for k, m := range p {
		parts = append(parts, m.coef.RatString()+"*"+k)
	}
	sort.Strings(parts)
	return strings.Join(parts, "+")
}

// intern returns the atom of key, making it with name, elem and args the
// first time.
func (g *grounder) intern(key, name string, elem bool, args []gpoly) *gatom {
	if a, ok := g.atoms[key]; ok {
		return a
	}
	a := &gatom{id: len(g.atoms), key: key, name: name, elem: elem, args: args}
	g.atoms[key] = a
	return a
}

// apply is function name of args, folded when the arguments are constants
// and the function is one the encoding evaluates.
func (g *grounder) apply(name string, args []gpoly) gpoly {
	if name == "max" || name == "min" {
		return g.extremum(name, args)
	}
	if v, ok := foldFn(name, args); ok {
		return constGpoly(v)
	}
	keys := make([]string, len(args))
	for i, a := range args {
		keys[i] = a.key()
	}
	return atomGpoly(g.intern(name+"("+strings.Join(keys, ";")+")", name, false, args))
}

// extremum is the n-ary max or min of args.
func (g *grounder) extremum(name string, args []gpoly) gpoly {
	byKey := map[string]gpoly{}
	var best *big.Rat
	allConst := true
	var flat func(p gpoly)
	flat = func(p gpoly) {
		if a, ok := p.single(); ok && a.name == name && !a.elem {
			for _, q := range a.args {
				flat(q)
			}
			return
		}
		c, ok := p.constant()
		allConst = allConst && ok
		if ok && (best == nil || (c.Cmp(best) > 0) == (name == "max")) {
			best = c
		}
		byKey[p.key()] = p
	}
	for _, p := range args {
		flat(p)
	}
	if allConst {
		return constGpoly(best)
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(keys) == 1 {
		return byKey[keys[0]]
	}
	flatArgs := make([]gpoly, len(keys))
	for i, k := range keys {
		flatArgs[i] = byKey[k]
	}
	return atomGpoly(g.intern(name+"{"+strings.Join(keys, ";")+"}", name, false, flatArgs))
}

// foldFn evaluates the comparisons, abs and the reciprocal of constants.
func foldFn(name string, args []gpoly) (*big.Rat, bool) {
	if len(args) != 1 {
		return nil, false
	}
	c, ok := args[0].constant()
	if !ok {
		return nil, false
	}
	b2r := func(b bool) *big.Rat {
		if b {
			return big.NewRat(1, 1)
		}
		return new(big.Rat)
	}
	switch name {
	case "pos":
		return b2r(c.Sign() > 0), true
	case "nneg":
		return b2r(c.Sign() >= 0), true
	case "zero":
		return b2r(c.Sign() == 0), true
	case "abs":
		return new(big.Rat).Abs(c), true
	case "recip":
		if c.Sign() != 0 {
			return new(big.Rat).Inv(c), true
		}
	case "sign":
		return big.NewRat(int64(c.Sign()), 1), true
	}
	return nil, false
}

// toZ3 translates p, each atom once.
func (g *grounder) toZ3(p gpoly) z3.Real {
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := g.real(0)
	for i, k := range keys {
		if i%1024 == 1023 {
			g.dl.check("building the solver's terms")
		}
		m := p[k]
		t := g.ctx.FromBigRat(m.coef)
		for _, a := range m.atoms {
			t = t.Mul(g.atomZ3(a))
		}
		out = out.Add(t)
	}
	return out
}

func (g *grounder) atomZ3(a *gatom) z3.Real {
	if r, ok := g.z3atoms[a.id]; ok {
		return r
	}
	var r z3.Real
	switch {
	case a.elem:
		r = g.ctx.RealConst(a.name)
		g.elems[a.name] = r
	case a.name == "max" || a.name == "min":
		r = g.atomArgZ3(a, 0)
		for i := range a.args[1:] {
			r = g.z3Fn(a.name, []z3.Real{r, g.atomArgZ3(a, i+1)})
		}
	default:
		args := make([]z3.Real, len(a.args))
		for i := range a.args {
			args[i] = g.atomArgZ3(a, i)
		}
		r = g.z3Fn(a.name, args)
	}
	g.z3atoms[a.id] = r
	return r
}

func (g *grounder) atomArgZ3(a *gatom, i int) z3.Real { return g.toZ3(a.args[i]) }

// z3Fn encodes a function of reals: max, min, abs, comparisons, the
// reciprocal and the integer conversions exactly, the others
// uninterpreted.
func (g *grounder) z3Fn(name string, args []z3.Real) z3.Real {
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
	case name == "sign":
		return g.ite(args[0].GT(zero), one, g.ite(args[0].LT(zero), one.Neg(), zero))
	case name == "floor":
		return args[0].ToInt().ToReal()
	case name == "ceil":
		return args[0].Neg().ToInt().ToReal().Neg()
	case strings.HasPrefix(name, "wrap:"):
		return g.wrap(args[0], lang.ParseDType(name[len("wrap:"):]))
	case strings.HasPrefix(name, "toint:"):
		return g.wrap(g.trunc(args[0]), lang.ParseDType(name[len("toint:"):]))
	}
	return g.uninterpreted(name, args)
}
