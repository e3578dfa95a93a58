package partition

import (
	"slices"
	"time"

	"tofuc/analysis/cost"
	"tofuc/lang/ir"
)

// SearchTime is the search under the time objective: Search under each
// of timeFactorisations (opt.Factors alone when given) and, on a
// training graph, each of timeWeightings, every plan simulated on
// topology t; the fastest, within the memory limit where one fits, is
// the search's plan (ties to the earlier candidate: Tofu's
// factorisation, bytes alike). Its Weighting and Candidates say how it
// was found, its Seconds are the whole search's; opt.Progress is told
// when each candidate starts.
//
// One search in bytes cannot see what the simulator does
// (docs/partition.md, "The search under the time objective"): a
// recursion of several steps sends each step's bytes over that step's
// links while one step over all devices uses them all at once, and
// gradients' all-reduces overlap the backward pass while activations'
// transfers hold up the operators that wait for them. On the
// Transformer over NVLink the plan in bytes took 1.188 ms, data
// parallelism 1.098.
func SearchTime(g *cost.Graph, devices int, opt Options, t *cost.Topology) (*Result, error) {
	start := time.Now()
	factorisations := [][]int{opt.Factors}
	if opt.Factors == nil {
		factorisations = timeFactorisations(devices)
	}
	weightings := []weighting{{}}
	if training(g) {
		weightings = timeWeightings
	}
	var best *Result
	total := len(factorisations) * len(weightings)
	for i, f := range factorisations {
		for j, w := range weightings {
			if opt.Progress != nil {
				opt.Progress(i*len(weightings)+j+1, total)
			}
			o := opt
			o.Factors, o.weighting, o.Progress = f, w, nil
			r, err := Search(g, devices, o)
			if err != nil {
				return nil, err
			}
			if err := Simulate(g, r, t); err != nil {
				return nil, err
			}
			r.Weighting = w.String()
			if best == nil || faster(r, best, opt.Memory) {
				best = r
			}
		}
	}
	best.Candidates = total
	best.Seconds = time.Since(start).Seconds()
	return best, nil
}

// timeWeightings are the weightings SearchTime searches a training
// graph with: bytes alike, overlapping bytes at a quarter, and free.
var timeWeightings = []weighting{{}, {on: true, overlapped: weightScale / 4}, {on: true}}

// faster reports whether simulated plan a beats b under memory limit
// (0: none): fitting first, then the step time, and of two plans over
// the limit the one of less memory.
func faster(a, b *Result, limit int64) bool {
	fits := func(r *Result) bool { return limit == 0 || r.Cost.Memory.Peak <= limit }
	switch {
	case fits(a) != fits(b):
		return fits(a)
	case !fits(a):
		return a.Cost.Memory.Peak < b.Cost.Memory.Peak
	}
	return a.Sim.Seconds < b.Sim.Seconds
}

// timeFactorisations are the recursions SearchTime tries over n
// devices: Tofu's prime factors, largest first; one step of all n; and
// between them, where n has three prime factors or more, n/p then p for
// its smallest prime p.
func timeFactorisations(n int) [][]int {
	primes := Factorise(n)
	out := [][]int{primes}
	if len(primes) > 2 {
		p := primes[len(primes)-1]
		out = append(out, []int{n / p, p})
	}
	if len(primes) > 1 {
		out = append(out, []int{n})
	}
	return out
}

// training reports whether g is a training graph: it updates parameters.
func training(g *cost.Graph) bool {
	return slices.ContainsFunc(g.IR.Nodes, func(n *ir.Node) bool { return n.Role == "update" })
}
