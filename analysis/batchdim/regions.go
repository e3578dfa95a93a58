package batchdim

import (
	"fmt"
	"slices"

	"tofuc/analysis/interval"
	"tofuc/analysis/strategy"
	"tofuc/lang"
	"tofuc/lang/ir"
)

// sample is the symbol of the sample a worker computes in the symbolic
// proof of a region.
const sample = "batchdim.sample"

// regions proves that a worker computing one sample of n's outputs
// reads only that sample of every batch input, and of every other input
// a part that does not depend on the sample.
func (c *checker) regions(n *ir.Node, outs []Axis) error {
	a, err := strategy.Analyse(n.Inst)
	if err != nil {
		return fmt.Errorf("the interval analysis cannot bound its reads: %w", err)
	}
	s := splitAlong(a, outs)
	if s == nil {
		return fmt.Errorf("no partition strategy splits its outputs along their batch dimensions")
	}
	if len(s.Regions) != len(n.Inputs) {
		return fmt.Errorf("its instance has %d inputs, the node %d", len(s.Regions), len(n.Inputs))
	}
	lo, hi := s.PartSymbols()
	k := outs[0].Factor
	part := func(name string) (lang.Dim, bool) {
		switch name {
		case lo:
			return lang.Sym(sample).Scale(k), true
		case hi:
			return lang.Sym(sample).Scale(k).Add(lang.Const(k - 1)), true
		}
		return lang.Dim{}, false
	}
	for i, v := range n.Inputs {
		r := s.Regions[i]
		if r.Unread() {
			continue
		}
		var err error
		if in := c.axis(v); in == None {
			err = sameForEverySample(r, lo, hi)
		} else {
			err = c.withinSample(r, in, part)
		}
		if err != nil {
			return fmt.Errorf("input %s: %w", v.Name, err)
		}
	}
	return nil
}

// splitAlong is the strategy of a that splits every output along its
// batch axis.
func splitAlong(a *strategy.Analysis, outs []Axis) *strategy.Strategy {
	for _, s := range a.Strategies {
		if s.Kind == strategy.SplitOutput && slices.EqualFunc(s.Dims, outs, func(d int, o Axis) bool { return d == o.Dim }) {
			return s
		}
	}
	return nil
}

// sameForEverySample refuses a region of an input without a batch that
// moves with the sample (a table indexed by the batch index): a chunk
// would read the first chunk's rows.
func sameForEverySample(r strategy.Region, lo, hi string) error {
	for d, iv := range r.Dims {
		if r.Whole[d] {
			continue
		}
		syms := append(iv.Lo.Symbols(), iv.Hi.Symbols()...)
		if slices.Contains(syms, lo) || slices.Contains(syms, hi) {
			return fmt.Errorf("the part read of dimension %d, %s, depends on the sample", d, iv)
		}
	}
	return nil
}

// withinSample proves that the region of a batch input read for sample
// s lies in sample s's block of its batch axis: symbolically when the
// distances to the block's bounds are constants, else at every sample of
// every size.
func (c *checker) withinSample(r strategy.Region, in Axis, part func(string) (lang.Dim, bool)) error {
	if r.Whole[in.Dim] {
		return fmt.Errorf("it is read whole along its batch dimension %d for every sample", in.Dim)
	}
	iv := r.Dims[in.Dim].Subst(part)
	first := lang.Sym(sample).Scale(in.Factor)
	last := first.Add(lang.Const(in.Factor - 1))
	below, okLo := iv.Lo.Sub(first).IsConst()
	above, okHi := last.Sub(iv.Hi).IsConst()
	if okLo && okHi {
		if below < 0 || above < 0 {
			return fmt.Errorf("a sample reads rows %s of its batch dimension, outside its own %s", iv, interval.Interval{Lo: first, Hi: last})
		}
		return nil
	}
	return c.everySample(iv, in.Factor)
}

// everySample checks a region's bounds at every sample of every size.
func (c *checker) everySample(iv interval.Interval, factor int64) error {
	for _, size := range c.sizes {
		for s := range size {
			env := map[string]int64{c.sym: size, sample: s}
			lo, err := iv.Lo.Eval(env)
			if err != nil {
				return err
			}
			hi, err := iv.Hi.Eval(env)
			if err != nil {
				return err
			}
			if lo < factor*s || hi > factor*s+factor-1 {
				return fmt.Errorf("at %s = %d, sample %d reads rows [%d, %d] of its batch dimension, outside its own [%d, %d]", c.sym, size, s, lo, hi, factor*s, factor*s+factor-1)
			}
		}
	}
	return nil
}
