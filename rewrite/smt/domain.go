package smt

import (
	"fmt"

	"github.com/aclements/go-z3/z3"

	"tofuc/lang"
	"tofuc/lang/ir"
)

// obligation is a condition under which one side fails in the
// interpreter: a tensor of some node with a negative extent (shape, a
// condition on the shape symbols alone), or a read outside a tensor
// without an `else` default. The interpreter evaluates every element of
// every node, so every node is checked, not only the elements the output
// reads.
type obligation struct {
	what  string
	fail  guard
	shape bool
}

// obligations lists the failure conditions of every node of g.
func (l *lowerer) obligations(g *ir.Graph) ([]obligation, error) {
	var out []obligation
	for _, n := range g.Nodes {
		for _, d := range append(append([]*ir.Def(nil), n.Inst.Locals...), n.Inst.Outputs...) {
			obls, err := l.defObligations(n, d)
			if err != nil {
				return nil, err
			}
			out = append(out, obls...)
		}
	}
	return out, nil
}

// defObligations lists where evaluating definition d of node n fails: an
// extent of d's tensor negative, or a read of its body out of range.
func (l *lowerer) defObligations(n *ir.Node, d *ir.Def) ([]obligation, error) {
	var out []obligation
	for _, dim := range d.Tensor.Shape {
		if nonNegative(dimLin(dim)) {
			continue
		}
		c, k := mkGE(dimLin(dim).scale(-1).add(linConst(-1)))
		if g, ok := (guard{}).with(c, k); ok {
			out = append(out, obligation{what: fmt.Sprintf("node %s: tensor %s has a negative extent", n.Name, d.Tensor.Name), fail: g, shape: true})
		}
	}
	w := &domainWalker{l: l, node: n, locals: map[string]bool{}}
	env := map[*ir.Var]lin{}
	var path guard
	for i, v := range d.Vars {
		x := linName(l.freshVar())
		x.names(w.locals)
		env[v] = x
		path = path.inRange(x, dimLin(d.Tensor.Shape[i]))
	}
	err := w.expr(d.Body, &frame{n, env}, path)
	return append(out, w.out...), err
}

// nonNegative reports whether l is at least 0 for all shape symbols at
// least 1, by its form: non-negative coefficients and constant over
// symbols, their products, maxima and quotients by positive constants.
func nonNegative(l lin) bool {
	if l.k < 0 {
		return false
	}
	for _, t := range l.terms {
		a := t.a
		switch {
		case t.coef < 0:
			return false
		case a.kind == iName:
		case a.kind == iMul || a.kind == iMax || a.kind == iMin:
			if !nonNegative(a.x) || !nonNegative(a.y) {
				return false
			}
		case a.kind == iFloorDiv || a.kind == iTruncDiv:
			if !nonNegative(a.x) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// inRange adds 0 <= x < ext (x is a variable, so neither folds).
func (g guard) inRange(x, ext lin) guard {
	lo, lk := mkGE(x)
	hi, hk := mkGE(ext.sub(x).add(linConst(-1)))
	g, _ = g.with(lo, lk)
	g, _ = g.with(hi, hk)
	return g
}

// domainWalker collects the reads of one definition that may leave their
// tensor, each under the conditions that lead to it: the ranges of the
// index variables, the index conditions of the selects around it (the
// interpreter evaluates only the branch taken, and the right operand of
// && and || only when the left does not decide).
type domainWalker struct {
	l      *lowerer
	node   *ir.Node
	locals map[string]bool // the index variables the walker made
	out    []obligation
}

func (w *domainWalker) expr(e ir.Expr, fr *frame, path guard) error {
	switch e := e.(type) {
	case *ir.Access:
		return w.access(e, fr, path)
	case *ir.Select:
		if indexPure(e.C) {
			return w.branches(e.C, fr, path, e.A, e.B)
		}
	case *ir.Binary:
		if (e.Op == ir.OpAnd || e.Op == ir.OpOr) && indexPure(e.L) {
			if e.Op == ir.OpAnd {
				return w.branches(e.L, fr, path, e.R, nil)
			}
			return w.branches(e.L, fr, path, nil, e.R)
		}
	case *ir.Reduce:
		env := make(map[*ir.Var]lin, len(fr.env)+len(e.Vars))
		for k, v := range fr.env {
			env[k] = v
		}
		for _, v := range e.Vars {
			x := linName(w.l.freshVar())
			env[v] = x
			x.names(w.locals)
			path = path.inRange(x, dimLin(v.Extent))
		}
		return w.expr(e.Body, &frame{fr.node, env}, path)
	}
	for _, c := range ir.Children(e) {
		if err := w.expr(c, fr, path); err != nil {
			return err
		}
	}
	return nil
}

// branches walks a where the index condition c holds and b where it does
// not (either may be nil).
func (w *domainWalker) branches(c ir.Expr, fr *frame, path guard, a, b ir.Expr) error {
	cc, ck, err := w.l.cond(fr, c)
	if err != nil {
		return err
	}
	nc, nk := negate(cc, ck)
	for _, br := range []struct {
		e ir.Expr
		c *cond
		k condConst
	}{{a, cc, ck}, {b, nc, nk}} {
		if br.e == nil {
			continue
		}
		if g, ok := path.with(br.c, br.k); ok {
			if err := w.expr(br.e, fr, g); err != nil {
				return err
			}
		}
	}
	return nil
}

func (w *domainWalker) access(e *ir.Access, fr *frame, path guard) error {
	idx := make([]lin, len(e.Index))
	for i, x := range e.Index {
		v, err := w.l.index(fr, x)
		if err != nil {
			return err
		}
		idx[i] = v
	}
	out, ok := path.with(negate(inBounds(e.T.Shape, idx, path)))
	switch {
	case !ok:
		return nil
	case e.Default != nil:
		return w.expr(e.Default, fr, out)
	}
	o := obligation{what: fmt.Sprintf("node %s reads %s outside its shape %s", w.node.Name, e.T.Name, lang.ShapeString(e.T.Shape)), fail: out}
	if g, ok := project(out, w.locals); ok {
		o.fail, o.shape = g, true
	}
	w.out = append(w.out, o)
	return nil
}

// project is the condition on the shape symbols alone under which g holds
// for some values of the local variables, when each local occurs only in
// its own range (0 <= v and v <= E - 1, E free of locals): then it is
// E >= 1 for each with g's other conditions (take<index = 3> reads
// x[a, 3], which fails exactly where 3 >= N). ok is false otherwise.
func project(g guard, locals map[string]bool) (guard, bool) {
	var out guard
	for _, c := range g {
		if !c.mentions(locals) {
			out, _ = out.with(c, condConst{})
			continue
		}
		if c.op != cGE || len(c.x.terms) == 0 {
			return nil, false
		}
		v := c.x.terms[0].a.name
		coef, rest, ok := split(c.x, v)
		switch {
		case !ok || !locals[v] || rest.mentions(locals):
			return nil, false
		case coef == 1 && len(rest.terms) == 0 && rest.k == 0: // v >= 0
		case coef == -1: // v <= rest: some v exists when rest >= 0
			cr, kr := mkGE(rest)
			var sat bool
			if out, sat = out.with(cr, kr); !sat {
				return nil, false
			}
		default:
			return nil, false
		}
	}
	return out, true
}

// witnessMax bounds the shape symbols of a first search for a shape where
// a side fails, so that the interpreter can run the witness.
const witnessMax = 8

// checkDomain compares where the sides fail in the interpreter: by their
// conditions on the shapes alone (a tensor of negative extent, a read
// projected to the shapes) they must fail at the same shapes, where the
// rule then says nothing, and no other read may leave its tensor where
// both run. A shape that breaks this is run in the interpreter: one side
// failing alone refutes the rule; otherwise the verdict is unknown. It
// sets v.defined, the shapes where both sides run.
func (v *verifier) checkDomain() *Result {
	base := v.shapeBase()
	var fail, reads [2]z3.Bool
	var shapeObls, readObls [2][]obligation
	for side, obls := range v.fails {
		for _, o := range obls {
			if o.shape {
				shapeObls[side] = append(shapeObls[side], o)
			} else {
				readObls[side] = append(readObls[side], o)
			}
		}
		fail[side] = v.anyFails(shapeObls[side])
		reads[side] = v.anyFails(readObls[side])
	}
	both := append(append([]obligation(nil), shapeObls[0]...), shapeObls[1]...)
	if len(both) > 0 {
		if res := v.witness(base.And(fail[0].Xor(fail[1])), both); res != nil {
			return res
		}
	}
	v.defined = base.And(fail[0].Not())
	for side := range reads {
		if len(readObls[side]) == 0 {
			continue
		}
		if res := v.witness(v.defined.And(reads[side]), readObls[side]); res != nil {
			return res
		}
	}
	return nil
}

func (v *verifier) anyFails(obls []obligation) z3.Bool {
	out := v.e.ctx.FromBool(false)
	for _, o := range obls {
		out = out.Or(v.e.guard(o.fail))
	}
	return out
}

// witness looks for shapes where cond holds (small ones when there are)
// and runs the sides there; nil when there are none.
func (v *verifier) witness(cond z3.Bool, obls []obligation) *Result {
	small := v.e.ctx.FromBool(true)
	for _, s := range v.syms {
		small = small.And(v.e.name(s).LE(v.e.int(witnessMax)))
	}
	var m *z3.Model
	for _, c := range []z3.Bool{cond, cond.And(small)} {
		s := z3.NewSolver(v.e.ctx)
		s.Assert(c)
		sat, err := v.dl.solve(s, "comparing where the sides fail")
		switch {
		case err != nil:
			return &Result{Status: Unknown, Reason: "the solver gave up comparing where the sides fail: " + err.Error()}
		case sat:
			m = s.Model()
		case m == nil:
			return nil
		}
	}
	env := v.modelShape(m)
	what := "a side fails"
	for _, o := range obls {
		if holds, _ := m.Eval(v.e.guard(o.fail), true).(z3.Bool).AsBool(); holds {
			what = o.what
			break
		}
	}
	if cex := v.confirmAt(env); cex != nil {
		return &Result{Status: Refuted, Cex: cex}
	}
	return &Result{Status: Unknown, Reason: fmt.Sprintf("%s at %s, and the interpreter does not show one side failing alone there", what, shapeString(env))}
}

// modelShape reads the shape symbols from a model.
func (v *verifier) modelShape(m *z3.Model) map[string]int64 {
	env := map[string]int64{}
	for _, s := range v.syms {
		n, _, _ := m.Eval(v.e.name(s), true).(z3.Int).AsInt64()
		env[s] = n
	}
	return env
}

// failsAt reports whether the left side fails at env by a condition on
// the shapes (where the right side fails too: checkDomain).
func (v *verifier) failsAt(env map[string]int64) bool {
	for _, o := range v.fails[0] {
		if !o.shape {
			continue
		}
		all := true
		for _, c := range o.fail {
			all = all && holds(c, env)
		}
		if all {
			return true
		}
	}
	return false
}
