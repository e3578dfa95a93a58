package search

import "tofuc/lang/ir"

// within searches the operators of cur's graph named in part as a graph
// of their own (subgraph), so that matching, hashing, tidying and pricing
// a candidate cost what the part does, not what the whole graph does;
// the rest of the graph is priced once, as the difference. The subgraph
// holds the part's halo too, the operators near it, which are not
// rewritten but priced with it: a rewrite's gain often lies in what it
// fuses with a neighbour (a bias split from a convolution joins the
// residual addition after it). The best subgraph is put back into the
// whole (splice), which is priced again and kept only when it is cheaper
// by minGain: a gain the subgraph overstates is dropped, never kept.
func (o *Optimizer) within(cur state, part map[string]bool) (state, int) {
	halo := haloOf(cur.g, part)
	sub := subgraph(cur.g, part, halo)
	h, _ := canonicalHash(sub)
	rest := cur.cost - o.cost(sub, h)
	best, explored := o.backtrack(sub, bounds{outside: halo, rest: rest, alpha: o.opts.Alpha, gain: minGain, limit: o.opts.maxGraphs(), slack: growthSlack, focus: true})
	if len(best.steps) == 0 {
		return cur, explored
	}
	g := splice(cur.g, sub, best.g)
	if tidy(g) != nil {
		return cur, explored
	}
	h, _ = canonicalHash(g)
	if c := o.cost(g, h); c < cur.cost*(1-minGain) {
		return state{g: g, cost: c, steps: append(append([]Step(nil), cur.steps...), best.steps...)}, explored
	}
	return cur, explored
}

// haloDepth is how many edges from a part its halo reaches: enough for
// the chains a kernel fuses after a contraction (bias, residual addition,
// activation).
const haloDepth = 3

// haloOf is the set of the names of g's nodes not in part within
// haloDepth producer or consumer edges of a node in part.
func haloOf(g *ir.Graph, part map[string]bool) map[string]bool {
	halo := around(g, part, haloDepth, false)
	for name := range part {
		delete(halo, name)
	}
	return halo
}

// subgraph is the graph of g's nodes named in part or halo (shared, not
// copied): its inputs are g's inputs it reads and the values of other
// nodes it reads, its parameters those it reads, its outputs the values
// it makes that other nodes or g's outputs read, in node order.
func subgraph(g *ir.Graph, part, halo map[string]bool) *ir.Graph {
	in := func(n *ir.Node) bool { return part[n.Name] || halo[n.Name] }
	sub := &ir.Graph{Name: g.Name}
	made := map[*ir.Value]bool{}
	for _, n := range g.Nodes {
		if in(n) {
			sub.Nodes = append(sub.Nodes, n)
			for _, v := range n.Outputs {
				made[v] = true
			}
		}
	}
	read := map[*ir.Value]bool{}
	readOutside := map[*ir.Value]bool{}
	for _, v := range g.Outputs {
		readOutside[v] = true
	}
	var border []*ir.Value
	for _, n := range g.Nodes {
		for _, v := range n.Inputs {
			switch {
			case !in(n):
				readOutside[v] = true
			case !read[v] && !made[v]:
				border = append(border, v)
			}
			read[v] = read[v] || in(n)
		}
	}
	inputs := map[*ir.Value]bool{}
	for _, v := range g.Inputs {
		inputs[v] = true
	}
	params := map[*ir.Value]bool{}
	for _, p := range g.Params {
		params[p.Value] = true
		if read[p.Value] {
			sub.Params = append(sub.Params, p)
		}
	}
	for _, v := range g.Inputs {
		if read[v] {
			sub.Inputs = append(sub.Inputs, v)
		}
	}
	for _, v := range border {
		if !inputs[v] && !params[v] && v.Const == nil {
			sub.Inputs = append(sub.Inputs, v)
		}
	}
	for _, n := range sub.Nodes {
		for _, v := range n.Outputs {
			if readOutside[v] {
				sub.Outputs = append(sub.Outputs, v)
			}
		}
	}
	return sub
}

// splice is a copy of g with the nodes of sub, a subgraph of g, replaced
// by those of rewritten, a rewrite of sub (its outputs in sub's order),
// not tidied.
func splice(g, sub, rewritten *ir.Graph) *ir.Graph {
	inSub := map[*ir.Node]bool{}
	for _, n := range sub.Nodes {
		inSub[n] = true
	}
	// The rewritten nodes take the place of sub's first (the schedule
	// fuses nodes in graph order; tidying fixes the order where needed).
	out := *g
	out.Nodes = nil
	placed := false
	for _, n := range g.Nodes {
		switch {
		case !inSub[n]:
			out.Nodes = append(out.Nodes, n)
		case !placed:
			out.Nodes = append(out.Nodes, rewritten.Nodes...)
			placed = true
		}
	}
	spliced := clone(&out)
	for i, v := range sub.Outputs {
		if w := rewritten.Outputs[i]; w != v {
			replaceUses(spliced, v, w)
		}
	}
	return spliced
}
