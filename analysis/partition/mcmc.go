package partition

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"tofuc/analysis/cost"
	"tofuc/lang/ir"
)

// Objectives a search can minimise.
const (
	Bytes = "bytes" // bytes communicated per step
	Time  = "time"  // simulated seconds per step on a topology
)

// DefaultMCMCSteps is the number of proposals of the time refinement,
// DefaultSeed the seed of their random choices (tofuc partition's and
// compile's).
const (
	DefaultMCMCSteps        = 200
	DefaultSeed      uint64 = 1
)

// Simulate sets r.Sim: r's plan simulated on t.
func Simulate(g *cost.Graph, r *Result, t *cost.Topology) error {
	sim, err := g.Simulate(r.Plan, t)
	if err != nil {
		return err
	}
	r.Sim = sim
	return nil
}

// score is r's value under the objective (lower is better).
func score(r *Result, objective string) float64 {
	if objective == Time {
		return r.Sim.Seconds
	}
	return float64(r.Cost.CommBytes)
}

// MCMC says what the time refinement did.
type MCMC struct {
	Seed            uint64
	Steps, Accepted int
	// Before and After are the simulated seconds per step.
	Before, After float64
}

// RefineTime improves a plan's simulated step time on t by a Markov chain
// over the tensors' layouts (FlexFlow §5, from the best plan found): each
// proposal changes one tied class of tensors at one step to another
// layout (later steps kept where the tiles allow, else replicated), the
// operators that read or write them taking their cheapest choices for
// the new layouts; it is accepted when it is faster, or with probability
// exp(-Δ/(0.05·t)) when it is slower by Δ from t seconds (Metropolis),
// never when it exceeds the memory limit. The fastest plan seen is
// returned; it is never slower than r's. Random choices come from seed.
// Each proposal is priced and simulated as a delta to those before
// (cost.Delta).
func RefineTime(g *cost.Graph, r *Result, t *cost.Topology, memory int64, seed uint64, steps int) (*Result, *MCMC, error) {
	return refineTime(g, r, g.NewDelta(t), memory, seed, steps)
}

// A pricer prices and simulates plans: a cost.Delta, or a test's.
type pricer interface {
	// Price prices and simulates p; changed lists the nodes whose
	// choices or tensors' layouts may differ from the plan priced last
	// (nil: any may).
	Price(p *cost.Plan, changed []*ir.Node) (*cost.Cost, *cost.Simulation, error)
}

// refineTime is RefineTime, each proposal priced and simulated by price.
func refineTime(g *cost.Graph, r *Result, price pricer, memory int64, seed uint64, steps int) (*Result, *MCMC, error) {
	c := Coarsen(g)
	classes := make([][]*ir.Value, c.nTensor)
	for _, v := range g.Tensors() {
		classes[c.tensorVar[v]] = append(classes[c.tensorVar[v]], v)
	}
	touches := map[*ir.Value][]*ir.Node{}
	for _, n := range g.IR.Nodes {
		for _, v := range append(slices.Clone(n.Inputs), n.Outputs...) {
			touches[v] = append(touches[v], n)
		}
	}
	if len(classes) == 0 || len(r.Plan.Factors) == 0 {
		return r, &MCMC{Seed: seed, Before: r.Sim.Seconds, After: r.Sim.Seconds}, nil // nothing to move
	}
	rng := rand.New(rand.NewPCG(seed, 0x70f0))
	cur := *r
	cur.Plan = clonePlan(r.Plan) // proposals change it in place
	best := r
	stats := &MCMC{Seed: seed, Steps: steps, Before: r.Sim.Seconds, After: r.Sim.Seconds}
	var stale []*ir.Node // nodes undone since the plan priced last
	for range steps {
		mv, err := propose(g, cur.Plan, classes[rng.IntN(len(classes))], touches, rng)
		if err != nil {
			continue // no other layout, or no choices suit it
		}
		cand, err := evaluate(cur.Plan, price, append(stale, mv.nodes...))
		stale = nil
		if err != nil || memory > 0 && cand.Cost.Memory.Peak > memory {
			mv.undo(cur.Plan)
			stale = mv.nodes
			continue
		}
		delta := cand.Sim.Seconds - cur.Sim.Seconds
		if delta > 0 && rng.Float64() >= math.Exp(-delta/(0.05*cur.Sim.Seconds)) {
			mv.undo(cur.Plan)
			stale = mv.nodes
			continue
		}
		stats.Accepted++
		cur.Cost, cur.Sim = cand.Cost, cand.Sim
		if cand.Sim.Seconds < best.Sim.Seconds {
			b := *r
			b.Plan, b.Cost, b.Sim = clonePlan(cur.Plan), cand.Cost, cand.Sim
			best = &b
		}
	}
	stats.After = best.Sim.Seconds
	return best, stats, nil
}

// propose changes the class's layout at a random step, in p, and
// re-chooses the operators that touch it; the move undoes it.
func propose(g *cost.Graph, p *cost.Plan, class []*ir.Value, touches map[*ir.Value][]*ir.Node, rng *rand.Rand) (*move, error) {
	v := class[0]
	i := rng.IntN(len(p.Factors))
	tile := cost.TileShape(g.Shapes[v], p.Tensors[v][:i], p.Factors)
	var other []int
	for _, d := range g.Layouts(v, tile, p.Factors[i]) {
		if d != p.Tensors[v][i] {
			other = append(other, d)
		}
	}
	if len(other) == 0 {
		return nil, fmt.Errorf("no other layout")
	}
	layouts := slices.Clone(p.Tensors[v])
	layouts[i] = other[rng.IntN(len(other))]
	for j := i + 1; j < len(p.Factors); j++ {
		t := cost.TileShape(g.Shapes[v], layouts[:j], p.Factors)
		if !slices.Contains(g.Layouts(v, t, p.Factors[j]), layouts[j]) {
			layouts[j] = cost.Replicated
		}
	}
	mv := &move{tensors: map[*ir.Value][]int{}, ops: map[*ir.Node][]cost.Choice{}}
	for _, u := range class {
		mv.tensors[u] = p.Tensors[u]
		p.Tensors[u] = slices.Clone(layouts)
		for _, n := range touches[u] {
			if _, seen := mv.ops[n]; !seen {
				mv.ops[n] = p.Ops[n]
				mv.nodes = append(mv.nodes, n)
			}
		}
	}
	if err := Rechoose(g, p, mv.nodes); err != nil {
		mv.undo(p)
		return nil, err
	}
	return mv, nil
}

// move is what a proposal replaced: layouts and choices, to undo it,
// and the nodes whose choices or tensors it changed.
type move struct {
	tensors map[*ir.Value][]int
	ops     map[*ir.Node][]cost.Choice
	nodes   []*ir.Node
}

func (m *move) undo(p *cost.Plan) {
	for v, l := range m.tensors {
		p.Tensors[v] = l
	}
	for n, c := range m.ops {
		p.Ops[n] = c
	}
}

// evaluate prices and simulates a plan.
func evaluate(p *cost.Plan, price pricer, changed []*ir.Node) (*Result, error) {
	c, sim, err := price.Price(p, changed)
	if err != nil {
		return nil, err
	}
	return &Result{Plan: p, Cost: c, Sim: sim}, nil
}
