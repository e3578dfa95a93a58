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
	Var     *ir.Var    // the split variable (of the first output)
	Dim     int        // the first output's dimension split (SplitOutput)
	Reducer ir.Reducer // how partial outputs combine (SplitReduction)
	// Dims holds, per output, the dimension split (SplitOutput): outputs
	// share the variable by its extent, at whatever position
	// (batch_norm_train's y [N, C, *S] and mean [C] split along C).
	Dims []int
	// Regions holds, per instance input, the part of it a worker reads.
	Regions []Region
	// FLOPs is a worker's work, symbolic in the part symbols.
	FLOPs lang.Dim

	vars   []*ir.Var                     // the split variable in each output
	locals map[*ir.Tensor]Region         // the part of each local a worker computes
	splits map[*ir.Var]interval.Interval // the split variable(s) and their part
}

// Region is the part of a tensor a worker reads: per dimension a union of
// at most interval.MaxBands bands (Bands) and their hull (Dims). Whole
// marks dimensions read entirely (the analysis could not narrow them:
// data-dependent indices, opaque arguments).
type Region struct {
	Tensor *ir.Tensor
	Dims   []interval.Interval
	Bands  []interval.Set
	Whole  []bool
}

// Banded reports whether some dimension of the region has several bands.
func (r Region) Banded() bool {
	for _, b := range r.Bands {
		if len(b) > 1 {
			return true
		}
	}
	return false
}

// PartSymbols names the bounds of a worker's part of the split variable.
func (s *Strategy) PartSymbols() (lo, hi string) { return s.Var.Name + ".lo", s.Var.Name + ".hi" }

// Name is the split variable's name.
func (s *Strategy) Name() string { return s.Var.Name }

// Words says the strategy as reports and plans name it: "split b" or
// "reduce ci (sum)".
func (s *Strategy) Words() string {
	if s.Kind == SplitReduction {
		return fmt.Sprintf("reduce %s (%s)", s.Var.Name, s.Reducer)
	}
	return "split " + s.Var.Name
}

// Analysis is what the lambdas of one instance say about partitioning it.
type Analysis struct {
	Inst *ir.Instance
	// Elementwise reports that every input is read at the output's own
	// index (up to broadcasting), so inputs and output partition alike.
	Elementwise bool
	// Linear reports that every output is a linear function of the
	// inputs taken together (no constant term): applied to partial sums
	// of its inputs it gives partial sums of its outputs.
	Linear     bool
	FLOPs      lang.Dim // the whole operator's work
	Strategies []*Strategy
}

// Analyse enumerates the strategies of an instance. An error means the
// analysis cannot bound some access: the operator is reported unanalysed.
func Analyse(inst *ir.Instance) (*Analysis, error) {
	a := &Analysis{Inst: inst, Elementwise: elementwise(inst), Linear: linear(inst), FLOPs: flops(inst)}
	for _, s := range candidates(inst, 2) {
		if err := a.derive(s); err != nil {
			return nil, err
		}
		a.Strategies = append(a.Strategies, s)
	}
	return a, nil
}

// Find is the strategy named by words (Strategy.Words). A variable of
// extent 1 or 0 has no strategy of its own in Strategies, but a worker
// instance of a larger one can have it (an uneven split leaves a part of
// one value): Find derives it then, one worker getting the value and the
// others nothing.
func (a *Analysis) Find(words string) (*Strategy, error) {
	for _, s := range a.Strategies {
		if s.Words() == words {
			return s, nil
		}
	}
	for _, s := range candidates(a.Inst, 0) {
		if s.Words() == words {
			return s, a.derive(s)
		}
	}
	return nil, fmt.Errorf("%s has no strategy %q", a.Inst.Op, words)
}

// candidates lists one strategy per output dimension of at least
// minExtent values (when constant) shared by every output, and one per
// variable of a top-level reduction shared by every output.
func candidates(inst *ir.Instance, minExtent int64) []*Strategy {
	var out []*Strategy
	small := func(v *ir.Var) bool { n, ok := v.Extent.IsConst(); return ok && n < minExtent }
	first := inst.Outputs[0]
	for d, v := range first.Vars {
		if small(v) {
			continue
		}
		dims := []int{d}
		for _, o := range inst.Outputs[1:] {
			at := sharedDim(o.Vars, v.Extent, d)
			if at < 0 {
				dims = nil
				break
			}
			dims = append(dims, at)
		}
		if dims != nil {
			s := &Strategy{Kind: SplitOutput, Var: v, Dim: d, Dims: dims}
			for o, at := range dims {
				s.vars = append(s.vars, inst.Outputs[o].Vars[at])
			}
			out = append(out, s)
		}
	}
	for _, s := range reductions(inst) {
		if !small(s.Var) {
			out = append(out, s)
		}
	}
	return out
}

// sharedDim is the dimension of vars with the given extent: d when it
// has it, else the first that has it, else -1.
func sharedDim(vars []*ir.Var, extent lang.Dim, d int) int {
	if d >= 0 && d < len(vars) && vars[d].Extent.Equal(extent) {
		return d
	}
	for at, v := range vars {
		if v.Extent.Equal(extent) {
			return at
		}
	}
	return -1
}

// reductions lists a strategy per variable of the first reduction of the
// first output whose partial results combine into every output
// (reduceTerms), when every one of those reductions, with the same
// reducer, has a variable of the same extent: splitting them together,
// partial outputs combine output by output. A sum of two sums
// (lstm_cell's bias gradient, one sum per bias) qualifies, and so do
// batch statistics written as sums: a variance around a local mean,
// sum((x - mean)^2) / N, is exact, a worker computing the mean over the
// whole reduction (its region of x is whole there) and a partial sum of
// squares around it; a variance written as E[x^2] - E[x]^2 is no such
// combination and gets no strategy. A reduction held in a `let` counts
// when every read of the local is such a term (batch_norm's gradient of
// scale, dk[c] * rsqrt(var[c] + epsilon) with dk a sum over n and *S):
// the worker computes the local over its part, a partial local.
func reductions(inst *ir.Instance) []*Strategy {
	c := termCollector{locals: map[*ir.Tensor]*ir.Def{}, reads: map[*ir.Tensor]int{}}
	for _, d := range inst.Locals {
		c.locals[d.Tensor] = d
	}
	var rs []*ir.Reduce
	for _, o := range inst.Outputs {
		terms := c.terms(o.Body)
		if terms == nil || len(rs) > 0 && terms[0].Kind != rs[0].Kind {
			return nil
		}
		rs = append(rs, terms...)
	}
	if !c.localsOnlyTerms(inst) {
		return nil
	}
	var out []*Strategy
	for _, v := range rs[0].Vars {
		s := &Strategy{Kind: SplitReduction, Var: v, Reducer: rs[0].Kind, vars: []*ir.Var{v}}
		for _, r := range rs[1:] {
			at := sharedDim(r.Vars, v.Extent, -1)
			if at < 0 {
				s = nil
				break
			}
			s.vars = append(s.vars, r.Vars[at])
		}
		if s != nil {
			out = append(out, s)
		}
	}
	return out
}

// terms finds the reductions whose partial results combine into e
// with their (common) reducer: the body itself; through float conversions
// of a float reduction (rounding is reordering) or of an integer max or
// min (an integer sum or product wraps at its width as a whole, not per
// part); sums negated, added, subtracted, or multiplied by a factor
// without a reduction (a constant, an extent, a value at the output's
// index: it is the same on every worker, computed whole, and
// distributes over the sum), or, for floats, divided by one (a mean);
// integer division does not distribute; selections between such terms
// on a condition outside the reductions, a branch of constant 0 counting
// as an empty sum; and reads of a local whose body is such a
// combination (its reads counted, for localsOnlyTerms). It returns nil
// when e is not such a combination.
func (c *termCollector) terms(e ir.Expr) []*ir.Reduce {
	c.out, c.zero = nil, false
	if !c.collect(e, false, false) || len(c.out) == 0 {
		return nil
	}
	for _, r := range c.out {
		if r.Kind != c.out[0].Kind || c.zero && r.Kind != ir.Sum {
			return nil
		}
	}
	return c.out
}

type termCollector struct {
	out    []*ir.Reduce
	zero   bool // a branch is the constant 0, the identity of a sum only
	locals map[*ir.Tensor]*ir.Def
	reads  map[*ir.Tensor]int // reads of each local taken as a term
}

// localsOnlyTerms reports whether every local read as a term is read
// nowhere else: splitting its reduction changes its value wherever it
// is read.
func (c *termCollector) localsOnlyTerms(inst *ir.Instance) bool {
	if len(c.reads) == 0 {
		return true
	}
	all := map[*ir.Tensor]int{}
	for _, d := range append(append([]*ir.Def(nil), inst.Locals...), inst.Outputs...) {
		ir.Walk(d.Body, func(e ir.Expr) bool {
			if a, ok := e.(*ir.Access); ok {
				all[a.T]++
			}
			return true
		})
	}
	for t, n := range c.reads {
		if all[t] != n {
			return false
		}
	}
	return true
}

func (c *termCollector) collect(e ir.Expr, sumOnly, orderOnly bool) bool {
	switch x := e.(type) {
	case *ir.Cast:
		switch {
		case !x.T.IsFloat():
			return false // rounding partials to an integer would not combine
		case !x.X.Type().IsFloat():
			orderOnly = true
		}
		return c.collect(x.X, sumOnly, orderOnly)
	case *ir.Reduce:
		if sumOnly && x.Kind != ir.Sum || orderOnly && x.Kind != ir.Max && x.Kind != ir.Min {
			return false
		}
		c.out = append(c.out, x)
		return true
	case *ir.Access:
		d := c.locals[x.T]
		if d == nil || x.Default != nil || !c.collect(d.Body, sumOnly, orderOnly) {
			return false
		}
		c.reads[x.T]++
		return true
	case *ir.Unary:
		return x.Op == "-" && c.collect(x.X, true, orderOnly)
	case *ir.Binary:
		switch {
		case x.Op == ir.OpAdd || x.Op == ir.OpSub:
			return c.collect(x.L, true, orderOnly) && c.collect(x.R, true, orderOnly)
		case (x.Op == ir.OpMul || x.Op == ir.OpDiv && x.T.IsFloat()) && c.factor(x.R):
			return c.collect(x.L, true, orderOnly)
		case x.Op == ir.OpMul && c.factor(x.L):
			return c.collect(x.R, true, orderOnly)
		}
	case *ir.Select:
		return c.collect(x.A, sumOnly, orderOnly) && c.collect(x.B, sumOnly, orderOnly)
	case *ir.Const:
		c.zero = c.zero || isZeroConst(x)
		return isZeroConst(x)
	}
	return false
}

// factor reports whether e can multiply (or divide) a term: it holds no
// reduction, so every worker computes the same value of it (the locals it
// reads whole, unless localsOnlyTerms finds them split).
func (c *termCollector) factor(e ir.Expr) bool {
	if invariant(e) {
		return true
	}
	ok := true
	ir.Walk(e, func(x ir.Expr) bool {
		if _, r := x.(*ir.Reduce); r {
			ok = false
		}
		return ok
	})
	return ok
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
	for _, v := range s.vars {
		s.splits[v] = part
	}
	regions, err := readRegions(a.Inst, s.splits, s.facts())
	if err != nil {
		return err
	}
	for _, r := range regions {
		for d, set := range r.Bands {
			for i, iv := range set {
				set[i] = s.simplify(iv)
			}
			r.Dims[d] = set.Hull()
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
	s.FLOPs = a.workerFLOPs(s)
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
		iv := interval.Interval{Lo: lang.Const(0), Hi: lang.Const(-1)}
		r.Dims = append(r.Dims, iv)
		r.Bands = append(r.Bands, interval.Set{iv})
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
		return fmt.Sprintf("split %s (output dimensions %v)", s.Var.Name, s.Dims)
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
