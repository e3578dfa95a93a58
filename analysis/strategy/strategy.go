package strategy

import (
	"fmt"

	"tofuc/analysis/interval"
	"tofuc/lang"
	"tofuc/lang/ir"
)

// Kind is the form of a partition-n-reduce strategy.
type Kind uint8

const (
	// SplitOutput splits an output dimension; the output is the
	// concatenation of the workers' parts.
	SplitOutput Kind = iota
	// SplitReduction splits a reduction variable; the output is the
	// combination of the workers' partial outputs with the reducer.
	SplitReduction
)

func (k Kind) String() string { return [...]string{"split", "reduce"}[k] }

// Strategy is one way to partition an operator. A worker's part of the
// split variable is [Var.lo, Var.hi] (the symbols PartSymbols names); the
// regions and the work are symbolic in them.
type Strategy struct {
	Kind    Kind
	Var     *ir.Var    // the split variable (of the first output, for SplitOutput)
	Dim     int        // the output dimension (SplitOutput)
	Reducer ir.Reducer // how partial outputs combine (SplitReduction)
	// Regions holds, per instance input, the part of it a worker reads.
	Regions []Region
	// FLOPs is a worker's work, symbolic in the part symbols.
	FLOPs lang.Dim

	vars   []*ir.Var                     // the split variable in each output (SplitOutput)
	locals map[*ir.Tensor]Region         // the part of each local a worker computes
	splits map[*ir.Var]interval.Interval // the split variable(s) and their part
}

// Region is the box of a tensor a worker reads: an interval per dimension.
// Whole marks dimensions read entirely (the analysis could not narrow them:
// data-dependent indices, opaque arguments).
type Region struct {
	Tensor *ir.Tensor
	Dims   []interval.Interval
	Whole  []bool
}

// PartSymbols names the bounds of a worker's part of the split variable.
func (s *Strategy) PartSymbols() (lo, hi string) { return s.Var.Name + ".lo", s.Var.Name + ".hi" }

// Name is the split variable's name.
func (s *Strategy) Name() string { return s.Var.Name }

// Analysis is what the lambdas of one instance say about partitioning it.
type Analysis struct {
	Inst *ir.Instance
	// Elementwise reports that every input is read at the output's own
	// index (up to broadcasting), so inputs and output partition alike.
	Elementwise bool
	FLOPs       lang.Dim // the whole operator's work
	Strategies  []*Strategy
}

// Analyse enumerates the strategies of an instance. An error means the
// analysis cannot bound some access: the operator is reported unanalysed.
func Analyse(inst *ir.Instance) (*Analysis, error) {
	a := &Analysis{Inst: inst, Elementwise: elementwise(inst), FLOPs: flops(inst)}
	for _, s := range candidates(inst) {
		if err := a.derive(s); err != nil {
			return nil, err
		}
		a.Strategies = append(a.Strategies, s)
	}
	return a, nil
}

// candidates lists one strategy per splittable output dimension and one
// per variable of an output's top-level reduction.
func candidates(inst *ir.Instance) []*Strategy {
	var out []*Strategy
	first := inst.Outputs[0]
	for d, v := range first.Vars {
		if n, ok := v.Extent.IsConst(); ok && n <= 1 {
			continue // nothing to split
		}
		vars := []*ir.Var{v}
		for _, o := range inst.Outputs[1:] {
			if len(o.Vars) <= d || !o.Vars[d].Extent.Equal(v.Extent) {
				vars = nil
				break
			}
			vars = append(vars, o.Vars[d])
		}
		if vars != nil {
			out = append(out, &Strategy{Kind: SplitOutput, Var: v, Dim: d, vars: vars})
		}
	}
	if len(inst.Outputs) != 1 {
		return out
	}
	if r := topReduce(first.Body); r != nil {
		for _, v := range r.Vars {
			if n, ok := v.Extent.IsConst(); ok && n <= 1 {
				continue
			}
			out = append(out, &Strategy{Kind: SplitReduction, Var: v, Reducer: r.Kind})
		}
	}
	return out
}

// topReduce finds a reduction whose partial results combine into the
// output with its own reducer: the body itself, through float conversions
// of a float reduction (rounding is reordering) or of an integer max or min
// (an integer sum or product wraps at its width as a whole, not per part),
// or a sum negated, or divided or multiplied by a constant or an extent
// (a mean): operations that distribute over a sum; integer division does
// not.
func topReduce(e ir.Expr) *ir.Reduce {
	sumOnly, orderOnly := false, false
	for {
		switch x := e.(type) {
		case *ir.Cast:
			switch {
			case !x.T.IsFloat():
				return nil // rounding partials to an integer would not combine
			case !x.X.Type().IsFloat():
				orderOnly = true
			}
			e = x.X
		case *ir.Reduce:
			switch {
			case sumOnly && x.Kind != ir.Sum, orderOnly && x.Kind != ir.Max && x.Kind != ir.Min:
				return nil
			}
			return x
		case *ir.Unary:
			if x.Op != "-" {
				return nil
			}
			e, sumOnly = x.X, true
		case *ir.Binary:
			if !(x.Op == ir.OpMul || x.Op == ir.OpDiv && x.T.IsFloat()) || !invariant(x.R) {
				return nil
			}
			e, sumOnly = x.L, true
		default:
			return nil
		}
	}
}

// invariant reports whether e is the same for every index: a constant or
// a dimension.
func invariant(e ir.Expr) bool {
	switch x := e.(type) {
	case *ir.Const, *ir.Size:
		return true
	case *ir.Cast:
		return invariant(x.X)
	}
	return false
}

// derive computes the strategy's regions and work.
func (a *Analysis) derive(s *Strategy) error {
	lo, hi := s.PartSymbols()
	part := interval.Interval{Lo: lang.Sym(lo), Hi: lang.Sym(hi)}
	s.splits = map[*ir.Var]interval.Interval{}
	if s.Kind == SplitOutput {
		for _, v := range s.vars {
			s.splits[v] = part
		}
	} else {
		s.splits[s.Var] = part
	}
	regions, err := readRegions(a.Inst, s.splits)
	if err != nil {
		return err
	}
	for _, r := range regions {
		for d, iv := range r.Dims {
			r.Dims[d] = s.simplify(iv)
		}
	}
	s.locals = map[*ir.Tensor]Region{}
	for _, d := range a.Inst.Locals {
		if r, ok := regions[d.Tensor]; ok {
			s.locals[d.Tensor] = *r
		}
	}
	for _, in := range a.Inst.Inputs {
		if r, ok := regions[in]; ok {
			s.Regions = append(s.Regions, *r)
		} else {
			s.Regions = append(s.Regions, emptyRegion(in))
		}
	}
	w, err := buildWorker(a.Inst, s, nil)
	if err != nil {
		return err
	}
	s.FLOPs = flops(w)
	return nil
}

// simplify uses what is known of the part: VAR.hi <= extent - 1 (and
// VAR.lo >= 0, like every symbol). With VAR.hi written extent - 1 - slack
// for a non-negative slack, clamps such as min(N - 1, VAR.hi) resolve to
// VAR.hi; then slack is written back in terms of VAR.hi.
func (s *Strategy) simplify(iv interval.Interval) interval.Interval {
	_, hiName := s.PartSymbols()
	slackName := s.Var.Name + ".slack"
	last := s.Var.Extent.Sub(lang.Const(1))
	hi, slack := lang.Sym(hiName), lang.Sym(slackName)
	toSlack := func(name string) (lang.Dim, bool) {
		if name == hiName {
			return last.Sub(slack), true
		}
		return lang.Dim{}, false
	}
	back := func(name string) (lang.Dim, bool) {
		if name == slackName {
			return last.Sub(hi), true
		}
		return lang.Dim{}, false
	}
	return iv.Subst(toSlack).Subst(back)
}

// emptyRegion is the region of an input a worker does not read.
func emptyRegion(t *ir.Tensor) Region {
	r := Region{Tensor: t, Whole: make([]bool, t.Rank())}
	for range t.Shape {
		r.Dims = append(r.Dims, interval.Interval{Lo: lang.Const(0), Hi: lang.Const(-1)})
	}
	return r
}

// Part is worker w's share [lo, hi] of an extent split k ways: as even as
// integers allow, empty (hi < lo) when there are more workers than values.
func Part(extent int64, w, k int) (lo, hi int64) {
	lo = extent * int64(w) / int64(k)
	hi = extent*int64(w+1)/int64(k) - 1
	return lo, hi
}

func (s *Strategy) String() string {
	if s.Kind == SplitOutput {
		return fmt.Sprintf("split %s (output dimension %d)", s.Var.Name, s.Dim)
	}
	return fmt.Sprintf("reduce %s (%s of partial outputs)", s.Var.Name, s.Reducer)
}

// PerWorker is a worker's work as a function of the length of its part,
// the symbol len(VAR), for the first worker (later workers of an
// operator with halos or clamped regions may do slightly less).
func (s *Strategy) PerWorker() lang.Dim {
	lo, hi := s.PartSymbols()
	n := lang.Sym("len(" + s.Var.Name + ")")
	return s.FLOPs.Subst(func(name string) (lang.Dim, bool) {
		switch name {
		case lo:
			return lang.Const(0), true
		case hi:
			return n.Sub(lang.Const(1)), true
		}
		return lang.Dim{}, false
	})
}
