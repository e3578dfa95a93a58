package partition

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// hubProblem is a random step-like problem: tensor variables 0..nt-1 and
// node variables after them, a pair factor per (node, tensor) read, every
// node reading the first hubs tensors (tied tensors of time steps) and a
// chain of its own.
func hubProblem(r *rand.Rand, nt, nn, hubs int) (dom []int, factors []*factor) {
	for range nt {
		dom = append(dom, 2+r.IntN(2))
	}
	for range nn {
		dom = append(dom, 2+r.IntN(3))
	}
	pair := func(t, o int) {
		f := &factor{vars: []int{t, o}, table: make([]int64, dom[t]*dom[o])}
		for e := range f.table {
			f.table[e] = r.Int64N(100)
		}
		factors = append(factors, f)
	}
	for o := nt; o < nt+nn; o++ {
		for t := range hubs {
			pair(t, o)
		}
		j := o - nt
		pair(hubs+j%(nt-hubs), o)
		pair(hubs+(j+1)%(nt-hubs), o)
	}
	return dom, factors
}

// TestBlockDescent: on problems whose elimination exceeds the limit, block
// descent never raises the start's total, never beats the exact optimum
// (eliminated without a limit), stops at a point neither block improves,
// and reaches the optimum on most of them.
func TestBlockDescent(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 9))
	const limit = 64
	optimal := 0
	const problems = 20
	for range problems {
		dom, factors := hubProblem(r, 12, 10, 5)
		pos := make([]int, len(dom))
		if _, ok := newSolver(dom, pos, factors).plan(limit); ok {
			t.Fatal("the problem fits under the limit: it does not exercise block descent")
		}
		exact := newSolver(dom, pos, factors)
		if !exact.run(1 << 30) {
			t.Fatal("exact elimination failed")
		}
		opt := total(dom, factors, exact.solution())
		start := make([]int, len(dom))
		hint := 0
		got, largest := blockDescent(dom, pos, 12, factors, slices.Clone(start), limit, &hint)
		if largest > limit {
			t.Errorf("a table of %d entries, over the limit %d", largest, limit)
		}
		c := total(dom, factors, got)
		if c > total(dom, factors, start) || c < opt {
			t.Fatalf("block descent %d, start %d, optimum %d", c, total(dom, factors, start), opt)
		}
		if c == opt {
			optimal++
		}
		// A second descent from the result finds nothing better.
		again, _ := blockDescent(dom, pos, 12, factors, slices.Clone(got), limit, &hint)
		if total(dom, factors, again) != c {
			t.Errorf("not a fixed point: %d, then %d", c, total(dom, factors, again))
		}
	}
	if optimal < problems/2 {
		t.Errorf("block descent reached the optimum on %d of %d problems", optimal, problems)
	}
	t.Logf("optimal on %d of %d", optimal, problems)
}

// TestRestricted: eliminating the free variables with the others fixed
// gives the minimum over every assignment of the free variables.
func TestRestricted(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 2))
	for range 30 {
		dom, factors := hubProblem(r, 5, 4, 2)
		free := make([]bool, len(dom))
		assign := make([]int, len(dom))
		for v := range dom {
			free[v] = r.IntN(2) == 0
			assign[v] = r.IntN(dom[v])
		}
		sv := restricted(dom, make([]int, len(dom)), factors, free, assign)
		if !sv.run(1 << 30) {
			t.Fatal("elimination failed")
		}
		sol := sv.solution()
		got := slices.Clone(assign)
		for v := range dom {
			if free[v] {
				got[v] = sol[v]
			}
		}
		// Brute force over the free variables.
		best := int64(-1)
		cur := slices.Clone(assign)
		var walk func(v int)
		walk = func(v int) {
			if v == len(dom) {
				if c := total(dom, factors, cur); best < 0 || c < best {
					best = c
				}
				return
			}
			if !free[v] {
				walk(v + 1)
				return
			}
			for x := range dom[v] {
				cur[v] = x
				walk(v + 1)
			}
		}
		walk(0)
		if c := total(dom, factors, got); c != best {
			t.Fatalf("restricted elimination %d, brute force %d", c, best)
		}
	}
}
