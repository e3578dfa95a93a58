package partition

import (
	"fmt"
	"math"
	"slices"

	"tofuc/analysis/cost"
	"tofuc/analysis/strategy"
	"tofuc/lang/ir"
)

// step is one recursion step as a min-sum problem: a variable per tied
// tensor (its split) and per tied node (its choice), and a factor per
// (node, tensor) pair: the bytes the node's strategy causes on that
// tensor, times the number of device groups the step applies to.
type step struct {
	g       *cost.Graph
	tensors []*ir.Value // g.Tensors(), listed once
	c       *Coarse
	k       int
	groups  int64
	views   []*cost.View
	// tdom and odom are the domains: dimensions (-1 replicated) of each
	// tensor variable, choices of each node variable.
	tdom    [][]int
	odom    [][]cost.Choice
	factors []*factor
	pairs   map[[2]int]*factor
	// bound is the largest allowed total: forbidden entries cost more.
	bound int64
	// later is the product of the later steps' factors: a tensor
	// replicated or partial here is taken to stay so (cost.Copies), its
	// transfers needed by every device of the group.
	later int64
	// unaries are the factors over one tensor variable (carried bytes,
	// memory), by variable.
	unaries map[int]*factor
	weighting
	// grads are the gradients of parameters, where weighting is on.
	grads map[*ir.Value]bool
}

// allow filters a view's choices (ICML18 drops the reductions).
type allow func(v *cost.View, c cost.Choice) bool

func allowAll(*cost.View, cost.Choice) bool { return true }

func noReduction(v *cost.View, c cost.Choice) bool {
	return c >= 0 && v.Analysis.Strategies[c].Kind != strategy.SplitReduction
}

// space is the plan space a search explores and what it minimises.
type space struct {
	ok allow
	// splitOnly keeps every tensor split where a dimension allows: the
	// plan space without replication (Tofu's), the least memory.
	splitOnly bool
	// lambda prices a byte of memory per device in bytes communicated:
	// the Lagrange multiplier of a memory limit (0: memory is free).
	lambda float64
	weighting
}

// weighting weighs the bytes that overlap the backward pass apart from
// the others, for the time objective (SearchTime): those of parameters'
// gradients, and every byte an optimizer update moves. Data
// parallelism's all-reduce is such a pair, a reduce-scatter of the
// gradient and an all-gather of the updated parameter, and hides behind
// the backward pass, while a transfer of activations holds up the
// operator that waits for it.
type weighting struct {
	on bool
	// overlapped is what an overlapping byte weighs, in 64ths of
	// another's.
	overlapped int64
}

// weightScale is the weight of a byte that does not overlap.
const weightScale = 64

// String says how bytes are weighed, for reports.
func (w weighting) String() string {
	switch {
	case !w.on:
		return ""
	case w.overlapped == 0:
		return "the bytes of parameters' gradients and optimizer updates, which overlap the backward pass, not counted"
	}
	return fmt.Sprintf("the bytes of parameters' gradients and optimizer updates, which overlap the backward pass, counted at %d/%d", w.overlapped, weightScale)
}

// layouts are the layouts of v the space allows at step i.
func (sp space) layouts(g *cost.Graph, p *cost.Plan, v *ir.Value, i int) []int {
	dom := g.Layouts(v, cost.TileShape(g.Shapes[v], p.Tensors[v][:i], p.Factors), p.Factors[i])
	if sp.splitOnly && dom[0] >= 0 {
		return cost.Splittable(cost.TileShape(g.Shapes[v], p.Tensors[v][:i], p.Factors), p.Factors[i])
	}
	return dom
}

// newStep builds the problem of one step from the views and the tiles
// left by the earlier steps.
func newStep(g *cost.Graph, c *Coarse, p *cost.Plan, views []*cost.View, i int, groups int64, sp space, carried map[*ir.Value]int64) (*step, error) {
	s := &step{g: g, tensors: g.Tensors(), c: c, k: p.Factors[i], groups: groups, views: views, later: 1,
		tdom: make([][]int, c.nTensor), odom: make([][]cost.Choice, c.nOp), pairs: map[[2]int]*factor{}}
	for _, k := range p.Factors[i+1:] {
		s.later *= int64(k)
	}
	for _, v := range s.tensors {
		id := c.tensorVar[v]
		dom := sp.layouts(g, p, v, i)
		if s.tdom[id] == nil {
			s.tdom[id] = dom
		} else if fmt.Sprint(s.tdom[id]) != fmt.Sprint(dom) {
			return nil, fmt.Errorf("tensor %s is tied to a tensor split differently", v.Name)
		}
	}
	s.weigh(sp.weighting)
	distinct := distinctViews(views)
	parallel(len(distinct), func(i int) { distinct[i].Step(s.k) })
	for j, n := range g.IR.Nodes {
		id := c.opVar[j]
		if s.odom[id] == nil {
			s.odom[id] = choices(views[j], sp.ok)
		}
		s.addNode(n, j)
	}
	for _, f := range s.pairs {
		s.factors = append(s.factors, f)
	}
	s.carried(carried)
	if sp.lambda > 0 {
		s.penalise(p, i, sp.lambda)
	}
	s.forbid()
	return s, nil
}

// forbid gives the forbidden entries of the factors (a choice that cannot
// read or write a tensor so laid out) a cost above any allowed
// assignment's total, so that the minimum never takes one; their sum
// over all factors must stay within int64. When the allowed costs are
// too large for that (memory at a high price), every cost is first
// divided alike: the minimum is the same up to rounding.
func (s *step) forbid() {
	var bound int64
	for _, f := range s.factors {
		var most int64
		for _, b := range f.table {
			most = max(most, b)
		}
		bound += most
	}
	limit := math.MaxInt64/int64(len(s.factors)+1) - 1
	if scale := bound/limit + 1; scale > 1 {
		for _, f := range s.factors {
			for e, b := range f.table {
				if b > 0 {
					f.table[e] = b / scale
				}
			}
		}
		bound /= scale
	}
	for _, f := range s.factors {
		for e, b := range f.table {
			if b < 0 {
				f.table[e] = bound + 1
			}
		}
	}
	s.bound = bound
}

// unary is the factor over tensor variable id alone, made on first use.
func (s *step) unary(id int) *factor {
	if s.unaries == nil {
		s.unaries = map[int]*factor{}
	}
	f, ok := s.unaries[id]
	if !ok {
		f = &factor{vars: []int{id}, table: make([]int64, len(s.tdom[id]))}
		s.unaries[id] = f
		s.factors = append(s.factors, f)
	}
	return f
}

// carried charges each tensor's layout with what it does to the bytes
// its tensor moved at the earlier steps: a layout kept whole here (and,
// as the step assumes, on the later steps) makes every device of a group
// need them (cost.Copies), so they count Π later factors times.
func (s *step) carried(carried map[*ir.Value]int64) {
	for v, b := range carried {
		if b == 0 {
			continue
		}
		b *= s.plainByte()
		id := s.tensorID(v)
		f := s.unary(id)
		for x, d := range s.tdom[id] {
			if d < 0 {
				f.table[x] += b * int64(s.k) * s.later
			} else {
				f.table[x] += b
			}
		}
	}
}

// carry adds the bytes each tensor moves at this step under assign to
// carried, those of the earlier steps multiplied by the copies this
// step's layout makes (the state carried uses at the next step).
func (s *step) carry(assign []int, carried map[*ir.Value]int64) {
	moved := map[*ir.Value]int64{}
	for j, n := range s.g.IR.Nodes {
		sc := s.views[j].Step(s.k)
		ch := s.odom[s.c.opVar[j]][assign[s.opID(j)]]
		for _, t := range []struct {
			vs    []*ir.Value
			table [][]int64
		}{{n.Inputs, sc.Fetch[cost.Slot(ch)]}, {n.Outputs, sc.Store[cost.Slot(ch)]}} {
			for pos, v := range t.vs {
				if v.Const == nil {
					d := s.tdom[s.tensorID(v)][assign[s.tensorID(v)]]
					moved[v] += s.groups * max(0, t.table[pos][cost.Col(d)])
				}
			}
		}
	}
	for _, v := range s.tensors {
		d := s.tdom[s.tensorID(v)][assign[s.tensorID(v)]]
		if d < 0 {
			carried[v] *= int64(s.k)
		}
		carried[v] += moved[v]
	}
}

// penalise adds, per tensor variable, lambda times the memory per device
// its tensors take under each layout, assuming the later steps split
// them: a sum of tiles, which bounds the peak of live tiles from above.
func (s *step) penalise(p *cost.Plan, i int, lambda float64) {
	for _, v := range s.tensors {
		id := s.tensorID(v)
		f := s.unary(id)
		for x, d := range s.tdom[id] {
			dims := append(slices.Clone(p.Tensors[v][:i]), d)
			tile := cost.TileShape(s.g.Shapes[v], dims, p.Factors)
			bytes := cost.ElemSize(v) * volume(tile) / s.later
			f.table[x] += int64(lambda * float64(bytes*s.plainByte()))
		}
	}
}

func volume(shape []int64) int64 {
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	return n
}

// choices are the allowed strategies of a view and, for a linear
// operator, Accumulate; Replicate when it has no strategy.
func choices(v *cost.View, ok allow) []cost.Choice {
	var out []cost.Choice
	for c := range v.Strategies() {
		if ok(v, cost.Choice(c)) {
			out = append(out, cost.Choice(c))
		}
	}
	if len(out) == 0 {
		out = []cost.Choice{cost.Replicate}
	}
	if v.Linear() && ok(v, cost.Accumulate) {
		out = append(out, cost.Accumulate)
	}
	return out
}

// variable ids: tensors first, then nodes.
func (s *step) opID(j int) int           { return s.c.nTensor + s.c.opVar[j] }
func (s *step) tensorID(v *ir.Value) int { return s.c.tensorVar[v] }

// addNode adds the node's bytes on each of its tensors to the pair
// factors.
func (s *step) addNode(n *ir.Node, j int) {
	sc := s.views[j].Step(s.k)
	odom := s.odom[s.c.opVar[j]]
	add := func(v *ir.Value, table [][][]int64, pos int) {
		if v.Const != nil {
			return
		}
		tid := s.tensorID(v)
		f := s.pair(s.opID(j), tid)
		tdom := s.tdom[tid]
		for a, ch := range odom {
			for b, d := range tdom {
				e := &f.table[b*len(odom)+a]
				c := table[cost.Slot(ch)][pos][cost.Col(d)]
				if c > 0 {
					c *= s.weight(n, v)
				}
				switch {
				case c == cost.Forbidden || *e < 0:
					*e = -1
				case d < 0:
					*e += s.groups * s.later * c
				default:
					*e += s.groups * c
				}
			}
		}
	}
	for i, v := range n.Inputs {
		add(v, sc.Fetch, i)
	}
	for o, v := range n.Outputs {
		add(v, sc.Store, o)
	}
}

// weigh sets the step's weighting and, where it is on, the gradients
// of parameters.
func (s *step) weigh(w weighting) {
	s.weighting = w
	if !w.on {
		return
	}
	params := map[*ir.Value]bool{}
	for _, p := range s.g.IR.Params {
		params[p.Value] = true
	}
	s.grads = map[*ir.Value]bool{}
	for _, v := range s.tensors {
		if v.GradOf != nil && params[v.GradOf] {
			s.grads[v] = true
		}
	}
}

// plainByte is what a byte that does not overlap counts: a carried
// byte, or a byte of memory at a price lambda counts so (1 where the
// weighting is off).
func (s *step) plainByte() int64 {
	if s.on {
		return weightScale
	}
	return 1
}

// weight is what a byte of tensor v that node n moves counts (1 where
// the weighting is off).
func (s *step) weight(n *ir.Node, v *ir.Value) int64 {
	switch {
	case !s.on:
		return 1
	case s.grads[v] || n.Role == "update":
		return s.overlapped
	}
	return s.plainByte()
}

// pair is the factor over a node variable and a tensor variable.
func (s *step) pair(op, t int) *factor {
	key := [2]int{op, t}
	if f, ok := s.pairs[key]; ok {
		return f
	}
	vars := []int{t, op} // tensor ids are below node ids
	f := &factor{vars: vars, table: make([]int64, len(s.tdom[t])*len(s.odom[op-s.c.nTensor]))}
	s.pairs[key] = f
	return f
}

// positions places each variable at the last operator group that
// touches it, groups taken in the order of their first node: the order
// of the coarsened graph, which breaks ties between equal tables.
func (s *step) positions() []int {
	pos := make([]int, len(s.tdom)+len(s.odom))
	for j, n := range s.g.IR.Nodes {
		at := s.c.Groups[s.c.Group[j]][0]
		pos[s.opID(j)] = max(pos[s.opID(j)], at)
		for _, v := range append(append([]*ir.Value(nil), n.Inputs...), n.Outputs...) {
			if v.Const == nil {
				pos[s.tensorID(v)] = max(pos[s.tensorID(v)], at)
			}
		}
	}
	return pos
}

// domains lists each variable's domain size.
func (s *step) domains() []int {
	out := make([]int, 0, len(s.tdom)+len(s.odom))
	for _, d := range s.tdom {
		out = append(out, max(1, len(d)))
	}
	for _, d := range s.odom {
		out = append(out, max(1, len(d)))
	}
	return out
}

// apply writes an assignment (domain indices) into the plan at step i
// and returns the views of the next step (none after the last).
func (s *step) apply(p *cost.Plan, i int, assign []int) ([]*cost.View, error) {
	last := i+1 == len(p.Factors)
	for _, v := range s.tensors {
		id := s.tensorID(v)
		d := -1
		if len(s.tdom[id]) > 0 {
			d = s.tdom[id][assign[id]]
		}
		p.Tensors[v] = append(p.Tensors[v][:i], d)
	}
	// The next views, each distinct (view, choice) analysed once, in
	// parallel.
	type sub struct {
		v  *cost.View
		ch cost.Choice
	}
	index := map[sub]int{}
	var subs []sub
	at := make([]int, len(s.views))
	for j, n := range s.g.IR.Nodes {
		ch := s.odom[s.c.opVar[j]][assign[s.opID(j)]]
		p.Ops[n] = append(p.Ops[n][:i], ch)
		if last {
			continue
		}
		key := sub{s.views[j], ch}
		id, ok := index[key]
		if !ok {
			id = len(subs)
			index[key] = id
			subs = append(subs, key)
		}
		at[j] = id
	}
	if last {
		return nil, nil
	}
	views := make([]*cost.View, len(subs))
	errs := make([]error, len(subs))
	parallel(len(subs), func(i int) { views[i], errs[i] = subs[i].v.Sub(subs[i].ch, s.k) })
	next := make([]*cost.View, len(s.views))
	for j, n := range s.g.IR.Nodes {
		if err := errs[at[j]]; err != nil {
			return nil, fmt.Errorf("operator %s: %w", n.Name, err)
		}
		next[j] = views[at[j]]
	}
	return next, nil
}

// distinctViews lists each view once, in order of first appearance.
func distinctViews(views []*cost.View) []*cost.View {
	seen := map[*cost.View]bool{}
	var out []*cost.View
	for _, v := range views {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}
