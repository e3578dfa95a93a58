package partition

import (
	"cmp"
	"math"
	"slices"
)

// blockDescent improves an assignment of a step whose elimination would
// exceed the table limit, by exact elimination over two blocks of
// variables in turn, the other block fixed:
//
//   - the hubs: the tensor variables with the most factors (the tied
//     tensors of weight-sharing time steps, read by every step), taken
//     in that order until eliminating everything else with them fixed
//     fits under the limit;
//   - block A: every variable but the hubs (with the hubs fixed the
//     time steps fall apart into chains: exact);
//   - block B: the hubs and the node variables next to them, the other
//     tensors fixed (the hubs of one layer are eliminated together:
//     Tofu's brute force inside a coalesced group).
//
// Each block's solution is the exact minimum over it given the rest, so
// the total never rises; the descent stops when a round lowers nothing.
// It returns assign unchanged when no choice of hubs makes block A fit.
func blockDescent(dom, pos []int, nTensor int, factors []*factor, assign []int, limit int64, hint *int) ([]int, int64) {
	hubs, orderA, largest, ok := chooseHubs(dom, pos, nTensor, factors, limit, hint)
	if !ok {
		return assign, 0
	}
	inHub := make([]bool, len(dom))
	for _, v := range hubs {
		inHub[v] = true
	}
	blockA := make([]bool, len(dom))
	blockB := make([]bool, len(dom))
	for v := range dom {
		blockA[v] = !inHub[v]
		blockB[v] = inHub[v]
	}
	for _, f := range factors {
		if slices.ContainsFunc(f.vars, func(v int) bool { return inHub[v] }) {
			for _, v := range f.vars {
				if v >= nTensor {
					blockB[v] = true
				}
			}
		}
	}
	// Block B may not fit (hubs joined by many nodes): then the hubs
	// alone, independent of each other once the nodes are fixed.
	sb := structure(dom, pos, factors, blockB)
	orderB, fits := sb.plan(limit)
	if !fits {
		blockB = inHub
		sb = structure(dom, pos, factors, blockB)
		orderB, _ = sb.plan(math.MaxInt64)
	}
	largest = max(largest, sb.Largest)
	cur := total(dom, factors, assign)
	for {
		next := slices.Clone(assign)
		for _, b := range []struct {
			free  []bool
			order []elimination
		}{{blockA, orderA}, {blockB, orderB}} {
			sv := restricted(dom, pos, factors, b.free, next)
			sv.eliminateAll(b.order)
			sol := sv.solution()
			for v, in := range b.free {
				if in {
					next[v] = sol[v]
				}
			}
		}
		c := total(dom, factors, next)
		if c >= cur {
			return assign, largest
		}
		assign, cur = next, c
	}
}

// chooseHubs takes tensor variables by decreasing number of factors
// (ties by place, then id) until the rest fits: first the number that
// fitted last time (hint, 0 at first; the steps of a search share their
// structure), then doubling from it or halving to the fewest that fit.
// It returns the hubs, the elimination order of the rest and its largest
// table.
func chooseHubs(dom, pos []int, nTensor int, factors []*factor, limit int64, hint *int) ([]int, []elimination, int64, bool) {
	degree := make([]int, nTensor)
	for _, f := range factors {
		for _, v := range f.vars {
			if v < nTensor {
				degree[v]++
			}
		}
	}
	order := make([]int, nTensor)
	for v := range order {
		order[v] = v
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return cmp.Or(cmp.Compare(degree[b], degree[a]), cmp.Compare(pos[a], pos[b]))
	})
	type result struct {
		order   []elimination
		largest int64
		ok      bool
	}
	try := func(n int) result {
		free := make([]bool, len(dom))
		for v := range free {
			free[v] = true
		}
		for _, v := range order[:n] {
			free[v] = false
		}
		sv := structure(dom, pos, factors, free)
		elim, ok := sv.plan(limit)
		return result{elim, sv.Largest, ok}
	}
	// Tries run two at a time: the one the search needs beside the one
	// it needs next if that fits (n/2), or does not (2n); the same
	// choice, in about half the time on two cores.
	tried := map[int]result{}
	get := func(n, next int) result {
		if _, ok := tried[n]; !ok {
			ns := []int{n}
			if _, ok := tried[next]; !ok && next != n && next >= 1 {
				ns = append(ns, next)
			}
			rs := make([]result, len(ns))
			parallel(len(ns), func(i int) { rs[i] = try(ns[i]) })
			for i, m := range ns {
				tried[m] = rs[i]
			}
		}
		return tried[n]
	}
	n := min(max(*hint, 1), nTensor)
	next := n / 2 // the hint usually fits
	if n == 1 {
		next = min(2, nTensor)
	}
	r := get(n, next)
	if r.ok {
		for n > 1 {
			smaller := get(n/2, n/4)
			if !smaller.ok {
				break
			}
			n, r = n/2, smaller
		}
	} else {
		for !r.ok {
			if n == nTensor {
				return nil, nil, 0, false
			}
			n = min(2*n, nTensor)
			r = get(n, min(2*n, nTensor))
		}
	}
	*hint = n
	return order[:n], r.order, r.largest, true
}

// structure is a solver over the variables in free with the factors'
// variables but no tables: enough to plan an elimination.
func structure(dom, pos []int, factors []*factor, free []bool) *solver {
	var out []*factor
	for _, f := range factors {
		if vars := freeVars(f, free); len(vars) > 0 {
			out = append(out, &factor{vars: vars})
		}
	}
	return newSolver(freeDomains(dom, free), pos, out)
}

// freeDomains keeps the domains of the free variables; the others have
// one value.
func freeDomains(dom []int, free []bool) []int {
	rdom := make([]int, len(dom))
	for v := range dom {
		rdom[v] = 1
		if free[v] {
			rdom[v] = dom[v]
		}
	}
	return rdom
}

// freeVars are f's variables that are free.
func freeVars(f *factor, free []bool) []int {
	var vars []int
	for _, v := range f.vars {
		if free[v] {
			vars = append(vars, v)
		}
	}
	return vars
}

// restricted is the solver of the factors over the variables in free,
// the others fixed at assign: a factor's table is sliced at the fixed
// values, and fixed variables get a domain of one value.
func restricted(dom, pos []int, factors []*factor, free []bool, assign []int) *solver {
	rdom := freeDomains(dom, free)
	var out []*factor
	for _, f := range factors {
		vars := freeVars(f, free)
		if len(vars) == 0 {
			continue
		}
		if len(vars) == len(f.vars) {
			out = append(out, &factor{vars: f.vars, table: f.table})
			continue
		}
		nf := &factor{vars: vars, table: make([]int64, 0, len(f.table))}
		// Enumerate the free variables' values (last fastest) and read
		// f at them with the fixed ones at assign.
		vals := make([]int, len(f.vars))
		for i, v := range f.vars {
			if !free[v] {
				vals[i] = assign[v]
			}
		}
		for {
			e := 0
			for i, v := range f.vars {
				e = e*dom[v] + vals[i]
			}
			nf.table = append(nf.table, f.table[e])
			i := len(f.vars) - 1
			for ; i >= 0; i-- {
				if !free[f.vars[i]] {
					continue
				}
				vals[i]++
				if vals[i] < dom[f.vars[i]] {
					break
				}
				vals[i] = 0
			}
			if i < 0 {
				break
			}
		}
		out = append(out, nf)
	}
	return newSolver(rdom, pos, out)
}
