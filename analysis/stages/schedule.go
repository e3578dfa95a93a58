package stages

import (
	"errors"
	"slices"
)

// Task is a forward or backward pass of one micro-batch on a stage.
type Task struct {
	Micro      int
	Backward   bool
	Start, End float64
}

// plan turns the fit under bound into a scheduled plan: devices the fit
// leaves over go to the slowest stage while that shortens it (spread);
// stages get consecutive devices in
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
	for _, s := range specs {
		st := Stage{Layers: slices.Sorted(slices.Values(s.layers)), MicroBatch: p.micro}
		for range s.devices {
			st.Devices = append(st.Devices, next)
			next++
		}
		plan.Stages = append(plan.Stages, st)
	}
	flows := p.flows(plan, chain)
	p.edges(plan, flows)
	if ok, err := p.reschedule(plan, works, flows); !ok || err != nil {
		return nil, err
	}
	return plan, nil
}

// reschedule prices each stage at its micro-batch size, counts its
// micro-batches in flight, checks its memory and simulates the plan;
// false where a stage does not fit in memory.
func (p *planner) reschedule(plan *Plan, works []Work, flows map[[2]int]float64) (bool, error) {
	for i := range plan.Stages {
		st := &plan.Stages[i]
		ring, err := p.opt.Topology.Ring(st.Devices)
		if err != nil {
			return false, err
		}
		st.MicroBatches = int(p.ls.Batch / st.MicroBatch)
		st.Forward, st.Backward, st.Sync = p.stageTimes(works[i], len(st.Devices), ring, st.MicroBatch)
		st.TimePerSample = (float64(st.MicroBatches)*(st.Forward+st.Backward) + st.Sync) / float64(p.ls.Batch)
	}
	p.inFlight(plan)
	for i := range plan.Stages {
		st := &plan.Stages[i]
		st.MemoryBytes = p.memoryOf(works[i], len(st.Devices), st.InFlight, st.MicroBatch)
		if st.MemoryBytes > p.memory {
			return false, nil
		}
	}
	return true, p.simulate(plan, flows)
}

// refineMicroBatches gives the stages their own micro-batch sizes
// (GraphPipe's per-stage sizes): it tries every size that divides the
// batch for the stages before each stage and for those after it (in
// topological order), keeps the change that shortens the simulated step
// most with every stage fitting, and repeats until none does (at most
// maxRefinements times: each round simulates the plan for every size,
// stage and side). A prefix
// or suffix moves together because a stage alone on smaller
// micro-batches gains nothing while its neighbours wait for whole ones.
func (p *planner) refineMicroBatches(plan *Plan, chain bool) (*Plan, error) {
	works := make([]Work, len(plan.Stages))
	for i, s := range plan.Stages {
		works[i] = p.workOfLayers(s.Layers)
	}
	flows := p.flows(plan, chain)
	n := len(plan.Stages)
	for range maxRefinements {
		best := plan
		for _, size := range p.microBatchSizes() {
			for i := range n {
				for _, span := range [][2]int{{0, i + 1}, {i, n}} {
					cand := *plan
					cand.Stages = slices.Clone(plan.Stages)
					for j := span[0]; j < span[1]; j++ {
						cand.Stages[j].MicroBatch = size
					}
					ok, err := p.reschedule(&cand, works, flows)
					if err != nil && !errors.Is(err, errDeadlock) {
						return nil, err
					}
					if ok && err == nil && cand.Seconds < best.Seconds*(1-1e-9) {
						best = &cand
					}
				}
			}
		}
		if best == plan {
			break
		}
		plan = best
	}
	return plan, nil
}

// errDeadlock is a schedule in which every stage waits for another: a
// planner bug, which the refinement of micro-batch sizes survives by
// skipping the sizes that cause it.
var errDeadlock = errors.New("the pipeline schedule deadlocks (a planner bug)")

// maxRefinements bounds refineMicroBatches' rounds.
const maxRefinements = 8

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

// edges adds the stage graph's edges: the flows.
func (p *planner) edges(plan *Plan, flows map[[2]int]float64) {
	for e := range flows {
		plan.Stages[e[0]].Succ = append(plan.Stages[e[0]].Succ, e[1])
	}
	for i := range plan.Stages {
		slices.Sort(plan.Stages[i].Succ)
	}
}

// inFlight counts each stage's micro-batches in flight under 1F1B: its
// own next micro-batch beyond the samples its warm-up must feed, the
// most that any stage it feeds runs forward before its own first
// backward pass (that stage's in-flight micro-batches, whole, and one
// more of them where their sizes differ from ours: a pass that
// straddles two of ours waits for both, TestScheduleNeverDeadlocks).
func (p *planner) inFlight(plan *Plan) {
	covered := make([]int64, len(plan.Stages))   // the samples a stage's warm-up runs forward
	for i := len(plan.Stages) - 1; i >= 0; i-- { // stages are in topological order
		st := &plan.Stages[i]
		after := int64(0)
		for _, t := range st.Succ {
			c := covered[t]
			if next := plan.Stages[t].MicroBatch; next != st.MicroBatch {
				c += next // its passes straddle ours: one more of its micro-batches
			}
			after = max(after, c)
		}
		st.InFlight = int(min(ceilDiv(after+st.MicroBatch, st.MicroBatch), int64(st.MicroBatches)))
		covered[i] = int64(st.InFlight) * st.MicroBatch
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
	n := len(plan.Stages)
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
	fwdEnd, bwdEnd := make([][]float64, n), make([][]float64, n)
	remaining := 0
	for i, s := range plan.Stages {
		order[i] = oneFOneB(s.MicroBatches, s.InFlight)
		fwdEnd[i], bwdEnd[i] = notDone(s.MicroBatches), notDone(s.MicroBatches)
		remaining += 2 * s.MicroBatches
	}
	next, free := make([]int, n), make([]float64, n)
	for remaining > 0 {
		progressed := false
		for i := range n {
			for next[i] < len(order[i]) {
				t := &order[i][next[i]]
				ready, ok := readyAt(plan, i, t, preds[i], fwdEnd, bwdEnd, transfer)
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
			return errDeadlock
		}
	}
	busy, devices := 0.0, 0
	plan.Seconds = 0
	for i, s := range plan.Stages {
		plan.Seconds = max(plan.Seconds, free[i]+s.Sync)
		busy += float64(len(s.Devices)) * (float64(s.MicroBatches)*(s.Forward+s.Backward) + s.Sync)
		devices += len(s.Devices)
	}
	plan.Bubble = max(0, 1-busy/(float64(devices)*plan.Seconds)) // not below 0 by rounding
	plan.Schedule = order
	return nil
}

// readyAt is when task t of stage i may start; ok false while a pass it
// waits for has not been simulated. A pass waits for every pass of the
// other stage whose micro-batch shares samples with its own.
func readyAt(plan *Plan, i int, t *Task, preds []int, fwdEnd, bwdEnd [][]float64, transfer map[[2]int]link) (float64, bool) {
	st := &plan.Stages[i]
	lo, hi := int64(t.Micro)*st.MicroBatch, int64(t.Micro+1)*st.MicroBatch-1 // its samples
	wait := func(other int, ends [][]float64, l link) (float64, bool) {
		size := plan.Stages[other].MicroBatch
		at := 0.0
		for j := lo / size; j <= hi/size; j++ {
			if ends[other][j] < 0 {
				return 0, false
			}
			at = max(at, ends[other][j])
		}
		return at + l.seconds(st.MicroBatch), true
	}
	at := 0.0
	if !t.Backward {
		for _, q := range preds {
			end, ok := wait(q, fwdEnd, transfer[[2]int{q, i}])
			if !ok {
				return 0, false
			}
			at = max(at, end)
		}
		return at, true
	}
	if fwdEnd[i][t.Micro] < 0 {
		return 0, false
	}
	at = fwdEnd[i][t.Micro]
	for _, s := range st.Succ {
		end, ok := wait(s, bwdEnd, transfer[[2]int{i, s}])
		if !ok {
			return 0, false
		}
		at = max(at, end)
	}
	return at, true
}

// link is a flow's transfer: its seconds per sample (the bytes over
// the slowest link between the groups, the smaller group's devices
// sending side by side) and its latency.
type link struct{ perSample, latency float64 }

func (l link) seconds(samples int64) float64 { return l.perSample*float64(samples) + l.latency }

// transfers are the flows' transfers (their gradients flow back alike).
func (p *planner) transfers(plan *Plan, flows map[[2]int]float64) (map[[2]int]link, error) {
	out := map[[2]int]link{}
	for e, perSample := range flows {
		from, to := plan.Stages[e[0]].Devices, plan.Stages[e[1]].Devices
		l, err := p.opt.Topology.Between(from, to)
		if err != nil {
			return nil, err
		}
		out[e] = link{perSample / (l.Bandwidth * float64(min(len(from), len(to)))), l.Latency}
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

// notDone is m end times, none known yet.
func notDone(m int) []float64 {
	out := make([]float64, m)
	for j := range out {
		out[j] = -1
	}
	return out
}
