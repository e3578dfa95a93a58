package stages

import (
	"fmt"
	"math"
	"slices"

	"tofuc/analysis/cost"
	"tofuc/analysis/partition"
	"tofuc/analysis/partition/execution"
)

// Parts are plan p's stages as its execution graph runs them
// (execution.BuildStaged): a stage's nodes are its layers' (of ls, the
// layers p was searched on), partitioned by data parallelism over
// slots, one per micro-batch per device: slot l computes the l-th of
// the stage's micro-batches × devices parts of the batch, on device
// Devices[l mod devices], so that slots l to l + devices − 1 hold one
// micro-batch.
func (p *Plan) Parts(g *cost.Graph, ls *Layers) ([]execution.Part, error) {
	var parts []execution.Part
	for i, s := range p.Stages {
		slots := s.MicroBatches * len(s.Devices)
		plan, err := dataParallel(g, slots)
		if err != nil {
			return nil, fmt.Errorf("stage %d: %w", i, err)
		}
		part := execution.Part{Plan: plan}
		for _, l := range s.Layers {
			part.Nodes = append(part.Nodes, ls.Layers[l].Nodes...)
		}
		slices.Sort(part.Nodes)
		for l := range slots {
			part.Devices = append(part.Devices, s.Devices[l%len(s.Devices)])
		}
		parts = append(parts, part)
	}
	return parts, nil
}

// dataParallel is the data-parallel plan of g over slots (for one slot,
// a plan of no steps: every tensor whole).
func dataParallel(g *cost.Graph, slots int) (*cost.Plan, error) {
	if slots == 1 {
		return cost.NewPlan(nil), nil
	}
	res, err := partition.Baseline(g, "data_parallel", slots, partition.Options{})
	if err != nil {
		return nil, err
	}
	return res.Plan, nil
}

// Order is the order in which the devices of plan p's execution graph
// eg (built from p.Parts over ls) run its units: each stage's passes in
// the simulated schedule's order (1F1B), a pass's operators in graph
// order, the updates after every pass. A plan whose schedule does not
// list a pass (its stages changed after the search) runs every stage's
// forward passes, then its backward passes (GPipe's order).
func (p *Plan) Order(eg *execution.Graph, ls *Layers) ([]execution.Unit, error) {
	stageOf := map[int]int{} // node → stage
	first := make([]int, len(p.Stages))
	slot := 0
	for i, s := range p.Stages {
		for _, l := range s.Layers {
			for _, j := range ls.Layers[l].Nodes {
				stageOf[j] = i
			}
		}
		first[i] = slot
		slot += s.MicroBatches * len(s.Devices)
	}
	starts := p.passStarts()
	return eg.Order(func(u execution.Unit) float64 {
		i := stageOf[u.Node]
		micro := (u.Slot - first[i]) / len(p.Stages[i].Devices)
		switch role := eg.Ops[u.Node][u.Slot].Node.Role; {
		case role == "update":
			return math.Inf(1)
		case forwardRole(eg.Ops[u.Node][u.Slot].Node):
			return starts(i, micro, false)
		}
		return starts(i, micro, true)
	})
}

// passStarts is the start of a stage's pass of a micro-batch in the
// schedule, or where the schedule lacks one, its place in GPipe's order.
func (p *Plan) passStarts() func(stage, micro int, backward bool) float64 {
	start := map[[3]int]float64{}
	complete := len(p.Schedule) == len(p.Stages)
	for i, tasks := range p.Schedule {
		for _, t := range tasks {
			start[[3]int{i, t.Micro, boolInt(t.Backward)}] = t.Start
		}
		complete = complete && len(tasks) == 2*p.Stages[i].MicroBatches
	}
	most := 0
	for _, s := range p.Stages {
		most = max(most, s.MicroBatches)
	}
	return func(stage, micro int, backward bool) float64 {
		if t, ok := start[[3]int{stage, micro, boolInt(backward)}]; ok && complete {
			return t
		}
		if backward {
			return float64(most + micro)
		}
		return float64(micro)
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
