package partition

import (
	"container/heap"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
)

// factor is a cost table over a few variables (sorted ids), row-major.
type factor struct {
	vars  []int
	table []int64
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
	adj     [][]int // each variable's neighbours, sorted
	pos     []int   // each variable's place in the graph, for ties
	order   []bucket
	// Largest is the largest table built.
	Largest int64
}

// bucket records one elimination for back-substitution.
type bucket struct {
	v       int
	factors []*factor
	vars    []int   // the scope, then v
	idx     [][]int // indexers(factors, vars)
}

func newSolver(dom, pos []int, factors []*factor) *solver {
	s := &solver{dom: dom, pos: pos, factors: factors, adj: make([][]int, len(dom))}
	for _, f := range factors {
		if len(f.vars) > 1 {
			for _, v := range f.vars {
				s.adj[v] = append(s.adj[v], f.vars...)
			}
		}
	}
	for v, a := range s.adj {
		slices.Sort(a)
		s.adj[v] = without(slices.Compact(a), v)
	}
	return s
}

// union is the sorted set a ∪ b without skip (a and b sorted).
func union(a, b []int, skip int) []int {
	if len(b) <= 1 && (len(b) == 0 || b[0] == skip) {
		return a
	}
	out := make([]int, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		var x int
		switch {
		case j == len(b) || i < len(a) && a[i] < b[j]:
			x, i = a[i], i+1
		case i == len(a) || b[j] < a[i]:
			x, j = b[j], j+1
		default:
			x, i, j = a[i], i+1, j+1
		}
		if x != skip {
			out = append(out, x)
		}
	}
	return out
}

// without is the sorted set a without x, in place.
func without(a []int, x int) []int {
	if i, ok := slices.BinarySearch(a, x); ok {
		return slices.Delete(a, i, i+1)
	}
	return a
}

// tableSize is the size of the table eliminating v builds, capped.
func (s *solver) tableSize(adj [][]int, v int) int64 {
	n := int64(s.dom[v])
	for _, u := range adj[v] {
		n *= int64(s.dom[u])
		if n > 1<<40 {
			return 1 << 40
		}
	}
	return n
}

// run eliminates every variable; it returns false, having built no
// table, when some table would exceed limit entries. The order depends
// on the factors' variables alone, so it is decided first, on the
// adjacency, before any table is built.
func (s *solver) run(limit int64) bool {
	order, ok := s.plan(limit)
	if ok {
		s.eliminateAll(order)
	}
	return ok
}

// elimination is one step of an elimination order: the variable and its
// neighbours when it is eliminated (the new factor's variables).
type elimination struct {
	v     int
	scope []int
}

// plan decides the elimination order (greedy: the smallest table next)
// on a copy of the adjacency, and the largest table it builds; it stops
// at the first table over limit.
func (s *solver) plan(limit int64) ([]elimination, bool) {
	adj := make([][]int, len(s.adj))
	for v, a := range s.adj {
		adj[v] = slices.Clone(a)
	}
	h := &varHeap{}
	version := make([]int, len(s.dom))
	for v := range s.dom {
		heap.Push(h, s.item(adj, v, 0))
	}
	done := make([]bool, len(s.dom))
	var order []elimination
	for h.Len() > 0 {
		it := heap.Pop(h).(heapItem)
		if done[it.v] || it.version != version[it.v] {
			continue
		}
		if it.size > limit {
			return nil, false
		}
		s.Largest = max(s.Largest, it.size)
		done[it.v] = true
		order = append(order, elimination{it.v, adj[it.v]})
		for _, u := range adj[it.v] {
			adj[u] = union(without(adj[u], it.v), adj[it.v], u)
		}
		for _, u := range adj[it.v] {
			version[u]++
			heap.Push(h, s.item(adj, u, version[u]))
		}
		adj[it.v] = nil
	}
	return order, true
}

// eliminateAll eliminates the variables in order (plan's, covering every
// variable) on up to GOMAXPROCS goroutines. Each factor, given or made,
// is consumed by the first of its variables in the order (its bucket),
// so an elimination waits only for those whose factors it consumes: the
// eliminations form a forest, and distinct branches run in parallel. The
// tables are those of eliminating one variable after another.
func (s *solver) eliminateAll(order []elimination) {
	if len(order) == 0 {
		return
	}
	at := make([]int, len(s.dom)) // each variable's place in the order
	for t, e := range order {
		at[e.v] = t
	}
	first := func(vars []int) int {
		t := len(order)
		for _, v := range vars {
			t = min(t, at[v])
		}
		return t
	}
	given := make([][]*factor, len(order))
	for _, f := range s.factors {
		if len(f.vars) > 0 {
			t := first(f.vars)
			given[t] = append(given[t], f)
		}
	}
	// next[t] consumes elimination t's factor (-1: none, an empty scope);
	// children[t] are the eliminations whose factors t consumes.
	next := make([]int, len(order))
	children := make([][]int, len(order))
	waiting := make([]atomic.Int32, len(order))
	for t, e := range order {
		next[t] = -1
		if len(e.scope) > 0 {
			next[t] = first(e.scope)
			children[next[t]] = append(children[next[t]], t)
			waiting[next[t]].Add(1)
		}
	}
	made := make([]*factor, len(order))
	s.order = make([]bucket, len(order))
	ready := make(chan int, len(order))
	for t := range order {
		if len(children[t]) == 0 {
			ready <- t
		}
	}
	var done atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(order)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for t := range ready {
				fs := given[t]
				for _, c := range children[t] {
					fs = append(fs, made[c])
				}
				made[t], s.order[t] = s.eliminate(order[t].v, order[t].scope, fs)
				if n := next[t]; n >= 0 && waiting[n].Add(-1) == 0 {
					ready <- n
				}
				if done.Add(1) == int64(len(order)) {
					close(ready)
				}
			}
		}()
	}
	wg.Wait()
}

// eliminate is the factor over scope that is the minimum over v of the
// sum of fs (v's bucket), and the bucket for back-substitution.
func (s *solver) eliminate(v int, scope []int, fs []*factor) (*factor, bucket) {
	nf := &factor{vars: scope, table: make([]int64, s.size(scope))}
	full := append(slices.Clone(scope), v)
	idx := s.indexers(fs, full)
	// off[i] is factor i's entry at the current scope assignment (v at
	// 0), kept up to date as the mixed-radix counter advances.
	off := make([]int, len(fs))
	step := make([]int, len(fs)) // factor i's stride of v
	for i := range fs {
		step[i] = idx[i][len(scope)]
	}
	assign := make([]int, len(scope))
	dv := s.dom[v]
	for e := range nf.table {
		best := int64(math.MaxInt64)
		for x := range dv {
			var c int64
			for i, f := range fs {
				c += f.table[off[i]+x*step[i]]
			}
			best = min(best, c)
		}
		nf.table[e] = best
		for j := len(scope) - 1; j >= 0; j-- {
			assign[j]++
			for i := range fs {
				off[i] += idx[i][j]
			}
			if assign[j] < s.dom[scope[j]] {
				break
			}
			for i := range fs {
				off[i] -= idx[i][j] * assign[j]
			}
			assign[j] = 0
		}
	}
	return nf, bucket{v, fs, full, idx}
}

func (s *solver) size(vars []int) int {
	n := 1
	for _, v := range vars {
		n *= s.dom[v]
	}
	return n
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
		vals := make([]int, len(b.vars))
		for j, u := range b.vars {
			vals[j] = assign[u]
		}
		best, arg := int64(-1), 0
		for x := range s.dom[b.v] {
			vals[len(vals)-1] = x
			if c := sum(b.factors, b.idx, vals); best < 0 || c < best {
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

func (s *solver) item(adj [][]int, v, version int) heapItem {
	n := s.tableSize(adj, v)
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
