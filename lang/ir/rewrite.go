package ir

// Map rebuilds e bottom-up: every node is copied with its children mapped,
// then passed to f, whose result replaces it. The original is not changed.
func Map(e Expr, f func(Expr) Expr) Expr { return MapUnless(e, nil, f) }

// MapUnless is Map that keeps every node for which skip (when not nil)
// reports true as it is, itself and what is below it: neither copied
// nor passed to f.
func MapUnless(e Expr, skip func(Expr) bool, f func(Expr) Expr) Expr {
	if e == nil {
		return nil
	}
	if skip != nil && skip(e) {
		return e
	}
	Map := func(x Expr, f func(Expr) Expr) Expr { return MapUnless(x, skip, f) }
	maps := func(xs []Expr) []Expr {
		out := make([]Expr, len(xs))
		for i, x := range xs {
			out[i] = Map(x, f)
		}
		return out
	}
	var c Expr
	switch e := e.(type) {
	case *Const:
		k := *e
		c = &k
	case *Size:
		c = &Size{D: e.D}
	case *VarRef:
		c = &VarRef{V: e.V}
	case *Access:
		c = &Access{Pos: e.Pos, T: e.T, Index: maps(e.Index), Default: Map(e.Default, f)}
	case *Binary:
		c = &Binary{Op: e.Op, L: Map(e.L, f), R: Map(e.R, f), T: e.T}
	case *Unary:
		c = &Unary{Op: e.Op, X: Map(e.X, f), T: e.T}
	case *Call:
		c = &Call{Fn: e.Fn, Args: maps(e.Args), T: e.T}
	case *Select:
		c = &Select{C: Map(e.C, f), A: Map(e.A, f), B: Map(e.B, f), T: e.T}
	case *Cast:
		c = &Cast{X: Map(e.X, f), T: e.T}
	case *Reduce:
		c = &Reduce{Kind: e.Kind, Vars: e.Vars, Body: Map(e.Body, f), T: e.T}
	case *Opaque:
		o := &Opaque{Pos: e.Pos, Fn: e.Fn, Shape: e.Shape, Index: maps(e.Index), T: e.T}
		for _, v := range e.Args {
			idx := make([]Expr, len(v.Index))
			for i, x := range v.Index {
				if x != nil {
					idx[i] = Map(x, f)
				}
			}
			o.Args = append(o.Args, &View{T: v.T, Index: idx})
		}
		c = o
	default:
		panic("ir.Map: unknown expression")
	}
	return f(c)
}

// CloneInstance copies an instance with tensors and variables of its own,
// so that two uses of one instance (the checker shares instances between
// nodes with the same operator, attributes and input types) can be told
// apart. Tensor i of the copy's Inputs corresponds to Inputs[i], and so
// on for Locals and Outputs.
func CloneInstance(in *Instance) *Instance {
	tensors := map[*Tensor]*Tensor{}
	vars := map[*Var]*Var{}
	tensor := func(t *Tensor) *Tensor {
		if c, ok := tensors[t]; ok {
			return c
		}
		c := *t
		tensors[t] = &c
		return &c
	}
	variable := func(v *Var) *Var {
		if c, ok := vars[v]; ok {
			return c
		}
		c := *v
		vars[v] = &c
		return &c
	}
	out := &Instance{Op: in.Op, Pos: in.Pos, Attrs: in.Attrs}
	for _, t := range in.Inputs {
		out.Inputs = append(out.Inputs, tensor(t))
	}
	body := func(e Expr) Expr {
		return Map(e, func(x Expr) Expr {
			switch x := x.(type) {
			case *Access:
				x.T = tensor(x.T)
			case *VarRef:
				x.V = variable(x.V)
			case *Reduce:
				vs := make([]*Var, len(x.Vars))
				for i, v := range x.Vars {
					vs[i] = variable(v)
				}
				x.Vars = vs
			case *Opaque:
				for _, v := range x.Args {
					v.T = tensor(v.T)
				}
			}
			return x
		})
	}
	def := func(d *Def) *Def {
		c := &Def{Pos: d.Pos, Tensor: tensor(d.Tensor), Body: body(d.Body)}
		for _, v := range d.Vars {
			c.Vars = append(c.Vars, variable(v))
		}
		return c
	}
	for _, d := range in.Locals {
		out.Locals = append(out.Locals, def(d))
	}
	for _, d := range in.Outputs {
		out.Outputs = append(out.Outputs, def(d))
	}
	return out
}
