package autodiff

import (
	"fmt"
	"maps"
	"slices"
	"sort"

	"tofuc/analysis/interval"
	"tofuc/lang"
	"tofuc/lang/ir"
)

// Backward derives one backward operator per floating input of inst (in
// input order; inputs of other dtypes, indices and masks, get none). Each
// takes inst's inputs followed by the gradient of each floating output
// (named "d" + the output's name, made unique, same shape and dtype) and
// gives the gradient of its input (named "d" + the input's name). wrt[i]
// is the index in inst.Inputs of the input backward i differentiates. An
// instance without floating inputs has no backward operators.
func Backward(inst *ir.Instance) (backs []*ir.Instance, wrt []int, err error) {
	return BackwardSeeded(inst, nil)
}

// BackwardSeeded is Backward for the outputs seeded marks (by output
// index; nil: every floating output): the others are taken to have a zero
// gradient and get no input, so what does not depend on the seeded outputs
// derives to the constant 0 (a training graph's outputs off the loss path).
func BackwardSeeded(inst *ir.Instance, seeded []bool) (backs []*ir.Instance, wrt []int, err error) {
	for i, in := range inst.Inputs {
		if !in.DType.IsFloat() {
			continue
		}
		b, err := backwardFor(inst, i, seeded)
		if err != nil {
			return nil, nil, err
		}
		backs = append(backs, b)
		wrt = append(wrt, i)
	}
	return backs, wrt, nil // none: no floating input
}

// backwardFor derives the gradient of input j.
func backwardFor(inst *ir.Instance, j int, seeded []bool) (*ir.Instance, error) {
	b := &ir.Instance{Op: inst.Op + ".grad_" + inst.Inputs[j].Name, Pos: inst.Pos, Attrs: inst.Attrs}
	b.Inputs = append(b.Inputs, inst.Inputs...)
	taken := namesOf(inst)
	seeds := map[*ir.Tensor]*ir.Tensor{} // a tensor of inst -> its gradient
	for k, o := range inst.Outputs {
		if !o.Tensor.DType.IsFloat() || seeded != nil && !seeded[k] {
			continue
		}
		g := &ir.Tensor{Name: taken.fresh("d" + o.Tensor.Name), DType: o.Tensor.DType, Shape: o.Tensor.Shape}
		b.Inputs = append(b.Inputs, g)
		seeds[o.Tensor] = g
	}
	b.Locals = append(b.Locals, inst.Locals...) // the forward values, recomputed

	wrt := map[*ir.Tensor]bool{}
	for _, in := range inst.Inputs {
		wrt[in] = in.DType.IsFloat()
	}
	for _, l := range inst.Locals {
		wrt[l.Tensor] = l.Tensor.DType.IsFloat()
	}
	contribs := map[*ir.Tensor][]scatter{}
	collect := func(def *ir.Def, seed *ir.Tensor) error {
		d := &diff{wrt: wrt}
		ref := make([]ir.Expr, len(def.Vars))
		for i, v := range def.Vars {
			ref[i] = &ir.VarRef{V: v}
		}
		d.grad(def.Body, &ir.Access{Pos: def.Pos, T: seed, Index: ref})
		if d.err != nil {
			return fmt.Errorf("%s: %w", def.Pos, d.err)
		}
		h := &hoister{def: def, local: slices.Contains(inst.Locals, def), into: b, names: taken, reads: map[*ir.Reduce]ir.Expr{}}
		for _, t := range d.terms {
			t.coef = h.hoist(t.coef)
			contribs[t.read.T] = append(contribs[t.read.T], scatter{term: t, def: def})
		}
		return nil
	}
	for _, o := range inst.Outputs {
		if g := seeds[o.Tensor]; g != nil {
			if err := collect(o, g); err != nil {
				return nil, err
			}
		}
	}
	for i := len(inst.Locals) - 1; i >= 0; i-- {
		l := inst.Locals[i]
		cs := contribs[l.Tensor]
		if len(cs) == 0 || !l.Tensor.DType.IsFloat() {
			continue
		}
		g := &ir.Tensor{Name: taken.fresh("d" + l.Tensor.Name), DType: l.Tensor.DType, Shape: l.Tensor.Shape}
		b.Locals = append(b.Locals, gradDef(g, cs))
		if err := collect(l, g); err != nil {
			return nil, err
		}
	}
	in := inst.Inputs[j]
	g := &ir.Tensor{Name: taken.fresh("d" + in.Name), DType: in.DType, Shape: in.Shape}
	b.Outputs = []*ir.Def{gradDef(g, contribs[in])}
	b.Locals = neededLocals(b)
	return b, nil
}

// hoister makes the reductions that the gradient terms of one Def
// recompute, and that take the same value at every element of the
// reductions around them (their free variables are the Def's), reads of
// locals over the Def's variables: of the Def itself where it is a local
// whose body is that reduction (or any expression a derivative names:
// rsqrt's names the call), else of a new local of b's. Inline, a
// coefficient recomputed them at every element it was summed over:
// softmax_cross_entropy's gradient recomputed a row's sum of
// exponentials at every class, the attention weights' gradient its
// maximum over the keys at every key (seconds a step). The values are
// the same, computed alike.
type hoister struct {
	def   *ir.Def
	local bool // def is a local of the forward operator: the gradient reads it
	into  *ir.Instance
	names names
	reads map[*ir.Reduce]ir.Expr // the read replacing each reduction met
}

// hoist is e with the Def's body, where the Def is a local, and its
// outermost reductions that depend on no variable but the Def's
// replaced by reads of locals.
func (h *hoister) hoist(e ir.Expr) ir.Expr {
	replace := map[ir.Expr]ir.Expr{}
	h.find(e, false, replace)
	if len(replace) == 0 {
		return e
	}
	return cloneReplacing(e, map[*ir.Var]*ir.Var{}, replace)
}

// find adds to replace the read of a local for each expression of e that
// hoist replaces. guarded says that e is evaluated under a condition (a
// select's branch, an access's default, the right of && or ||): a
// reduction there is hoisted only where its reads are in range at every
// element of the local (inBounds), which computes it unconditionally.
func (h *hoister) find(e ir.Expr, guarded bool, replace map[ir.Expr]ir.Expr) {
	if h.local && e == h.def.Body {
		replace[e] = h.self() // the derivative of a call names the call: rsqrt's
		return
	}
	if r, ok := e.(*ir.Reduce); ok && h.invariant(r) && (!guarded || inBounds(r, h.def.Vars)) {
		replace[r] = h.read(r)
		return
	}
	switch x := e.(type) {
	case *ir.Select:
		h.find(x.C, guarded, replace)
		h.find(x.A, true, replace)
		h.find(x.B, true, replace)
		return
	case *ir.Access:
		for _, ix := range x.Index {
			h.find(ix, guarded, replace)
		}
		if x.Default != nil {
			h.find(x.Default, true, replace)
		}
		return
	case *ir.Binary:
		if x.Op == ir.OpAnd || x.Op == ir.OpOr {
			h.find(x.L, guarded, replace)
			h.find(x.R, true, replace)
			return
		}
	}
	for _, c := range ir.Children(e) {
		h.find(c, guarded, replace)
	}
}

// inBounds says whether every read of r without a default is in range
// for every value of vars and of r's variables, as the interval analysis
// proves it (an index computed from data is not).
func inBounds(r *ir.Reduce, vars []*ir.Var) bool {
	env := interval.Env{}
	for _, v := range vars {
		env[v] = interval.Range(v.Extent)
	}
	ok := true
	ir.Walk(r, func(x ir.Expr) bool {
		switch x := x.(type) {
		case *ir.Reduce:
			for _, v := range x.Vars {
				env[v] = interval.Range(v.Extent)
			}
		case *ir.Opaque:
			ok = false
		case *ir.Access:
			for d, ix := range x.Index {
				ok = ok && (x.Default != nil || inRange(ix, x.T.Shape[d], env))
			}
		}
		return ok
	})
	return ok
}

// invariant says whether r reads no variable but the Def's.
func (h *hoister) invariant(r *ir.Reduce) bool {
	for v := range freeVars(r) {
		if !slices.Contains(h.def.Vars, v) {
			return false
		}
	}
	return true
}

// self is the read of the Def at its own variables.
func (h *hoister) self() ir.Expr {
	return &ir.Access{Pos: h.def.Pos, T: h.def.Tensor, Index: h.here()}
}

// here is the Def's variables, as an index.
func (h *hoister) here() []ir.Expr {
	here := make([]ir.Expr, len(h.def.Vars))
	for i, v := range h.def.Vars {
		here[i] = &ir.VarRef{V: v}
	}
	return here
}

// read is the read of a new local holding r at the Def's variables
// (the same one for every read of r).
func (h *hoister) read(r *ir.Reduce) ir.Expr {
	if read, ok := h.reads[r]; ok {
		return read
	}
	here := h.here()
	scope := map[*ir.Var]*ir.Var{} // the local's variables are its own
	vars := make([]*ir.Var, len(h.def.Vars))
	for i, v := range h.def.Vars {
		vars[i] = &ir.Var{Name: v.Name, Extent: v.Extent}
		scope[v] = vars[i]
	}
	inner := &ir.Reduce{Kind: r.Kind, Vars: r.Vars, Body: h.hoist(r.Body), T: r.T}
	t := &ir.Tensor{Name: h.names.fresh(h.def.Tensor.Name + "_part"), DType: r.T, Shape: shapeOf(vars)}
	h.into.Locals = append(h.into.Locals, &ir.Def{Pos: h.def.Pos, Tensor: t, Vars: vars, Body: clone(inner, scope)})
	h.reads[r] = &ir.Access{Pos: h.def.Pos, T: t, Index: here}
	return h.reads[r]
}

// freeVars are the variables e reads that no reduction in it binds.
func freeVars(e ir.Expr) map[*ir.Var]bool {
	free := map[*ir.Var]bool{}
	var walk func(e ir.Expr, bound map[*ir.Var]bool)
	walk = func(e ir.Expr, bound map[*ir.Var]bool) {
		switch x := e.(type) {
		case *ir.VarRef:
			if !bound[x.V] {
				free[x.V] = true
			}
			return
		case *ir.Reduce:
			inner := maps.Clone(bound)
			for _, v := range x.Vars {
				inner[v] = true
			}
			walk(x.Body, inner)
			return
		case *ir.Opaque:
			for _, v := range x.Args {
				for _, ix := range v.Index {
					if ix != nil {
						walk(ix, bound)
					}
				}
			}
		}
		for _, c := range ir.Children(e) {
			walk(c, bound)
		}
	}
	walk(e, map[*ir.Var]bool{})
	return free
}

// shapeOf is the extents of vars.
func shapeOf(vars []*ir.Var) []lang.Dim {
	shape := make([]lang.Dim, len(vars))
	for i, v := range vars {
		shape[i] = v.Extent
	}
	return shape
}

// neededLocals is b's locals that its output reads, directly or through
// other locals: the gradient of one input does not need every forward
// local, nor the gradients of locals it does not depend on.
func neededLocals(b *ir.Instance) []*ir.Def {
	need := map[*ir.Tensor]bool{}
	mark := func(e ir.Expr) {
		ir.Walk(e, func(x ir.Expr) bool {
			switch x := x.(type) {
			case *ir.Access:
				need[x.T] = true
			case *ir.Opaque:
				for _, a := range x.Args {
					need[a.T] = true
				}
			}
			return true
		})
	}
	for _, o := range b.Outputs {
		mark(o.Body)
	}
	for i := len(b.Locals) - 1; i >= 0; i-- { // a local reads only those before it
		if need[b.Locals[i].Tensor] {
			mark(b.Locals[i].Body)
		}
	}
	var kept []*ir.Def
	for _, l := range b.Locals {
		if need[l.Tensor] {
			kept = append(kept, l)
		}
	}
	return kept
}

// names are the tensor names of a backward operator taken: its forward
// operator's and those handed out (fresh).
type names map[string]bool

// namesOf is the names of inst's tensors.
func namesOf(inst *ir.Instance) names {
	taken := names{}
	for _, t := range inst.Inputs {
		taken[t.Name] = true
	}
	for _, d := range append(append([]*ir.Def(nil), inst.Locals...), inst.Outputs...) {
		taken[d.Tensor.Name] = true
	}
	return taken
}

// fresh is name, made unique by underscores, and now taken.
func (n names) fresh(name string) string {
	for n[name] {
		name += "_"
	}
	n[name] = true
	return name
}

// scatter is a term and the Def whose body it came from.
type scatter struct {
	term
	def *ir.Def
}

// gradDef builds g[u...] = the sum of every term's coefficient over the
// values of its variables for which the read's index equals u.
func gradDef(g *ir.Tensor, cs []scatter) *ir.Def {
	def := &ir.Def{Tensor: g}
	for d, n := range g.Shape {
		def.Vars = append(def.Vars, &ir.Var{Name: fmt.Sprintf("u%d", d), Extent: n})
	}
	var body ir.Expr = fconst(g.DType, 0)
	for _, c := range cs {
		body = bin(ir.OpAdd, body, invert(def.Vars, c))
	}
	def.Body = body
	return def
}

// invert turns one term into an expression over the gradient's variables
// u: each index dimension idx_d(vars) = u_d is solved for a variable of
// coefficient ±1 where it can be (the largest extent first, so that what
// stays a reduction is small), with a guard that the solution lies in the
// variable's range; dimensions that cannot be solved become equality
// guards; the variables left unsolved are summed over.
func invert(u []*ir.Var, c scatter) ir.Expr {
	vars := append(append([]*ir.Var(nil), c.def.Vars...), c.reduce...)
	solved, handled := solveRavel(u, c.read.Index) // a reshape's part, solved whole
	if solved == nil {
		solved = map[*ir.Var]ir.Expr{}
	}
	var guards []ir.Expr
	index := c.read.Index
	for d, idx := range index {
		if handled[d] {
			continue
		}
		idx = substitute(idx, solved)
		ud := ir.Expr(&ir.VarRef{V: u[d]})
		coefs, ok := linear(idx)
		var pick *ir.Var
		if ok {
			for _, v := range byExtent(vars) {
				if k := coefs[v]; (k == 1 || k == -1) && solved[v] == nil {
					pick = v
					break
				}
			}
		}
		if pick == nil {
			if !trivialEquality(idx, u[d]) {
				guards = append(guards, cmp(ir.OpEq, idx, ud))
			}
			continue
		}
		// idx = k*pick + rest  =>  pick = k*(u - rest), as k = ±1; rest is
		// idx with pick set to 0, since idx is linear in it.
		rest := foldIndex(substitute(idx, map[*ir.Var]ir.Expr{pick: ir.IndexConst(0)}))
		sol := ir.IndexAdd(ud, ir.IndexMul(rest, -1))
		if coefs[pick] == -1 {
			sol = ir.IndexMul(sol, -1)
		}
		for v, e := range solved {
			solved[v] = substitute(e, map[*ir.Var]ir.Expr{pick: sol})
		}
		solved[pick] = sol
	}
	env := interval.Env{}
	for _, v := range u {
		env[v] = interval.Range(v.Extent)
	}
	var free []*ir.Var
	for _, v := range vars {
		if sol, ok := solved[v]; ok {
			if !inRange(sol, v.Extent, env) {
				guards = append(guards, cmp(ir.OpAnd, cmp(ir.OpGe, sol, ir.IndexConst(0)), cmp(ir.OpLt, sol, ir.IndexDim(v.Extent))))
			}
			continue
		}
		free = append(free, v)
	}
	for i, gd := range guards {
		guards[i] = substitute(gd, solved)
	}
	// Reductions recomputed inside the coefficient bind their own
	// variables: rename them first, so that substituting a solved variable
	// only touches the coefficient's free references to it.
	e := substitute(freshen(c.coef), solved)
	if len(guards) > 0 {
		cond := guards[0]
		for _, gd := range guards[1:] {
			cond = cmp(ir.OpAnd, cond, gd)
		}
		e = sel(cond, e, fconst(e.Type(), 0))
	}
	if len(free) > 0 {
		e = &ir.Reduce{Kind: ir.Sum, Vars: free, Body: e, T: e.Type()}
	}
	return freshen(e)
}

// foldIndex folds constants in an index expression bottom-up.
func foldIndex(e ir.Expr) ir.Expr {
	return ir.Map(e, func(x ir.Expr) ir.Expr {
		b, ok := x.(*ir.Binary)
		if !ok || b.T != lang.I64 {
			return x
		}
		switch b.Op {
		case ir.OpAdd:
			return ir.IndexAdd(b.L, b.R)
		case ir.OpSub:
			return ir.IndexAdd(b.L, ir.IndexMul(b.R, -1))
		case ir.OpMul:
			if k, ok := ir.ConstInt(b.R); ok {
				return ir.IndexMul(b.L, k)
			}
			if k, ok := ir.ConstInt(b.L); ok {
				return ir.IndexMul(b.R, k)
			}
		}
		return x
	})
}

// byExtent orders variables by decreasing constant extent (symbolic
// extents first), keeping the order otherwise.
func byExtent(vars []*ir.Var) []*ir.Var {
	out := append([]*ir.Var(nil), vars...)
	sort.SliceStable(out, func(i, j int) bool {
		a, aok := out[i].Extent.IsConst()
		b, bok := out[j].Extent.IsConst()
		if aok != bok {
			return !aok
		}
		return aok && a > b
	})
	return out
}

// linear decomposes an index expression into integer coefficients of its
// variables (plus a part without variables); ok is false when a variable
// occurs non-linearly.
func linear(e ir.Expr) (map[*ir.Var]int64, bool) {
	switch x := e.(type) {
	case *ir.Const, *ir.Size:
		return map[*ir.Var]int64{}, true
	case *ir.VarRef:
		return map[*ir.Var]int64{x.V: 1}, true
	case *ir.Unary:
		c, ok := linear(x.X)
		return scaleCoefs(c, -1), ok && x.Op == "-"
	case *ir.Binary:
		l, lok := linear(x.L)
		r, rok := linear(x.R)
		if !lok || !rok {
			return nil, false
		}
		switch x.Op {
		case ir.OpAdd:
			return addCoefs(l, r, 1), true
		case ir.OpSub:
			return addCoefs(l, r, -1), true
		case ir.OpMul:
			if k, ok := ir.ConstInt(x.R); ok {
				return scaleCoefs(l, k), true
			}
			if k, ok := ir.ConstInt(x.L); ok {
				return scaleCoefs(r, k), true
			}
		}
	}
	return nil, noVars(e)
}

func noVars(e ir.Expr) bool {
	found := false
	ir.Walk(e, func(x ir.Expr) bool {
		if _, ok := x.(*ir.VarRef); ok {
			found = true
		}
		return !found
	})
	return !found
}

func scaleCoefs(c map[*ir.Var]int64, k int64) map[*ir.Var]int64 {
	out := map[*ir.Var]int64{}
	for v, n := range c {
		out[v] = n * k
	}
	return out
}

func addCoefs(a, b map[*ir.Var]int64, sign int64) map[*ir.Var]int64 {
	out := scaleCoefs(a, 1)
	for v, n := range b {
		out[v] += sign * n
	}
	return out
}

// trivialEquality reports an index that always equals u: the constant 0 on
// a dimension of extent 1 (a broadcast read).
func trivialEquality(idx ir.Expr, u *ir.Var) bool {
	k, ok := ir.ConstInt(idx)
	n, one := u.Extent.IsConst()
	return ok && k == 0 && one && n == 1
}

// inRange reports whether e provably lies in [0, extent) as the gradient's
// variables range over their extents.
func inRange(e ir.Expr, extent lang.Dim, env interval.Env) bool {
	if !noOtherVars(e, env) {
		return false
	}
	iv, err := interval.Of(e, env)
	return err == nil && iv.Lo.NonNegative() && extent.Sub(lang.Const(1)).Sub(iv.Hi).NonNegative()
}

func noOtherVars(e ir.Expr, env interval.Env) bool {
	ok := true
	ir.Walk(e, func(x ir.Expr) bool {
		if r, isRef := x.(*ir.VarRef); isRef {
			if _, known := env[r.V]; !known {
				ok = false
			}
		}
		return ok
	})
	return ok
}

// substitute replaces variables by expressions.
func substitute(e ir.Expr, sub map[*ir.Var]ir.Expr) ir.Expr {
	if len(sub) == 0 {
		return e
	}
	return ir.Map(e, func(x ir.Expr) ir.Expr {
		if r, ok := x.(*ir.VarRef); ok {
			if s, ok := sub[r.V]; ok {
				return s
			}
		}
		return x
	})
}

// freshen gives every reduction in e new variables, scope by scope, so
// that a forward reduction recomputed inside a gradient (the maximum a max
// reduction selects) does not share variables with a reduction around it.
func freshen(e ir.Expr) ir.Expr { return clone(e, map[*ir.Var]*ir.Var{}) }

// clone copies e, its free variables renamed by scope and every
// reduction's variables fresh.
func clone(e ir.Expr, scope map[*ir.Var]*ir.Var) ir.Expr { return cloneReplacing(e, scope, nil) }

// cloneReplacing is clone with the nodes of e in replace replaced (as
// they are, not copied).
func cloneReplacing(e ir.Expr, scope map[*ir.Var]*ir.Var, replace map[ir.Expr]ir.Expr) ir.Expr {
	if e == nil {
		return nil
	}
	if r, ok := replace[e]; ok {
		return r
	}
	clone := func(e ir.Expr, scope map[*ir.Var]*ir.Var) ir.Expr { return cloneReplacing(e, scope, replace) }
	list := func(xs []ir.Expr) []ir.Expr {
		out := make([]ir.Expr, len(xs))
		for i, x := range xs {
			out[i] = clone(x, scope)
		}
		return out
	}
	switch x := e.(type) {
	case *ir.VarRef:
		if nv, ok := scope[x.V]; ok {
			return &ir.VarRef{V: nv}
		}
		return x
	case *ir.Reduce:
		inner := make(map[*ir.Var]*ir.Var, len(scope)+len(x.Vars))
		for k, v := range scope {
			inner[k] = v
		}
		vars := make([]*ir.Var, len(x.Vars))
		for i, v := range x.Vars {
			vars[i] = &ir.Var{Name: v.Name, Extent: v.Extent}
			inner[v] = vars[i]
		}
		return &ir.Reduce{Kind: x.Kind, Vars: vars, Body: clone(x.Body, inner), T: x.T}
	case *ir.Access:
		return &ir.Access{Pos: x.Pos, T: x.T, Index: list(x.Index), Default: clone(x.Default, scope)}
	case *ir.Binary:
		return &ir.Binary{Op: x.Op, L: clone(x.L, scope), R: clone(x.R, scope), T: x.T}
	case *ir.Unary:
		return &ir.Unary{Op: x.Op, X: clone(x.X, scope), T: x.T}
	case *ir.Call:
		return &ir.Call{Fn: x.Fn, Args: list(x.Args), T: x.T}
	case *ir.Select:
		return &ir.Select{C: clone(x.C, scope), A: clone(x.A, scope), B: clone(x.B, scope), T: x.T}
	case *ir.Cast:
		return &ir.Cast{X: clone(x.X, scope), T: x.T}
	case *ir.Opaque:
		o := &ir.Opaque{Pos: x.Pos, Fn: x.Fn, Shape: x.Shape, Index: list(x.Index), T: x.T}
		for _, v := range x.Args {
			idx := make([]ir.Expr, len(v.Index))
			for i, ix := range v.Index {
				idx[i] = clone(ix, scope)
			}
			o.Args = append(o.Args, &ir.View{T: v.T, Index: idx})
		}
		return o
	}
	return e // constants and sizes are immutable
}
