package partition

import "math"

// reduced is a min-sum problem with dominated values dropped from the
// domains: a value (a tensor layout, an operator choice) that costs at
// least as much as another value of the same variable whatever the
// other variables (dominates), is never needed by a minimum, and the
// problem over the remaining values has the same minimum. Replication adds a layout to every tensor; for most
// activations it is dominated by a split (an all-gather for nothing), and
// dropping it keeps the elimination's tables as small as before.
type reduced struct {
	dom     []int
	factors []*factor
	// kept[v] lists the original values of v's reduced domain; to[v] maps
	// every original value to a kept one no worse in any factor.
	kept, to [][]int
}

// prune builds the reduced problem.
func prune(dom []int, factors []*factor) *reduced {
	byVar := make([][]*factor, len(dom))
	for _, f := range factors {
		for _, v := range f.vars {
			byVar[v] = append(byVar[v], f)
		}
	}
	r := &reduced{dom: make([]int, len(dom)), kept: make([][]int, len(dom)), to: make([][]int, len(dom))}
	// Each variable's values, then each factor, independently.
	parallel(len(dom), func(v int) {
		n := dom[v]
		r.to[v] = make([]int, n)
		for b := range n {
			r.to[v][b] = b
			for a := range n {
				if a != b && r.to[v][a] == a && dominates(v, a, b, byVar[v], dom) {
					r.to[v][b] = a
					break
				}
			}
			if r.to[v][b] == b {
				r.kept[v] = append(r.kept[v], b)
			}
		}
		r.dom[v] = len(r.kept[v])
		// A value maps to a kept one: follow dominators (they form
		// chains).
		for b := range r.to[v] {
			for r.to[v][b] != r.to[v][r.to[v][b]] {
				r.to[v][b] = r.to[v][r.to[v][b]]
			}
		}
	})
	r.factors = make([]*factor, len(factors))
	parallel(len(factors), func(i int) { r.factors[i] = r.restrict(factors[i], dom) })
	return r
}

// dominates reports whether value a of v can replace b in every
// assignment of the other variables: the most a can cost more than b in
// each factor of v, summed over the factors, is negative, or zero with
// a < b (among equal values the first is kept). A factor-by-factor
// comparison would miss a layout whose memory price (a factor of its
// own) exceeds everything it can save in the others.
func dominates(v, a, b int, fs []*factor, dom []int) bool {
	var worst int64
	for _, f := range fs {
		worst += mostMore(f, v, a, b, dom)
	}
	return worst < 0 || worst == 0 && a < b
}

// mostMore is the largest f(v = a) - f(v = b) over the values of f's
// other variables.
func mostMore(f *factor, v, a, b int, dom []int) int64 {
	vals := make([]int, len(f.vars))
	pos := indexOf(f.vars, v)
	most := int64(math.MinInt64)
	for {
		vals[pos] = a
		ca := f.table[offset(f, vals, dom)]
		vals[pos] = b
		most = max(most, ca-f.table[offset(f, vals, dom)])
		i := len(vals) - 1
		for ; i >= 0; i-- {
			if i == pos {
				continue
			}
			if vals[i]++; vals[i] < dom[f.vars[i]] {
				break
			}
			vals[i] = 0
		}
		if i < 0 {
			return most
		}
	}
}

func offset(f *factor, vals, dom []int) int {
	e := 0
	for i, v := range f.vars {
		e = e*dom[v] + vals[i]
	}
	return e
}

// restrict is f over the kept values.
func (r *reduced) restrict(f *factor, dom []int) *factor {
	nf := &factor{vars: f.vars}
	vals := make([]int, len(f.vars))
	for {
		orig := make([]int, len(vals))
		for i, v := range f.vars {
			orig[i] = r.kept[v][vals[i]]
		}
		nf.table = append(nf.table, f.table[offset(f, orig, dom)])
		i := len(vals) - 1
		for ; i >= 0; i-- {
			if vals[i]++; vals[i] < r.dom[f.vars[i]] {
				break
			}
			vals[i] = 0
		}
		if i < 0 {
			return nf
		}
	}
}

// down maps an assignment of the original problem to the reduced one.
func (r *reduced) down(assign []int) []int {
	out := make([]int, len(assign))
	for v, x := range assign {
		out[v] = indexOf(r.kept[v], r.to[v][x])
	}
	return out
}

// up maps an assignment of the reduced problem back.
func (r *reduced) up(assign []int) []int {
	out := make([]int, len(assign))
	for v, x := range assign {
		out[v] = r.kept[v][x]
	}
	return out
}

func indexOf(xs []int, x int) int {
	for i, y := range xs {
		if y == x {
			return i
		}
	}
	return -1
}
