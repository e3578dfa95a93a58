package batchdim

import (
	"fmt"
	"maps"
	"math"
	"slices"

	"tofuc/analysis/interval"
	"tofuc/lang"
	"tofuc/lang/ir"
)

// A chunk computes its samples at positions of its own, so a sample must
// be computed the same way at every position: translation invariance.
// Moving the sample one place moves every batch variable v by its factor
// (its extent is factor·batch). An index into a tensor's batch dimension
// must then move by that tensor's factor (it reads the next sample), an
// index into any other dimension not at all, and a value not at all.
// shift computes how an integer expression moves, where that is known.

// mentionsSymbol reports whether any shape, extent or value of inst
// mentions the batch symbol.
func (c *checker) mentionsSymbol(inst *ir.Instance) bool {
	for _, t := range inst.Inputs {
		if mentions(t.Shape, c.sym) {
			return true
		}
	}
	found := false
	for _, d := range slices.Concat(inst.Locals, inst.Outputs) {
		if mentions(d.Tensor.Shape, c.sym) {
			return true
		}
		ir.Walk(d.Body, func(e ir.Expr) bool {
			switch e := e.(type) {
			case *ir.Size:
				found = found || c.batchDim(e.D)
			case *ir.VarRef:
				found = found || c.batchDim(e.V.Extent)
			case *ir.Reduce:
				for _, v := range e.Vars {
					found = found || c.batchDim(v.Extent)
				}
			}
			return !found
		})
	}
	return found
}

func (c *checker) batchDim(d lang.Dim) bool { return slices.Contains(d.Symbols(), c.sym) }

// translationInvariant proves that every definition of inst computes a
// sample the same way at every position (see above); it refuses
// reductions over a batch variable.
func (c *checker) translationInvariant(inst *ir.Instance) error {
	c.inputs = map[*ir.Tensor]bool{}
	for _, t := range inst.Inputs {
		c.inputs[t] = true
	}
	for _, d := range slices.Concat(inst.Locals, inst.Outputs) {
		for i := range d.Tensor.Shape {
			if c.batchDim(d.Tensor.Shape[i]) {
				if _, err := c.factor(d.Tensor, i); err != nil {
					return err
				}
			}
		}
		env := interval.Env{}
		for _, v := range d.Vars {
			env[v] = interval.Range(v.Extent)
		}
		if err := c.value(d.Body, env); err != nil {
			return fmt.Errorf("%s: %w", d.Tensor.Name, err)
		}
	}
	return nil
}

// value checks an expression computing a value: it must not move with
// the sample (data read at the sample's place does not count), and every
// access in it must be translation invariant.
func (c *checker) value(e ir.Expr, env interval.Env) error {
	if s, ok := c.shift(e, env); ok && s == 0 {
		return c.accesses(e, env)
	}
	switch e := e.(type) {
	case *ir.VarRef:
		return fmt.Errorf("the batch index %s is used as a value", e.V.Name)
	case *ir.Size:
		return fmt.Errorf("the extent %s is used as a value", e.D)
	case *ir.Access, *ir.Opaque, *ir.Reduce:
		return c.accesses(e, env)
	}
	for _, x := range ir.Children(e) {
		if err := c.value(x, env); err != nil {
			return err
		}
	}
	return nil
}

// accesses checks the accesses of e and refuses its reductions over a
// batch variable.
func (c *checker) accesses(e ir.Expr, env interval.Env) error {
	switch e := e.(type) {
	case *ir.Access:
		return c.access(e.T, e.Index, e.Default, env)
	case *ir.Opaque:
		for _, v := range e.Args {
			if err := c.access(v.T, v.Index, nil, env); err != nil {
				return err
			}
		}
		for _, x := range e.Index {
			if s, ok := c.shift(x, env); !ok || s != 0 {
				return fmt.Errorf("an index of %s's result moves with the sample", e.Fn)
			}
		}
		return nil
	case *ir.Reduce:
		inner := maps.Clone(env)
		for _, v := range e.Vars {
			if c.batchDim(v.Extent) {
				return fmt.Errorf("it reduces over %s, of extent %s: a reduction over the batch", v.Name, v.Extent)
			}
			inner[v] = interval.Range(v.Extent)
		}
		return c.value(e.Body, inner)
	}
	for _, x := range ir.Children(e) {
		if err := c.accesses(x, env); err != nil {
			return err
		}
	}
	return nil
}

// access checks the index of one read of t (nil entries: a dimension
// passed whole): along t's batch dimension it moves by t's factor, along
// the others not at all; its default and its indices' reads are values.
// A local read with a default along its batch dimension is refused: the
// inputs' reads are proved within the sample (regions), a local's are
// not, and whether the default applies would depend on the chunk.
func (c *checker) access(t *ir.Tensor, index []ir.Expr, def ir.Expr, env interval.Env) error {
	for d, x := range index {
		if x == nil {
			continue
		}
		want := int64(0)
		if c.batchDim(t.Shape[d]) {
			f, err := c.factor(t, d)
			if err != nil {
				return err
			}
			if def != nil && !c.inputs[t] {
				return fmt.Errorf("%s is read with a default along its batch dimension %d, which would apply at a chunk's end", t.Name, d)
			}
			want = f
		}
		if s, ok := c.shift(x, env); !ok || s != want {
			return fmt.Errorf("the index of dimension %d of %s does not follow the sample (a sample would be computed differently at another place in the batch)", d, t.Name)
		}
		if err := c.accesses(x, env); err != nil {
			return err
		}
	}
	if def != nil {
		return c.value(def, env)
	}
	return nil
}

// factor is k where dimension d of t has the extent k·batch; another
// extent mentioning the batch (N/2, N·N, N + 1) is refused.
func (c *checker) factor(t *ir.Tensor, d int) (int64, error) {
	coefs, constant, ok := t.Shape[d].Linear()
	if !ok || constant != 0 || len(coefs) != 1 || coefs[c.sym] < 1 {
		return 0, fmt.Errorf("%s's dimension %d has the extent %s, not a multiple of %s", t.Name, d, t.Shape[d], c.sym)
	}
	return coefs[c.sym], nil
}

// shift is how much integer expression e moves when the sample moves
// one place, where that is known: a batch variable by its factor,
// sums and constant multiples as their terms, a division or remainder by
// a constant when the dividend is non-negative and moves by a multiple
// of it; data read (an access) does not move. A value mentioning the
// batch extent is unknown.
func (c *checker) shift(e ir.Expr, env interval.Env) (int64, bool) {
	switch e := e.(type) {
	case *ir.Const:
		return 0, true
	case *ir.VarRef:
		if !c.batchDim(e.V.Extent) {
			return 0, true
		}
		coefs, _, ok := e.V.Extent.Linear()
		return coefs[c.sym], ok
	case *ir.Size:
		return 0, !c.batchDim(e.D)
	case *ir.Access:
		return 0, true
	case *ir.Unary:
		s, ok := c.shift(e.X, env)
		if e.Op == "-" {
			return lang.MulInt64(s, -1)
		}
		return 0, ok && s == 0
	case *ir.Binary:
		return c.binaryShift(e, env)
	}
	for _, x := range ir.Children(e) {
		if s, ok := c.shift(x, env); !ok || s != 0 {
			return 0, false
		}
	}
	return 0, true
}

func (c *checker) binaryShift(e *ir.Binary, env interval.Env) (int64, bool) {
	l, okL := c.shift(e.L, env)
	r, okR := c.shift(e.R, env)
	if !okL || !okR {
		return 0, false
	}
	switch e.Op { // overflowing arithmetic is unknown
	case ir.OpAdd:
		return lang.AddInt64(l, r)
	case ir.OpSub:
		if r == math.MinInt64 {
			return 0, false
		}
		return lang.AddInt64(l, -r)
	case ir.OpMul:
		if k, ok := constInt(e.R); ok {
			return lang.MulInt64(l, k)
		}
		if k, ok := constInt(e.L); ok {
			return lang.MulInt64(r, k)
		}
	case ir.OpDiv, ir.OpMod:
		k, ok := constInt(e.R)
		if l == 0 && r == 0 {
			return 0, true
		}
		if !ok || k <= 0 || l%k != 0 || !e.T.IsInt() || !c.nonNegative(e.L, env) {
			return 0, false
		}
		if e.Op == ir.OpDiv {
			return l / k, true
		}
		return 0, true
	}
	return 0, l == 0 && r == 0
}

// constInt is e's value when it is an integer constant.
func constInt(e ir.Expr) (int64, bool) {
	if k, ok := e.(*ir.Const); ok && k.T.IsInt() {
		return k.Int, true
	}
	return 0, false
}

// nonNegative reports whether e is provably at least 0 over env.
func (c *checker) nonNegative(e ir.Expr, env interval.Env) bool {
	iv, err := interval.Of(e, env)
	return err == nil && !iv.Lo.Overflows() && !iv.Hi.Overflows() && iv.Lo.NonNegative()
}
