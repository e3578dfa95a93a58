package partition

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"tofuc/analysis/cost"
	"tofuc/lang/ir"
)

// lambdas are the prices of memory (bytes communicated per byte per
// device) a memory-limited search tries, cheapest first: powers of 4
// from 1/4 to 4^8. A weight replicated over 8 devices can save hundreds
// of bytes communicated per byte it takes (an RNN layer's weights read by
// every time step), so the prices that split it are high.
var lambdas = []float64{1.0 / 4, 1, 4, 16, 64, 256, 1024, 4096, 16384, 65536}

// searchMemory looks for the plan with the least communication within
// opt.Memory per device when the unconstrained plan r0 exceeds it. The
// limit is a maximum over the node order, not a sum of pair factors, so
// it enters the elimination through its Lagrangian: each tensor's tile
// bytes, times a price lambda, are added to the communication. The
// search first tries the plan space without replication (the least
// memory it can reach); when that fits, it bisects over lambdas for the
// smallest price whose plan fits, then mixes the cheapest plan that fits
// with the cheaper plan of the next lower price (mixes), and keeps the
// cheapest plan that fits among all it priced. When even the split plan exceeds the limit it
// returns the plan of least memory, over the limit.
func searchMemory(g *cost.Graph, c *Coarse, devices int, opt Options, r0 *Result) (*Result, error) {
	fits := func(r *Result) bool { return r.Cost.Memory.Peak <= opt.Memory }
	split, err := recursive(g, c, devices, opt, space{ok: allowAll, splitOnly: true}, opt.eliminator(), true)
	if err != nil {
		return nil, err
	}
	split.Memory = withoutReplication
	if !fits(split) {
		if r0.Cost.Memory.Peak < split.Cost.Memory.Peak {
			return r0, nil
		}
		return split, nil
	}
	best, over := split, r0
	lo, hi := 0, len(lambdas)
	for lo < hi {
		mid := (lo + hi) / 2
		r, err := recursive(g, c, devices, opt, space{ok: allowAll, lambda: lambdas[mid], weighting: opt.weighting}, opt.eliminator(), true)
		if err != nil {
			return nil, err
		}
		if !fits(r) {
			lo, over = mid+1, r
			continue
		}
		hi = mid
		if r.Cost.CommBytes < best.Cost.CommBytes {
			best = r
			best.Memory = priced(lambdas[mid])
		}
	}
	mixed, err := mixes(g, c, best, over)
	if err != nil {
		return nil, err
	}
	for _, r := range mixed {
		if fits(r) && r.Cost.CommBytes < best.Cost.CommBytes {
			best = r
		}
	}
	return best, nil
}

// tradeOffPrices are the prices of memory TradeOff searches at.
var tradeOffPrices = []float64{lambdas[1], lambdas[3], lambdas[5], lambdas[7], lambdas[9]}

// withoutReplication labels the plan searched without replication.
const withoutReplication = "without replication"

// priced labels a plan searched with memory at price lambda.
func priced(lambda float64) string {
	return fmt.Sprintf("memory priced at %g bytes communicated per byte", lambda)
}

// TradeOffRow is the best plan found within one memory limit.
type TradeOffRow struct {
	Limit  int64
	Result *Result
}

// TradeOff is the best plan at a few memory limits between the plan
// without replication (the least memory) and the unconstrained plan
// (free, searched when nil: weights replicated where that communicates
// less): geometric steps between the least and the most memory of the
// plans, each row the cheapest plan that fits among the plans searched
// at the prices of memory tradeOffPrices, the split plan, the
// unconstrained one and the known ones (the chosen plan). Rows are nil
// where no plan fits.
func TradeOff(g *cost.Graph, devices int, opt Options, free *Result, known ...*Result) ([]TradeOffRow, error) {
	c := Coarsen(g)
	opt.Memory = 0
	split, err := recursive(g, c, devices, opt, space{ok: allowAll, splitOnly: true}, opt.eliminator(), true)
	if err == nil && free == nil {
		free, err = recursive(g, c, devices, opt, space{ok: allowAll}, opt.eliminator(), true)
	}
	if err != nil {
		return nil, err
	}
	split.Memory = withoutReplication
	plans := append([]*Result{free, split}, known...)
	mixed, err := mixes(g, c, split, free)
	if err != nil {
		return nil, err
	}
	plans = append(plans, mixed...)
	for _, l := range tradeOffPrices {
		r, err := recursive(g, c, devices, opt, space{ok: allowAll, lambda: l}, opt.eliminator(), true)
		if err != nil {
			return nil, err
		}
		r.Memory = priced(l)
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
// at least as good as every baseline under the objective (Bytes, or Time:
// the plans must be simulated): the best of the searched plan and the
// baseline plans among those that fit (the one of least memory when none
// fits), a baseline's plan refined (its operators' strategies re-chosen,
// which never communicates more and is simulated again). Plans over the
// limit are never preferred to one under it. Result.Chosen says which
// plan won.
func Choose(g *cost.Graph, searched *Result, baselines map[string]*Result, limit int64, objective string, t *cost.Topology) (*Result, error) {
	fits := func(r *Result) bool { return limit == 0 || r.Cost.Memory.Peak <= limit }
	better := func(a, b *Result) bool {
		if fits(a) != fits(b) {
			return fits(a)
		}
		if !fits(a) {
			return a.Cost.Memory.Peak < b.Cost.Memory.Peak
		}
		return score(a, objective) < score(b, objective)
	}
	best, from := searched, "search"
	for _, name := range Baselines {
		if b := baselines[name]; b != nil && better(b, best) {
			best, from = b, name
		}
	}
	out := *best
	out.Chosen = from
	if from == "search" {
		return &out, nil
	}
	out.Plan = clonePlan(best.Plan)
	if err := refine(g, out.Plan, allowAll); err != nil {
		return nil, err
	}
	cst, err := g.Evaluate(out.Plan)
	if err != nil {
		return nil, err
	}
	out.Cost, out.Seconds = cst, searched.Seconds
	if best.Sim != nil {
		if err := Simulate(g, &out, t); err != nil {
			return nil, err
		}
		if objective == Time && out.Sim.Seconds > best.Sim.Seconds {
			out.Plan, out.Cost, out.Sim = best.Plan, best.Cost, best.Sim // fewer bytes, not faster
		}
	}
	return &out, nil
}

func clonePlan(p *cost.Plan) *cost.Plan {
	out := cost.NewPlan(slices.Clone(p.Factors))
	for v, ds := range p.Tensors {
		out.Tensors[v] = append([]int(nil), ds...)
	}
	for n, cs := range p.Ops {
		out.Ops[n] = append([]cost.Choice(nil), cs...)
	}
	return out
}

// mixes are plans between a plan that fits (low) and a cheaper one that
// may not (high): units — a parameter with its gradients and the tensors
// tied to them — are taken from high into low one at a time, in order of
// the bytes each saves per byte of memory it adds on its own, each
// prefix one plan (the operators touching a unit re-choose their
// strategies). Lagrangian prices move every layer of an RNN at once
// (their prices are alike); the prefixes are the plans in between.
func mixes(g *cost.Graph, c *Coarse, low, high *Result) ([]*Result, error) {
	units := paramUnits(g, c)
	type gain struct {
		unit  []*ir.Value
		ratio float64
	}
	var gains []gain
	for _, u := range units {
		r, err := adopt(g, low.Plan, high.Plan, u)
		if err != nil || r.Cost.CommBytes >= low.Cost.CommBytes {
			continue // it saves nothing on its own
		}
		added := float64(max(1, r.Cost.Memory.Peak-low.Cost.Memory.Peak))
		gains = append(gains, gain{u, float64(low.Cost.CommBytes-r.Cost.CommBytes) / added})
	}
	slices.SortStableFunc(gains, func(a, b gain) int { return cmp.Compare(b.ratio, a.ratio) })
	var out []*Result
	cur := low
	for _, gn := range gains {
		r, err := adopt(g, cur.Plan, high.Plan, gn.unit)
		if err != nil {
			continue
		}
		r.Memory = "mixed: weights taken one by one from the cheaper plan"
		out = append(out, r)
		cur = r
	}
	return out, nil
}

// paramUnits groups each parameter with the tensors of its gradient group
// and the tensors tied to any of them, largest parameter first.
func paramUnits(g *cost.Graph, c *Coarse) [][]*ir.Value {
	var out [][]*ir.Value
	for _, p := range g.IR.Params {
		var u []*ir.Value
		for _, v := range g.Tensors() {
			if c.TensorGroup[v] == c.TensorGroup[p.Value] || c.tensorVar[v] == c.tensorVar[p.Value] {
				u = append(u, v)
			}
		}
		out = append(out, u)
	}
	slices.SortStableFunc(out, func(a, b []*ir.Value) int { return cmp.Compare(g.Bytes(b[0]), g.Bytes(a[0])) })
	return out
}

// adopt is plan p with the unit's tensors laid out as in q, every tensor
// tied to them too, and the operators touching them re-chosen.
func adopt(g *cost.Graph, p, q *cost.Plan, unit []*ir.Value) (*Result, error) {
	next := clonePlan(p)
	moved := map[*ir.Value]bool{}
	for _, v := range unit {
		next.Tensors[v] = slices.Clone(q.Tensors[v])
		moved[v] = true
	}
	var nodes []*ir.Node
	for _, n := range g.IR.Nodes {
		for _, v := range append(slices.Clone(n.Inputs), n.Outputs...) {
			if moved[v] {
				nodes = append(nodes, n)
				break
			}
		}
	}
	if err := Rechoose(g, next, nodes); err != nil {
		return nil, err
	}
	cst, err := g.Evaluate(next)
	if err != nil {
		return nil, err
	}
	return &Result{Plan: next, Cost: cst}, nil
}
