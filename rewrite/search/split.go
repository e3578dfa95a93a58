package search

import (
	"tofuc/lang/ir"
)

// split divides g's nodes, recursively, into parts of at most the
// threshold (MetaFlow's Algorithm 2): a part that is too large is cut at
// a minimum vertex cut, each node weighted by the number of rule matches
// that use it, so that few rewrites are lost at the cuts.
func (o *Optimizer) split(g *ir.Graph) []map[string]bool {
	weight := o.matchCounts(g)
	var parts []map[string]bool
	var rec func(nodes []*ir.Node)
	rec = func(nodes []*ir.Node) {
		if len(nodes) <= o.opts.threshold() {
			parts = append(parts, nameSet(nodes))
			return
		}
		a, b := minCut(nodes, weight)
		rec(a)
		rec(b)
	}
	rec(g.Nodes)
	return parts
}

func nameSet(nodes []*ir.Node) map[string]bool {
	out := map[string]bool{}
	for _, n := range nodes {
		out[n.Name] = true
	}
	return out
}

// matchCounts is MetaFlow's capacity: 1 plus the number of rule matches
// that include each node.
func (o *Optimizer) matchCounts(g *ir.Graph) map[*ir.Node]int {
	prod := producers(g)
	out := map[*ir.Node]int{}
	for _, n := range g.Nodes {
		out[n]++
		for _, r := range o.rules {
			if root := r.root(); root == nil || root.Inst.Op != n.Inst.Op {
				continue
			}
			if m := matchAt(r, n, prod, r.tmpl != nil); m != nil {
				for _, x := range m.nodes {
					out[x]++
				}
			}
		}
	}
	return out
}

const inf = 1 << 40

// minCut splits nodes (in topological order) at a minimum weighted vertex
// cut between its first and last thirds; the first part holds the nodes
// the source side reaches (the cut included), so edges only go from the
// first part to the second.
func minCut(nodes []*ir.Node, weight map[*ir.Node]int) ([]*ir.Node, []*ir.Node) {
	n := len(nodes)
	// vertex i: in = 2i, out = 2i+1; source 2n, sink 2n+1
	f := newFlow(2*n + 2)
	src, dst := 2*n, 2*n+1
	prod := map[*ir.Value]int{}
	for i, x := range nodes {
		c := weight[x]
		if i < n/3 || i >= n-n/3 {
			c = inf
		}
		f.add(2*i, 2*i+1, c)
		for _, v := range x.Outputs {
			prod[v] = i
		}
		if i < n/3 {
			f.add(src, 2*i, inf)
		}
		if i >= n-n/3 {
			f.add(2*i+1, dst, inf)
		}
	}
	for i, x := range nodes {
		for _, v := range x.Inputs {
			if j, ok := prod[v]; ok {
				f.add(2*j+1, 2*i, inf)
			}
		}
	}
	f.maxflow(src, dst)
	reach := f.reachable(src)
	var a, b []*ir.Node
	for i, x := range nodes {
		if reach[2*i] {
			a = append(a, x)
		} else {
			b = append(b, x)
		}
	}
	if len(a) == 0 || len(b) == 0 {
		return nodes[:n/2], nodes[n/2:]
	}
	return closeUnder(a, b)
}

// closeUnder moves to b every node of a that reads a value of b, so that
// no edge goes from b back to a.
func closeUnder(a, b []*ir.Node) ([]*ir.Node, []*ir.Node) {
	inB := map[*ir.Value]bool{}
	for _, x := range b {
		for _, v := range x.Outputs {
			inB[v] = true
		}
	}
	var keep []*ir.Node
	for _, x := range a {
		late := false
		for _, v := range x.Inputs {
			late = late || inB[v]
		}
		if late {
			b = append(b, x)
			for _, v := range x.Outputs {
				inB[v] = true
			}
			continue
		}
		keep = append(keep, x)
	}
	return keep, b
}

// cutNeighbourhood is the set of nodes within two edges of a node whose
// neighbours lie in another part: where the local search at the cuts may
// rewrite.
func (o *Optimizer) cutNeighbourhood(g *ir.Graph, parts []map[string]bool) map[string]bool {
	partOf := map[string]int{}
	for i, p := range parts {
		for name := range p {
			partOf[name] = i
		}
	}
	samePart := func(a, b *ir.Node) bool {
		pa, okA := partOf[a.Name]
		pb, okB := partOf[b.Name]
		return okA && okB && pa == pb
	}
	prod := producers(g)
	cut := map[string]bool{}
	for _, n := range g.Nodes {
		for _, v := range n.Inputs {
			if p := prod[v]; p != nil && !samePart(p, n) {
				cut[n.Name], cut[p.Name] = true, true
			}
		}
	}
	return around(g, cut, 2, false)
}

// flow is a max-flow network (Edmonds-Karp) on adjacency lists.
type flow struct {
	to, cap []int
	adj     [][]int
}

func newFlow(n int) *flow { return &flow{adj: make([][]int, n)} }

func (f *flow) add(u, v, c int) {
	f.adj[u] = append(f.adj[u], len(f.to))
	f.to, f.cap = append(f.to, v), append(f.cap, c)
	f.adj[v] = append(f.adj[v], len(f.to))
	f.to, f.cap = append(f.to, u), append(f.cap, 0)
}

func (f *flow) maxflow(s, t int) {
	for {
		prev := make([]int, len(f.adj))
		for i := range prev {
			prev[i] = -1
		}
		prev[s] = -2
		q := []int{s}
		for len(q) > 0 && prev[t] == -1 {
			u := q[0]
			q = q[1:]
			for _, e := range f.adj[u] {
				if v := f.to[e]; f.cap[e] > 0 && prev[v] == -1 {
					prev[v] = e
					q = append(q, v)
				}
			}
		}
		if prev[t] == -1 {
			return
		}
		push := inf
		for v := t; v != s; v = f.to[prev[v]^1] {
			push = min(push, f.cap[prev[v]])
		}
		if push >= inf {
			return
		}
		for v := t; v != s; v = f.to[prev[v]^1] {
			f.cap[prev[v]] -= push
			f.cap[prev[v]^1] += push
		}
	}
}

func (f *flow) reachable(s int) []bool {
	seen := make([]bool, len(f.adj))
	seen[s] = true
	q := []int{s}
	for len(q) > 0 {
		u := q[0]
		q = q[1:]
		for _, e := range f.adj[u] {
			if v := f.to[e]; f.cap[e] > 0 && !seen[v] {
				seen[v] = true
				q = append(q, v)
			}
		}
	}
	return seen
}
