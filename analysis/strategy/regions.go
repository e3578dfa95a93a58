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
// restricted to the box read of them.
func readRegions(inst *ir.Instance, splits map[*ir.Var]interval.Interval) (map[*ir.Tensor]*Region, error) {
	regions := map[*ir.Tensor]*Region{}
	env := interval.Env{}
	for v, iv := range splits {
		env[v] = iv
	}
	for _, d := range inst.Outputs {
		if err := collect(d.Body, env, regions, false); err != nil {
			return nil, err
		}
	}
	for i := len(inst.Locals) - 1; i >= 0; i-- {
		d := inst.Locals[i]
		r, ok := regions[d.Tensor]
		if !ok {
			continue // no worker needs this local
		}
		local := interval.Env{}
		for j, v := range d.Vars {
			local[v] = r.Dims[j]
		}
		if err := collect(d.Body, local, regions, false); err != nil {
			return nil, err
		}
	}
	return regions, nil
}

// collect adds the boxes e reads to regions. Every access reads inside
// its tensor (or reads its else default), so clamping a box to the tensor
// is always sound; it is skipped where the checker proved the box inside
// already (affine indices outside select branches, without default), which
// keeps the symbolic regions free of min and max.
func collect(e ir.Expr, env interval.Env, regions map[*ir.Tensor]*Region, guarded bool) error {
	switch x := e.(type) {
	case *ir.Access:
		r, err := accessRegion(x.T, x.Index, env, x.Default != nil || guarded || !checked(x.Index))
		if err != nil {
			return fmt.Errorf("%s: reading %s: %v", x.Pos, x.T.Name, err)
		}
		add(regions, r)
	case *ir.Opaque:
		for _, v := range x.Args {
			r, err := accessRegion(v.T, v.Index, env, true)
			if err != nil {
				return fmt.Errorf("%s: opaque %s of %s: %v", x.Pos, x.Fn, v.T.Name, err)
			}
			add(regions, r)
		}
	case *ir.Select:
		if err := collect(x.C, env, regions, guarded); err != nil {
			return err
		}
		if err := collect(x.A, env, regions, true); err != nil {
			return err
		}
		return collect(x.B, env, regions, true)
	}
	for _, c := range ir.Children(e) {
		if err := collect(c, env, regions, guarded); err != nil {
			return err
		}
	}
	return nil
}

// accessRegion bounds the box of t read at index: a nil index (an opaque
// view's whole dimension) or a data-dependent one reads the whole
// dimension.
func accessRegion(t *ir.Tensor, index []ir.Expr, env interval.Env, clamp bool) (Region, error) {
	r := Region{Tensor: t, Dims: make([]interval.Interval, len(index)), Whole: make([]bool, len(index))}
	for d, idx := range index {
		if idx == nil || dataDependent(idx) {
			r.Dims[d], r.Whole[d] = interval.Range(t.Shape[d]), true
			continue
		}
		iv, err := interval.Of(idx, env)
		if err != nil {
			return r, fmt.Errorf("index %d: %v", d, err)
		}
		if clamp {
			iv = iv.Clamp(t.Shape[d])
		}
		r.Dims[d] = iv
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
func add(regions map[*ir.Tensor]*Region, r Region) {
	prev, ok := regions[r.Tensor]
	if !ok {
		regions[r.Tensor] = &r
		return
	}
	for d := range r.Dims {
		prev.Dims[d] = interval.Hull(prev.Dims[d], r.Dims[d])
		prev.Whole[d] = prev.Whole[d] || r.Whole[d]
	}
}
