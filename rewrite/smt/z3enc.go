package smt

import (
	"github.com/aclements/go-z3/z3"
)

// enc turns integer expressions and conditions into Z3 terms; names are
// integer constants.
type enc struct {
	ctx  *z3.Context
	dl   *deadline
	ints map[string]z3.Int
}

func newEnc(ctx *z3.Context, dl *deadline) *enc {
	return &enc{ctx: ctx, dl: dl, ints: map[string]z3.Int{}}
}

func (e *enc) int(n int64) z3.Int { return e.ctx.FromInt(n, e.ctx.IntSort()).(z3.Int) }

func (e *enc) name(n string) z3.Int {
	if v, ok := e.ints[n]; ok {
		return v
	}
	v := e.ctx.IntConst(n)
	e.ints[n] = v
	return v
}

func (e *enc) lin(l lin) z3.Int {
	out := e.int(l.k)
	for _, t := range l.terms {
		out = out.Add(e.int(t.coef).Mul(e.iatom(t.a)))
	}
	return out
}

func (e *enc) iatom(a *iatom) z3.Int {
	switch a.kind {
	case iName:
		return e.name(a.name)
	case iFloorDiv:
		return e.lin(a.x).Div(e.int(a.c))
	case iTruncDiv:
		return e.truncDiv(e.lin(a.x), a.c)
	case iTruncMod:
		x := e.lin(a.x)
		return x.Sub(e.truncDiv(x, a.c).Mul(e.int(a.c)))
	case iMul:
		return e.lin(a.x).Mul(e.lin(a.y))
	case iTruncDivL, iTruncModL:
		x, y := e.lin(a.x), e.lin(a.y)
		q := x.GE(e.int(0)).IfThenElse(x.Div(y), x.Neg().Div(y).Neg()).(z3.Int)
		r := q
		if a.kind == iTruncModL {
			r = x.Sub(q.Mul(y))
		}
		return y.Eq(e.int(0)).IfThenElse(e.int(0), r).(z3.Int) // as the interpreter
	case iIte:
		return e.cond(a.cond).IfThenElse(e.int(1), e.int(0)).(z3.Int)
	}
	x, y := e.lin(a.x), e.lin(a.y)
	if a.kind == iMax {
		return x.GE(y).IfThenElse(x, y).(z3.Int)
	}
	return x.LE(y).IfThenElse(x, y).(z3.Int)
}

// truncDiv divides toward zero, as C and the interpreter do.
func (e *enc) truncDiv(x z3.Int, c int64) z3.Int {
	zero := e.int(0)
	return x.GE(zero).IfThenElse(x.Div(e.int(c)), x.Neg().Div(e.int(c)).Neg()).(z3.Int)
}

func (e *enc) cond(c *cond) z3.Bool {
	switch c.op {
	case cGE:
		return e.lin(c.x).GE(e.int(0))
	case cEQ:
		return e.lin(c.x).Eq(e.int(0))
	}
	args := make([]z3.Bool, len(c.args))
	for i, a := range c.args {
		args[i] = e.cond(a)
	}
	if c.op == cAnd {
		return args[0].And(args[1:]...)
	}
	return args[0].Or(args[1:]...)
}

func (e *enc) guard(g guard) z3.Bool {
	out := e.ctx.FromBool(true)
	for _, c := range g {
		out = out.And(e.cond(c))
	}
	return out
}

// valid reports whether premise implies concl for every value of the
// names; err is set when the solver gives up.
func (e *enc) valid(premise, concl z3.Bool) (bool, error) {
	s := z3.NewSolver(e.ctx)
	s.Assert(premise)
	s.Assert(concl.Not())
	sat, err := e.dl.solve(s, "a proof step")
	return !sat && err == nil, err
}
