package partition

import (
	"container/heap"
	"slices"
)

// factor is a cost table over a few variables (sorted ids), row-major.
type factor struct {
	vars  []int
	table []int64
	dead  bool
}

// solver minimises a sum of factors over discrete variables by variable
// elimination (bucket elimination): eliminating a variable replaces the
// factors that mention it by one factor over its neighbours, the minimum
// over its values; back-substitution in reverse order recovers the
// argument of the minimum. The order is greedy: always the variable whose
// table is smallest (ties by id). On a chain, or a fork-join, of
// coarsened groups this eliminates along the chain and its tables are
// the frontier tables of Tofu's DP; on other graphs it stays exact, with
// tables exponential in the graph's induced width.
type solver struct {
	dom     []int
	factors []*factor
	byVar   [][]*factor
	adj     []map[int]bool
	pos     []int // each variable's place in the graph, for ties
	order   []bucket
	// Largest is the largest table built.
	Largest int64
}

// bucket records one elimination for back-substitution.
type bucket struct {
	v       int
	factors []*factor
}

func newSolver(dom, pos []int, factors []*factor) *solver {
	s := &solver{dom: dom, pos: pos, factors: factors, byVar: make([][]*factor, len(dom)), adj: make([]map[int]bool, len(dom))}
	for v := range dom {
		s.adj[v] = map[int]bool{}
	}
	for _, f := range factors {
		s.attach(f)
	}
	return s
}

func (s *solver) attach(f *factor) {
	for _, v := range f.vars {
		s.byVar[v] = append(s.byVar[v], f)
		for _, u := range f.vars {
			if u != v {
				s.adj[v][u] = true
			}
		}
	}
}

// tableSize is the size of the table eliminating v builds, capped.
func (s *solver) tableSize(v int) int64 {
	n := int64(s.dom[v])
	for u := range s.adj[v] {
		n *= int64(s.dom[u])
		if n > 1<<40 {
			return 1 << 40
		}
	}
	return n
}

// run eliminates every variable; it returns false when the next table
// would exceed limit entries.
func (s *solver) run(limit int64) bool {
	h := &varHeap{}
	version := make([]int, len(s.dom))
	for v := range s.dom {
		heap.Push(h, s.item(v, 0))
	}
	done := make([]bool, len(s.dom))
	for h.Len() > 0 {
		it := heap.Pop(h).(heapItem)
		if done[it.v] || it.version != version[it.v] {
			continue
		}
		if it.size > limit {
			return false
		}
		s.Largest = max(s.Largest, it.size)
		done[it.v] = true
		nbrs := s.eliminate(it.v)
		for _, u := range nbrs {
			version[u]++
			heap.Push(h, s.item(u, version[u]))
		}
	}
	return true
}

// eliminate replaces the factors of v by their minimum over v and
// returns v's neighbours.
func (s *solver) eliminate(v int) []int {
	var fs []*factor
	for _, f := range s.byVar[v] {
		if !f.dead {
			f.dead = true
			fs = append(fs, f)
		}
	}
	s.byVar[v] = nil
	s.order = append(s.order, bucket{v, fs})
	var scope []int
	for u := range s.adj[v] {
		scope = append(scope, u)
		delete(s.adj[u], v)
	}
	slices.Sort(scope)
	s.adj[v] = nil
	nf := &factor{vars: scope, table: make([]int64, s.size(scope))}
	full := append(slices.Clone(scope), v)
	idx := s.indexers(fs, full)
	assign := make([]int, len(full))
	for e := range nf.table {
		best := int64(-1)
		for x := range s.dom[v] {
			assign[len(full)-1] = x
			if c := sum(fs, idx, assign); best < 0 || c < best {
				best = c
			}
		}
		nf.table[e] = best
		s.next(assign[:len(scope)], scope)
	}
	s.attach(nf)
	return scope
}

func (s *solver) size(vars []int) int {
	n := 1
	for _, v := range vars {
		n *= s.dom[v]
	}
	return n
}

// next advances a mixed-radix counter (last variable fastest).
func (s *solver) next(assign, vars []int) {
	for i := len(vars) - 1; i >= 0; i-- {
		assign[i]++
		if assign[i] < s.dom[vars[i]] {
			return
		}
		assign[i] = 0
	}
}

// indexers gives, per factor, the stride of each position of vars in its
// table (0 for variables it does not mention).
func (s *solver) indexers(fs []*factor, vars []int) [][]int {
	out := make([][]int, len(fs))
	for i, f := range fs {
		strides := make([]int, len(vars))
		stride := 1
		for j := len(f.vars) - 1; j >= 0; j-- {
			strides[slices.Index(vars, f.vars[j])] = stride
			stride *= s.dom[f.vars[j]]
		}
		out[i] = strides
	}
	return out
}

func sum(fs []*factor, idx [][]int, assign []int) int64 {
	var c int64
	for i, f := range fs {
		e := 0
		for j, a := range assign {
			e += a * idx[i][j]
		}
		c += f.table[e]
	}
	return c
}

// solution back-substitutes: every variable gets the value (index into
// its domain) that minimises its bucket given the later ones.
func (s *solver) solution() []int {
	assign := make([]int, len(s.dom))
	for i := len(s.order) - 1; i >= 0; i-- {
		b := s.order[i]
		vars := []int{b.v}
		for _, f := range b.factors {
			for _, u := range f.vars {
				if !slices.Contains(vars, u) {
					vars = append(vars, u)
				}
			}
		}
		idx := s.indexers(b.factors, vars)
		vals := make([]int, len(vars))
		for j, u := range vars {
			vals[j] = assign[u]
		}
		best, arg := int64(-1), 0
		for x := range s.dom[b.v] {
			vals[0] = x
			if c := sum(b.factors, idx, vals); best < 0 || c < best {
				best, arg = c, x
			}
		}
		assign[b.v] = arg
	}
	return assign
}

// total is the sum of the original factors at an assignment.
func total(dom []int, factors []*factor, assign []int) int64 {
	var c int64
	for _, f := range factors {
		e := 0
		for _, v := range f.vars {
			e = e*dom[v] + assign[v]
		}
		c += f.table[e]
	}
	return c
}

// heapItem orders eliminations by the size of their table, then by
// place in the coarsened graph, then by id.
type heapItem struct {
	size    int64
	pos     int
	v       int
	version int
}

func (s *solver) item(v, version int) heapItem {
	n := s.tableSize(v)
	return heapItem{size: n, pos: s.pos[v], v: v, version: version}
}

type varHeap []heapItem

func (h varHeap) Len() int { return len(h) }
func (h varHeap) Less(i, j int) bool {
	if h[i].size != h[j].size {
		return h[i].size < h[j].size
	}
	if h[i].pos != h[j].pos {
		return h[i].pos < h[j].pos
	}
	return h[i].v < h[j].v
}
func (h varHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *varHeap) Push(x any)   { *h = append(*h, x.(heapItem)) }
func (h *varHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
