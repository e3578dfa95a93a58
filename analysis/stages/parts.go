package stages

import (
	"fmt"
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
