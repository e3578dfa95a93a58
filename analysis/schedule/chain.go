package schedule

import "tofuc/lang/ir"

// ChainChunk is the number of rows each task of a chained launch
// computes (see Kernel.Before): a multiple of every host micro-kernel's
// tile sides (MR of at most 16 rows, panels of 32 columns).
const ChainChunk = 32

// maxChainCols bounds the columns of a chained producer's output: a task
// computes ChainChunk whole rows of it, which stay in its cache (64 KiB
// of f32 at 512 columns) until the consumer reads them.
const maxChainCols = 512

// chain pairs each kernel that reads, as the factor of a sum, whole rows
// of a value that one earlier reduction kernel leaves and nothing else
// reads (a linear layer's input computed by the linear layer before it),
// with that kernel: the pair runs as one launch whose tasks each compute
// a block of ChainChunk rows of the value and then the same rows of the
// consumer's output. The value makes no round trip through memory
// between two launches, and the launch is saved. The consumer reads the
// value only at its own leading variables and a sum's variable along the
// value's last dimension, so a task's rows of the value are all its rows
// need, and reads it through no opaque call (which runs on the host
// before the launch). There must be two blocks of rows at least (the
// chain splits rows only), each row of both outputs at most maxChainCols
// elements (a task computes whole rows: a wider consumer would pack all
// of its other factor for every block of rows), and a kernel is in one
// pair at most.
func (s *Schedule) chain() {
	for k, c := range s.Kernels {
		if p, rows := s.chainable(k); p >= 0 {
			c.Before, c.ChainRows = s.Kernels[p], rows
			s.Kernels[p].Chained = true
		}
	}
}

// chainable is the kernel that kernel k can chain after, and the number
// of leading variables they share, or -1.
func (s *Schedule) chainable(k int) (int, int) {
	c := s.Kernels[k]
	root := c.Root()
	if c.Precomputed || c.Chained || len(root.Inst.Locals) > 0 || len(root.Inst.Outputs) != 1 || c.Def != root.Inst.Outputs[0] {
		return -1, 0
	}
	for i, v := range root.Inputs {
		p, ok := s.KernelOfValue[v]
		if !ok || p >= k || s.Uses[v] != 1 {
			continue
		}
		pk := s.Kernels[p]
		if pk.Precomputed || pk.Chained || pk.Before != nil || pk.Out() != v || !holdsReduction(pk.Def.Body) {
			continue
		}
		if rows, ok := rowsRead(c.Def, root.Inst.Inputs[i], v); ok && ir.Extent(c.Def.Vars[:rows]) >= 2*ChainChunk && ir.Extent(c.Def.Vars[rows:]) <= maxChainCols {
			if holdsOpaque(c.Def.Body) { // walked last: most kernels fail sooner
				return -1, 0
			}
			return p, rows
		}
	}
	return -1, 0
}

// rowsRead says how many leading variables of out index every read of
// tensor t (holding value v): each read is t[o0, …, o(r-1), j], the
// output's first r variables and a sum's variable over v's last
// dimension of at most maxChainCols, with v's leading extents the
// output's.
func rowsRead(out *ir.Def, t *ir.Tensor, v *ir.Value) (int, bool) {
	r := len(v.Shape) - 1
	if r < 1 || r > len(out.Vars) { // a scalar read (rank 0) indexed v.Shape[-1]
		return 0, false
	}
	cols, known := v.Shape[r].IsConst()
	if !known || cols > maxChainCols {
		return 0, false
	}
	for i, d := range v.Shape[:r] {
		if !d.Equal(out.Vars[i].Extent) {
			return 0, false
		}
	}
	ok, reads := true, 0
	var walk func(e ir.Expr, summed map[*ir.Var]bool)
	walk = func(e ir.Expr, summed map[*ir.Var]bool) {
		ir.Walk(e, func(x ir.Expr) bool {
			switch x := x.(type) {
			case *ir.Reduce:
				inner := map[*ir.Var]bool{}
				for v := range summed {
					inner[v] = true
				}
				for _, v := range x.Vars {
					inner[v] = x.Kind == ir.Sum
				}
				walk(x.Body, inner)
				return false
			case *ir.Access:
				if x.T == t {
					reads++
					ok = ok && x.Default == nil && leadingRead(x.Index, out.Vars[:r], summed, cols)
				}
			}
			return ok
		})
	}
	walk(out.Body, map[*ir.Var]bool{})
	return r, ok && reads > 0
}

// leadingRead reports whether index is vars followed by a summed
// variable of extent cols.
func leadingRead(index []ir.Expr, vars []*ir.Var, summed map[*ir.Var]bool, cols int64) bool {
	if len(index) != len(vars)+1 {
		return false
	}
	for i, v := range vars {
		if r, ok := index[i].(*ir.VarRef); !ok || r.V != v {
			return false
		}
	}
	r, ok := index[len(vars)].(*ir.VarRef)
	if !ok || !summed[r.V] {
		return false
	}
	n, known := r.V.Extent.IsConst()
	return known && n == cols
}

// holdsOpaque reports whether e calls an opaque function.
func holdsOpaque(e ir.Expr) bool {
	found := false
	ir.Walk(e, func(x ir.Expr) bool {
		_, op := x.(*ir.Opaque)
		found = found || op
		return !found
	})
	return found
}
