package strategy

import (
	"fmt"

	"tofuc/analysis/interval"
	"tofuc/lang/ir"
)

// readRegions computes, for every tensor the instance reads (inputs and
// locals), the box a worker reads when the split variables range over
// their parts and every other variable over its whole extent. Locals are
// visited after everything that reads them, with their own variables
// restricted to the box read of them (and a split variable of a
// reduction in a local to its part).
func readRegions(inst *ir.Instance, splits map[*ir.Var]interval.Interval, f interval.Facts) (map[*ir.Tensor]*Region, error) {
	c := &collector{regions: map[*ir.Tensor]*Region{}, facts: f}
	env := interval.SetEnv{}
	for v, iv := range splits {
		env[v] = interval.Set{iv}
	}
	for _, d := range inst.Outputs {
		if err := c.collect(d.Body, env, false); err != nil {
			return nil, err
		}
	}
	for i := len(inst.Locals) - 1; i >= 0; i-- {
		d := inst.Locals[i]
		r, ok := c.regions[d.Tensor]
		if !ok {
			continue // no worker needs this local
		}
		local := interval.SetEnv{}
		for v, iv := range splits {
			local[v] = interval.Set{iv} // a split reduction of the local
		}
		for j, v := range d.Vars {
			local[v] = r.Bands[j]
		}
		if err := c.collect(d.Body, local, false); err != nil {
			return nil, err
		}
	}
	return c.regions, nil
}

// collector gathers the regions read.
type collector struct {
	regions map[*ir.Tensor]*Region
	facts   interval.Facts
}

// collect adds the boxes e reads to regions. Every access reads inside
// its tensor (or reads its else default), so clamping a box to the tensor
// is always sound; it is skipped where the checker proved the box inside
// already (affine indices outside select branches, without default), which
// keeps the symbolic regions free of min and max.
func (c *collector) collect(e ir.Expr, env interval.SetEnv, guarded bool) error {
	switch x := e.(type) {
	case *ir.Access:
		r, err := c.accessRegion(x.T, x.Index, env, x.Default != nil || guarded || !checked(x.Index))
		if err != nil {
			return fmt.Errorf("%s: reading %s: %w", x.Pos, x.T.Name, err)
		}
		c.add(r)
	case *ir.Opaque:
		for _, v := range x.Args {
			r, err := c.accessRegion(v.T, v.Index, env, true)
			if err != nil {
				return fmt.Errorf("%s: opaque %s of %s: %w", x.Pos, x.Fn, v.T.Name, err)
			}
			c.add(r)
		}
	case *ir.Select:
		if err := c.collect(x.C, env, guarded); err != nil {
			return err
		}
		if err := c.collect(x.A, env, true); err != nil {
			return err
		}
		return c.collect(x.B, env, true)
	}
	for _, ch := range ir.Children(e) {
		if err := c.collect(ch, env, guarded); err != nil {
			return err
		}
	}
	return nil
}

// accessRegion bounds the box of t read at index: a nil index (an opaque
// view's whole dimension) or a data-dependent one reads the whole
// dimension.
func (c *collector) accessRegion(t *ir.Tensor, index []ir.Expr, env interval.SetEnv, clamp bool) (Region, error) {
	r := Region{Tensor: t, Dims: make([]interval.Interval, len(index)), Bands: make([]interval.Set, len(index)),
		Whole: make([]bool, len(index))}
	for d, idx := range index {
		if idx == nil || dataDependent(idx) {
			r.Dims[d], r.Whole[d] = interval.Range(t.Shape[d]), true
			r.Bands[d] = interval.Set{r.Dims[d]}
			continue
		}
		set, err := interval.OfSet(idx, env, c.facts)
		if err != nil {
			return r, fmt.Errorf("index %d: %w", d, err)
		}
		if clamp {
			set = set.Clamp(t.Shape[d])
		}
		r.Bands[d], r.Dims[d] = set, set.Hull()
	}
	return r, nil
}

// checked reports whether the checker proved these indices in bounds:
// it does for affine ones.
func checked(index []ir.Expr) bool {
	for _, idx := range index {
		if !interval.Affine(idx) {
			return false
		}
	}
	return true
}

func dataDependent(e ir.Expr) bool {
	found := false
	ir.Walk(e, func(x ir.Expr) bool {
		switch x.(type) {
		case *ir.Access, *ir.Opaque:
			found = true
		}
		return !found
	})
	return found
}

// add merges r into the region already recorded for its tensor.
func (c *collector) add(r Region) {
	prev, ok := c.regions[r.Tensor]
	if !ok {
		c.regions[r.Tensor] = &r
		return
	}
	for d := range r.Dims {
		prev.Bands[d] = interval.Union(prev.Bands[d], r.Bands[d], c.facts)
		prev.Dims[d] = prev.Bands[d].Hull()
		prev.Whole[d] = prev.Whole[d] || r.Whole[d]
	}
}
