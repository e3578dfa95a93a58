package partition

import (
	"fmt"
	"slices"

	"tofuc/analysis/cost"
)

// Outcome is what tofuc partition reports: the search's plan, the
// baselines, the plan chosen among them, the memory trade-off and, with
// the time objective, the refinement.
type Outcome struct {
	Searched  *Result // the search's own plan, within the memory limit if it can
	Best      *Result // the chosen plan (Choose, then RefineTime with the time objective)
	Baselines map[string]*Result
	TradeOff  []TradeOffRow
	MCMC      *MCMC // nil with the bytes objective
	Topology  *cost.Topology
	Objective string
}

// Run searches (SearchTime with the time objective), runs the
// baselines, simulates every plan on the topology,
// chooses the best under the objective and the memory limit (Choose),
// refines it by MCMC with the time objective, and, when tradeOff, adds
// the memory trade-off table.
func Run(g *cost.Graph, devices int, opt Options, tradeOff bool) (*Outcome, error) {
	out := &Outcome{Baselines: map[string]*Result{}, Topology: opt.Topology, Objective: opt.Objective}
	if out.Topology == nil {
		out.Topology = cost.Topologies[DefaultTopology(devices)]
	}
	if out.Objective == "" {
		out.Objective = Time
	}
	if len(out.Topology.Devices) < devices { // every plan is simulated: say so before searching
		return nil, fmt.Errorf("the topology %q has %d devices, fewer than the %d to plan for: no built-in topology has more (tofuc partition --topology FILE takes a machine of your own; tofuc compile, eval and bench plan for at most 32 devices)", out.Topology.Name, len(out.Topology.Devices), devices)
	}
	var err error
	if out.Objective == Time {
		out.Searched, err = SearchTime(g, devices, opt, out.Topology)
	} else {
		out.Searched, err = Search(g, devices, opt)
	}
	if err != nil {
		return nil, err
	}
	base := opt
	base.Progress = nil
	for _, b := range Baselines {
		if out.Baselines[b], err = Baseline(g, b, devices, base); err != nil {
			return nil, fmt.Errorf("baseline %s: %w", b, err)
		}
	}
	for _, r := range append([]*Result{out.Searched}, out.baselineList()...) {
		if err := Simulate(g, r, out.Topology); err != nil {
			return nil, err
		}
	}
	if out.Best, err = Choose(g, out.Searched, out.Baselines, opt.Memory, out.Objective, out.Topology); err != nil {
		return nil, err
	}
	if out.Objective == Time {
		steps := opt.MCMCSteps
		if steps == 0 {
			steps = DefaultMCMCSteps
		}
		if out.Best, out.MCMC, err = RefineTime(g, out.Best, out.Topology, opt.Memory, opt.Seed, steps); err != nil {
			return nil, err
		}
	}
	if tradeOff {
		var free *Result
		if out.Searched.Memory == "" && out.Searched.Weighting == "" && slices.Equal(out.Searched.Plan.Factors, factorsOf(devices, opt)) {
			free = out.Searched // the unconstrained plan in bytes fitted
		}
		if out.TradeOff, err = TradeOff(g, devices, base, free, out.Best); err != nil {
			return nil, err
		}
		for _, row := range out.TradeOff {
			if row.Result != nil && row.Result.Sim == nil {
				if err := Simulate(g, row.Result, out.Topology); err != nil {
					return nil, err
				}
			}
		}
	}
	return out, nil
}

func (o *Outcome) baselineList() []*Result {
	var out []*Result
	for _, b := range Baselines {
		out = append(out, o.Baselines[b])
	}
	return out
}

// DefaultTopology is the profile plans of this many devices are
// simulated on by default: the first of defaultTopologies with as many
// devices (the last where none has: the simulation then says it has too
// few).
func DefaultTopology(devices int) string {
	for _, name := range defaultTopologies {
		if len(cost.Topologies[name].Devices) >= devices {
			return name
		}
	}
	return defaultTopologies[len(defaultTopologies)-1]
}

// defaultTopologies are one NVLink machine, then two and four of them
// over InfiniBand.
var defaultTopologies = []string{"h100-nvlink", "h100-2x8-ib", "h100-4x8-ib"}

// factorsOf is the recursion a search of opt over devices takes:
// opt.Factors, or Factorise's.
func factorsOf(devices int, opt Options) []int {
	if opt.Factors != nil {
		return opt.Factors
	}
	return Factorise(devices)
}
