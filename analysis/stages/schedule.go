package stages

import (
	"fmt"
	"slices"
)

// Task is a forward or backward pass of one micro-batch on a stage.
type Task struct {
	Micro      int
	Backward   bool
	Start, End float64
}

// plan turns the fit under bound into a scheduled plan: devices the fit
// leaves over go, one at a time, to the stage with the longest time per
// sample while that shortens it; stages get consecutive devices in
// topological order, linked by their dataflow or, with chain, each to
// the next; the 1F1B schedule is simulated. nil: the plan does
// not fit in memory with its micro-batches in flight.
func (p *planner) plan(root *spNode, bound float64, chain bool) (*Plan, error) {
	if !p.fits(root, bound) {
		return nil, nil
	}
	specs := p.memo[root].collect(nil)
	slices.SortStableFunc(specs, func(a, b stageSpec) int { return slices.Min(a.layers) - slices.Min(b.layers) })
	works := make([]Work, len(specs))
	used := 0
	for i, s := range specs {
		works[i] = p.workOfLayers(s.layers)
		used += s.devices
	}
	p.spread(specs, works, p.opt.Devices-used)
	plan := &Plan{MicroBatch: p.micro, MicroBatches: p.count}
	next := 0
	for i, s := range specs {
		st := Stage{Layers: slices.Sorted(slices.Values(s.layers))}
		for range s.devices {
			st.Devices = append(st.Devices, next)
			next++
		}
		ring, err := p.opt.Topology.Ring(st.Devices)
		if err != nil {
			return nil, err
		}
		st.Forward, st.Backward, st.Sync = p.stageTimes(works[i], len(st.Devices), ring)
		st.TimePerSample = (float64(p.count)*(st.Forward+st.Backward) + st.Sync) / float64(p.ls.Batch)
		plan.Stages = append(plan.Stages, st)
	}
	flows := p.flows(plan, chain)
	p.link(plan, flows)
	for i := range plan.Stages {
		st := &plan.Stages[i]
		st.MemoryBytes = p.memoryOf(works[i], len(st.Devices), st.InFlight)
		if st.MemoryBytes > p.memory {
			return nil, nil
		}
	}
	if err := p.simulate(plan, flows); err != nil {
		return nil, err
	}
	return plan, nil
}

// spread gives spare devices to the slowest stage while some number of
// them shortens it (one more device may not: ⌈micro-batch / devices⌉
// can stay the same).
func (p *planner) spread(specs []stageSpec, works []Work, spare int) {
	for spare > 0 {
		worst := 0
		for i := range specs {
			if p.busy(works[i], specs[i].devices) > p.busy(works[worst], specs[worst].devices) {
				worst = i
			}
		}
		now := p.busy(works[worst], specs[worst].devices)
		more := 1
		for more <= spare && p.busy(works[worst], specs[worst].devices+more) >= now {
			more++
		}
		if more > spare {
			return
		}
		specs[worst].devices += more
		spare -= more
	}
}

// flows are the bytes per sample each stage sends another: each value
// once to each other stage that reads it or, when the stages form a
// chain (a sequential pipeline), once along every hop from its stage to
// the last that reads it, the stages between passing it on.
func (p *planner) flows(plan *Plan, chain bool) map[[2]int]float64 {
	stageOf := map[int]int{}
	for i, s := range plan.Stages {
		for _, v := range s.Layers {
			stageOf[v] = i
		}
	}
	out := map[[2]int]float64{}
	for _, send := range p.ls.Sends {
		from, last := stageOf[send.From], stageOf[send.From]
		var to []int
		for _, l := range send.To {
			if t := stageOf[l]; t != from && !slices.Contains(to, t) {
				to = append(to, t)
				last = max(last, t)
			}
		}
		if chain {
			for i := from; i < last; i++ {
				out[[2]int{i, i + 1}] += send.PerSample
			}
			continue
		}
		for _, t := range to {
			out[[2]int{from, t}] += send.PerSample
		}
	}
	return out
}

// link adds the stage graph's edges (the flows) and each stage's
// micro-batches in flight: the stages on the longest path from it to a
// last stage.
func (p *planner) link(plan *Plan, flows map[[2]int]float64) {
	for e := range flows {
		plan.Stages[e[0]].Succ = append(plan.Stages[e[0]].Succ, e[1])
	}
	for i := len(plan.Stages) - 1; i >= 0; i-- { // stages are in topological order
		st := &plan.Stages[i]
		slices.Sort(st.Succ)
		depth := 0
		for _, t := range st.Succ {
			depth = max(depth, plan.Stages[t].InFlight)
		}
		st.InFlight = min(depth+1, p.count)
	}
}

// simulate runs the plan's 1F1B schedule: each stage runs its first
// InFlight forward passes, then alternates a backward and a forward
// pass, then the backward passes left; a forward pass waits for the
// micro-batch's forward passes on the stages feeding it and its
// transfer, a backward pass for its own forward pass and the backward
// passes of the stages it feeds and their transfer. A stage's transfers
// overlap its passes. The step ends when the last stage has run its
// passes, all-reduced its gradients and updated its parameters.
func (p *planner) simulate(plan *Plan, flows map[[2]int]float64) error {
	n, m := len(plan.Stages), plan.MicroBatches
	preds := make([][]int, n)
	for i, s := range plan.Stages {
		for _, t := range s.Succ {
			preds[t] = append(preds[t], i)
		}
	}
	transfer, err := p.transfers(plan, flows)
	if err != nil {
		return err
	}
	order := make([][]Task, n)
	for i, s := range plan.Stages {
		order[i] = oneFOneB(m, s.InFlight)
	}
	fwdEnd, bwdEnd := doneTimes(n, m), doneTimes(n, m)
	next, free := make([]int, n), make([]float64, n)
	for remaining := 2 * n * m; remaining > 0; {
		progressed := false
		for i := range n {
			for next[i] < len(order[i]) {
				t := &order[i][next[i]]
				ready, ok := readyAt(i, t, preds[i], plan.Stages[i].Succ, fwdEnd, bwdEnd, transfer)
				if !ok {
					break
				}
				st := &plan.Stages[i]
				t.Start = max(free[i], ready)
				if t.Backward {
					t.End = t.Start + st.Backward
					bwdEnd[i][t.Micro] = t.End
				} else {
					t.End = t.Start + st.Forward
					fwdEnd[i][t.Micro] = t.End
				}
				free[i] = t.End
				next[i]++
				remaining--
				progressed = true
			}
		}
		if !progressed {
			return fmt.Errorf("the pipeline schedule deadlocks (a planner bug)")
		}
	}
	busy, devices := 0.0, 0
	for i, s := range plan.Stages {
		plan.Seconds = max(plan.Seconds, free[i]+s.Sync)
		busy += float64(len(s.Devices)) * (float64(m)*(s.Forward+s.Backward) + s.Sync)
		devices += len(s.Devices)
	}
	plan.Bubble = max(0, 1-busy/(float64(devices)*plan.Seconds)) // not below 0 by rounding
	plan.Schedule = order
	return nil
}

// readyAt is when task t of stage i may start; ok false while a pass it
// waits for has not been simulated.
func readyAt(i int, t *Task, preds, succs []int, fwdEnd, bwdEnd [][]float64, transfer map[[2]int]float64) (float64, bool) {
	at := 0.0
	if !t.Backward {
		for _, q := range preds {
			if fwdEnd[q][t.Micro] < 0 {
				return 0, false
			}
			at = max(at, fwdEnd[q][t.Micro]+transfer[[2]int{q, i}])
		}
		return at, true
	}
	if fwdEnd[i][t.Micro] < 0 {
		return 0, false
	}
	at = fwdEnd[i][t.Micro]
	for _, s := range succs {
		if bwdEnd[s][t.Micro] < 0 {
			return 0, false
		}
		at = max(at, bwdEnd[s][t.Micro]+transfer[[2]int{i, s}])
	}
	return at, true
}

// transfers are the seconds a micro-batch's flows take from one stage
// to the next (and their gradients back): the bytes over the slowest
// link between the groups, the smaller group's devices sending in
// parallel.
func (p *planner) transfers(plan *Plan, flows map[[2]int]float64) (map[[2]int]float64, error) {
	out := map[[2]int]float64{}
	for e, perSample := range flows {
		from, to := plan.Stages[e[0]].Devices, plan.Stages[e[1]].Devices
		l, err := p.opt.Topology.Between(from, to)
		if err != nil {
			return nil, err
		}
		out[e] = perSample*float64(plan.MicroBatch)/(l.Bandwidth*float64(min(len(from), len(to)))) + l.Latency
	}
	return out, nil
}

// oneFOneB is a stage's pass order: warm-up forward passes, then one
// backward and one forward in turn, then the backward passes left.
func oneFOneB(m, warm int) []Task {
	var out []Task
	f, b := 0, 0
	for ; f < warm; f++ {
		out = append(out, Task{Micro: f})
	}
	for b < m {
		out = append(out, Task{Micro: b, Backward: true})
		b++
		if f < m {
			out = append(out, Task{Micro: f})
			f++
		}
	}
	return out
}

func doneTimes(n, m int) [][]float64 {
	out := make([][]float64, n)
	for i := range out {
		out[i] = make([]float64, m)
		for j := range out[i] {
			out[i][j] = -1
		}
	}
	return out
}
