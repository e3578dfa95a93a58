package partition

import (
	"fmt"
	"math"

	"tofuc/analysis/cost"
)

// lambdas are the prices of memory (bytes communicated per byte per
// device) a memory-limited search tries, cheapest first.
var lambdas = []float64{1.0 / 16, 1.0 / 4, 1, 4, 16, 64, 256, 1024}

// searchMemory looks for the plan with the least communication within
// opt.Memory per device when the unconstrained plan r0 exceeds it. The
// limit is a maximum over the node order, not a sum of pair factors, so
// it enters the elimination through its Lagrangian: each tensor's tile
// bytes, times a price lambda, are added to the communication. The
// search first tries the plan space without replication (the least
// memory it can reach); when that fits, it bisects over lambdas for the
// smallest price whose plan fits and keeps the cheapest plan that fits
// among all it priced. When even the split plan exceeds the limit it
// returns the plan of least memory, over the limit.
func searchMemory(g *cost.Graph, c *Coarse, devices int, opt Options, r0 *Result) (*Result, error) {
	fits := func(r *Result) bool { return r.Cost.Memory.Peak <= opt.Memory }
	split, err := recursive(g, c, devices, opt, space{ok: allowAll, splitOnly: true}, opt.eliminator(), true)
	if err != nil {
		return nil, err
	}
	split.Memory = "without replication"
	if !fits(split) {
		if r0.Cost.Memory.Peak < split.Cost.Memory.Peak {
			return r0, nil
		}
		return split, nil
	}
	best := split
	lo, hi := 0, len(lambdas)
	for lo < hi {
		mid := (lo + hi) / 2
		r, err := recursive(g, c, devices, opt, space{ok: allowAll, lambda: lambdas[mid]}, opt.eliminator(), true)
		if err != nil {
			return nil, err
		}
		if !fits(r) {
			lo = mid + 1
			continue
		}
		hi = mid
		if r.Cost.CommBytes < best.Cost.CommBytes {
			best = r
			best.Memory = fmt.Sprintf("memory priced at %g bytes communicated per byte", lambdas[mid])
		}
	}
	return best, nil
}

// TradeOffRow is the best plan found within one memory limit.
type TradeOffRow struct {
	Limit  int64
	Result *Result
}

// TradeOff is the best plan at a few memory limits between the plan
// without replication (the least memory) and the unconstrained plan
// (weights replicated where that communicates less): geometric steps
// between their peaks, each row the cheapest plan that fits among the
// plans searched at the prices of memory lambdas[1], [3] and [5], the
// split plan and the given ones (the unconstrained search, the chosen
// plan). Rows are nil where no plan fits.
func TradeOff(g *cost.Graph, devices int, opt Options, known ...*Result) ([]TradeOffRow, error) {
	c := Coarsen(g)
	opt.Memory = 0
	plans := append([]*Result(nil), known...)
	split, err := recursive(g, c, devices, opt, space{ok: allowAll, splitOnly: true}, opt.eliminator(), true)
	if err != nil {
		return nil, err
	}
	plans = append(plans, split)
	for _, l := range []float64{lambdas[1], lambdas[3], lambdas[5]} {
		r, err := recursive(g, c, devices, opt, space{ok: allowAll, lambda: l}, opt.eliminator(), true)
		if err != nil {
			return nil, err
		}
		plans = append(plans, r)
	}
	least, most := split.Cost.Memory.Peak, split.Cost.Memory.Peak
	for _, r := range plans {
		least, most = min(least, r.Cost.Memory.Peak), max(most, r.Cost.Memory.Peak)
	}
	const rows = 5
	var out []TradeOffRow
	for i := range rows {
		limit := int64(float64(least) * math.Pow(float64(most)/float64(least), float64(i)/(rows-1)))
		if i == rows-1 {
			limit = most
		}
		row := TradeOffRow{Limit: limit}
		for _, r := range plans {
			if r.Cost.Memory.Peak <= limit && (row.Result == nil || r.Cost.CommBytes < row.Result.Cost.CommBytes) {
				row.Result = r
			}
		}
		out = append(out, row)
	}
	return out, nil
}

// Choose applies a memory limit per device (0: none) and makes the result
// at least as good as every baseline: the cheapest of the searched plan
// and the baseline plans among those that fit (all of them when none
// fits), a baseline's plan refined (its operators' strategies re-chosen,
// which never costs more). Plans over the limit are never preferred to
// one under it. Result.Chosen says which plan won.
func Choose(g *cost.Graph, searched *Result, baselines map[string]*Result, limit int64) (*Result, error) {
	fits := func(r *Result) bool { return limit == 0 || r.Cost.Memory.Peak <= limit }
	better := func(a, b *Result) bool {
		if fits(a) != fits(b) {
			return fits(a)
		}
		if !fits(a) {
			return a.Cost.Memory.Peak < b.Cost.Memory.Peak
		}
		return a.Cost.CommBytes < b.Cost.CommBytes
	}
	best, from := searched, "search"
	for _, name := range Baselines {
		if b := baselines[name]; b != nil && better(b, best) {
			best, from = b, name
		}
	}
	if from == "search" {
		out := *best
		out.Chosen = "search"
		return &out, nil
	}
	out := *best
	out.Plan = clonePlan(best.Plan)
	if err := refine(g, out.Plan, allowAll); err != nil {
		return nil, err
	}
	cst, err := g.Evaluate(out.Plan)
	if err != nil {
		return nil, err
	}
	out.Cost, out.Seconds, out.Chosen = cst, searched.Seconds, from
	return &out, nil
}

func clonePlan(p *cost.Plan) *cost.Plan {
	out := cost.NewPlan(p.Factors)
	for v, ds := range p.Tensors {
		out.Tensors[v] = append([]int(nil), ds...)
	}
	for n, cs := range p.Ops {
		out.Ops[n] = append([]cost.Choice(nil), cs...)
	}
	return out
}
