package ir

// Map rebuilds e bottom-up: every node is copied with its children mapped,
// then passed to f, whose result replaces it. The original is not changed.
func Map(e Expr, f func(Expr) Expr) Expr {
	if e == nil {
		return nil
	}
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
