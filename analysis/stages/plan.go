package stages

import (
	"fmt"
	"math"
	"slices"
	"time"

	"tofuc/analysis/cost"
	"tofuc/lang"
)

// Options say what a pipeline plan is for.
type Options struct {
	Topology *cost.Topology
	Devices  int // the first Devices devices of Topology
	// Memory is the limit per device; 0: none (as the partition
	// search's).
	Memory int64
	// MaxMicroBatches bounds the micro-batches of a step; 0: 64.
	MaxMicroBatches int
}

// Plan is a pipeline plan: stages on disjoint device groups, a step's
// batch cut into micro-batches (MicroBatches of MicroBatch samples as
// searched; a stage may then run others, Stage.MicroBatch), run by the
// 1F1B schedule (Schedule), gradients all-reduced within each stage's
// group once per step.
type Plan struct {
	Method       string // Sequential or GraphPipe
	Structure    string // SeriesParallel or Linearised
	Stages       []Stage
	MicroBatch   int64
	MicroBatches int
	// Seconds is the simulated step, Bubble the fraction of the used
	// devices' time they idle in it, Schedule the tasks per stage.
	Seconds  float64
	Bubble   float64
	Schedule [][]Task
	// SearchSeconds is the planner's own wall clock.
	SearchSeconds float64
}

// The methods: GraphPipe's stage graph from the series-parallel
// decomposition, and the sequential pipeline of the layers linearised
// (PipeDream's planner: contiguous stages, each replicated).
const (
	GraphPipe  = "graphpipe"
	Sequential = "sequential"
)

// Stage is a set of layers run data-parallel on a group of devices.
type Stage struct {
	Layers  []int
	Devices []int
	Succ    []int // the stages its outputs feed
	// MicroBatch is its micro-batches' samples (stages may differ:
	// GraphPipe's per-stage sizes), MicroBatches how many a step has.
	MicroBatch   int64
	MicroBatches int
	// Forward and Backward are a micro-batch's seconds on each of its
	// devices; Sync a step's all-reduce of its gradients and its
	// updates.
	Forward, Backward, Sync float64
	// InFlight is the micro-batches whose activations it keeps at once
	// (1F1B: the stages from it to the loss), MemoryBytes its peak per
	// device, TimePerSample its busy seconds per step over the batch.
	InFlight      int
	MemoryBytes   int64
	TimePerSample float64
}

// Throughput is samples per second.
func (p *Plan) Throughput(batch int64) float64 { return float64(batch) / p.Seconds }

// Devices is the devices the plan uses.
func (p *Plan) Devices() int {
	n := 0
	for _, s := range p.Stages {
		n += len(s.Devices)
	}
	return n
}

// Search plans ls over opt's devices by method: for every micro-batch
// size that divides the batch, a binary search on the bottleneck
// stage's time per sample finds the least for which a dynamic program
// over the decomposition fits the devices (GraphPipe's search); plans at
// that bound and at looser ones (fewer, longer stages: shorter
// pipelines) are scheduled and simulated, and the fastest step within
// the memory limit wins, over all the devices or half or a quarter of
// them (and so on: per-micro-batch costs can make more devices slower).
// GraphPipe then gives each stage its own micro-batch size where that
// shortens the step (refineMicroBatches). GraphPipe searches the
// series-parallel
// decomposition and the linearised layers both (a chain of stages is a
// stage graph too) and says which won (Plan.Structure).
func Search(ls *Layers, method string, opt Options) (*Plan, error) {
	start := time.Now()
	roots := map[string]*spNode{Linearised: ls.bounded(ls.sequential())}
	switch method {
	case GraphPipe:
		roots[SeriesParallel] = ls.bounded(ls.decompose(roots[Linearised].layers))
	case Sequential:
	default:
		return nil, fmt.Errorf("unknown pipeline method %q", method)
	}
	var best *Plan
	for budget := opt.Devices; budget >= 1; budget /= 2 { // a plan of fewer devices may be faster
		o := opt
		o.Devices = budget
		p, err := newPlanner(ls, o)
		if err != nil {
			return nil, err
		}
		for _, structure := range []string{SeriesParallel, Linearised} {
			root, ok := roots[structure]
			if !ok {
				continue
			}
			plan, err := p.best(root, structure == Linearised)
			if err != nil {
				return nil, err
			}
			if plan != nil && (best == nil || plan.Seconds < best.Seconds) {
				best = plan
				best.Structure = structure
			}
		}
	}
	if best == nil {
		return nil, fmt.Errorf("no %s pipeline plan of %d devices fits in %s per device", method, opt.Devices, lang.FormatBytes(opt.Memory))
	}
	if method == GraphPipe {
		p, err := newPlanner(ls, opt)
		if err != nil {
			return nil, err
		}
		if best, err = p.refineMicroBatches(best, best.Structure == Linearised); err != nil {
			return nil, err
		}
	}
	best.Method = method
	best.SearchSeconds = time.Since(start).Seconds()
	return best, nil
}

// The structures a plan's stages follow.
const (
	SeriesParallel = "series-parallel"
	Linearised     = "linearised"
)

// best is the fastest plan of the decomposition root: for every
// micro-batch size, at the tightest bound and looser ones; nil if none
// fits in memory. With chain the stages form a chain whatever their
// dataflow, as a sequential pipeline's do.
func (p *planner) best(root *spNode, chain bool) (*Plan, error) {
	var best *Plan
	for _, micro := range p.microBatchSizes() {
		p.micro, p.count = micro, int(p.ls.Batch/micro)
		tight, ok := p.bisect(root)
		if !ok {
			continue
		}
		for _, loosen := range []float64{1, 1.15, 1.3, 1.6, 2, 3, 5, 10, math.Inf(1)} {
			plan, err := p.plan(root, tight*loosen, chain)
			if err != nil {
				return nil, err
			}
			if plan != nil && (best == nil || plan.Seconds < best.Seconds) {
				best = plan
			}
		}
	}
	return best, nil
}

// planner holds what every plan of one search shares.
type planner struct {
	ls     *Layers
	opt    Options
	memory int64
	// rings are the all-reduce links of the devices 0..d-1, by d.
	rings []cost.Link
	// micro and count are the micro-batch being planned: its samples
	// and the micro-batches of a step.
	micro int64
	count int
	limit float64 // the bound on a stage's time per sample
	memo  map[*spNode]fit
}

func newPlanner(ls *Layers, opt Options) (*planner, error) {
	t := opt.Topology
	if opt.Devices < 1 || opt.Devices > len(t.Devices) {
		return nil, fmt.Errorf("the topology %q has %d devices, the plan %d", t.Name, len(t.Devices), opt.Devices)
	}
	p := &planner{ls: ls, opt: opt, memory: opt.Memory, rings: make([]cost.Link, opt.Devices+1)}
	if p.memory == 0 {
		p.memory = math.MaxInt64 // as the partition search: no limit
	}
	if p.opt.MaxMicroBatches == 0 {
		p.opt.MaxMicroBatches = 64
	}
	for d := 2; d <= opt.Devices; d++ {
		group := make([]int, d)
		for i := range group {
			group[i] = i
		}
		var err error
		if p.rings[d], err = t.Ring(group); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// microBatchSizes are the divisors of the batch that cut it into at most
// MaxMicroBatches micro-batches, largest first.
func (p *planner) microBatchSizes() []int64 {
	var out []int64
	for m := int64(1); m <= int64(p.opt.MaxMicroBatches) && m <= p.ls.Batch; m++ {
		if p.ls.Batch%m == 0 {
			out = append(out, p.ls.Batch/m)
		}
	}
	return out
}

// workOf is the work of the layers under n.
func (p *planner) workOf(n *spNode) Work {
	if n.work == nil {
		w := p.workOfLayers(n.layers)
		n.work = &w
	}
	return *n.work
}

func (p *planner) workOfLayers(layers []int) Work {
	var w Work
	for _, v := range layers {
		w = w.plus(p.ls.Layers[v].Work)
	}
	return w
}

// stageTimes are a stage's seconds on d devices whose all-reduce runs
// over ring: a micro-batch's forward and backward passes (each device
// computing ⌈micro-batch / d⌉ samples), and per step its all-reduce and
// updates.
func (p *planner) stageTimes(w Work, d int, ring cost.Link, micro int64) (forward, backward, sync float64) {
	s := float64(ceilDiv(micro, int64(d)))
	return w.Forward.At(s), w.Backward.At(s), cost.AllReduceSeconds(w.GradientBytes, d, ring) + w.Update
}

// busy is a stage's busy seconds per step on the first d devices.
func (p *planner) busy(w Work, d int) float64 {
	f, b, sync := p.stageTimes(w, d, p.rings[d], p.micro)
	return float64(p.count)*(f+b) + sync
}

// memoryOf is a stage's peak per device holding inFlight micro-batches
// of micro samples.
func (p *planner) memoryOf(w Work, d, inFlight int, micro int64) int64 {
	s := float64(ceilDiv(micro, int64(d)))
	return w.StateBytes + int64(math.Ceil(float64(inFlight)*s*w.ActivationBytes))
}

// leastDevices is the fewest devices on which a stage of a keeps within
// the bound and (holding one micro-batch) the memory limit;
// opt.Devices+1 where none does.
func (p *planner) leastDevices(w Work) int {
	for d := 1; d <= p.opt.Devices; d++ {
		if p.busy(w, d)/float64(p.ls.Batch) <= p.limit && p.memoryOf(w, d, 1, p.micro) <= p.memory {
			return d
		}
	}
	return p.opt.Devices + 1
}

// fit is the fewest devices a part of the decomposition needs with
// every stage within the bound, in how many stages, and which.
type fit struct {
	devices, stages int
	// collect appends its stages.
	collect func([]stageSpec) []stageSpec
}

// stageSpec is a stage as the dynamic program chose it.
type stageSpec struct {
	layers  []int
	devices int
}

func (f fit) better(g fit) bool {
	return f.devices < g.devices || f.devices == g.devices && f.stages < g.stages
}

func (p *planner) none() fit { return fit{devices: p.opt.Devices + 1, stages: math.MaxInt32} }

// oneStage is n's layers as one stage on the fewest devices that keep
// it within the bound.
func (p *planner) oneStage(n *spNode) fit {
	d := p.leastDevices(p.workOf(n))
	if d > p.opt.Devices {
		return p.none()
	}
	return fit{devices: d, stages: 1, collect: func(out []stageSpec) []stageSpec {
		return append(out, stageSpec{n.layers, d})
	}}
}

// solve is the fit of node n under the bound (memoised per bound): one
// stage, or its parts planned apart (parallel parts on disjoint
// devices; a series cut into consecutive segments).
func (p *planner) solve(n *spNode) fit {
	if f, ok := p.memo[n]; ok {
		return f
	}
	best := p.oneStage(n)
	switch {
	case n.layer >= 0:
	case n.parallel:
		var fits []fit
		f := fit{}
		for _, c := range n.children {
			cf := p.solve(c)
			fits = append(fits, cf)
			f.devices += cf.devices
			f.stages += cf.stages
		}
		f.collect = func(out []stageSpec) []stageSpec {
			for _, cf := range fits {
				out = cf.collect(out)
			}
			return out
		}
		if f.devices <= p.opt.Devices && f.better(best) {
			best = f
		}
	default:
		if f := p.series(n); f.better(best) {
			best = f
		}
	}
	p.memo[n] = best
	return best
}

// series is the best cut of a series node's children into consecutive
// segments, each one stage or (a single child) planned by its own fit.
func (p *planner) series(n *spNode) fit {
	k := len(n.children)
	best := make([]fit, k+1)    // of the first j children
	cut := make([]int, k+1)     // where the last segment of best[j] starts
	devices := make([]int, k+1) // its devices, as one stage
	child := make([]*fit, k+1)  // or its one child's own fit
	for j := 1; j <= k; j++ {
		best[j] = p.none()
		var w Work
		for i := j - 1; i >= 0; i-- {
			w = w.plus(p.workOf(n.children[i]))
			s := fit{devices: p.leastDevices(w), stages: 1}
			var own *fit
			if i == j-1 {
				if cf := p.solve(n.children[i]); cf.better(s) {
					s, own = cf, &cf
				}
			}
			if s.devices > p.opt.Devices {
				if i < j-1 {
					break // a longer segment needs more devices still
				}
				continue
			}
			total := fit{devices: best[i].devices + s.devices, stages: best[i].stages + s.stages}
			if total.devices <= p.opt.Devices && total.better(best[j]) {
				best[j], cut[j], devices[j], child[j] = total, i, s.devices, own
			}
		}
	}
	out := best[k]
	if out.devices > p.opt.Devices {
		return p.none()
	}
	out.collect = func(specs []stageSpec) []stageSpec {
		var ends []int
		for j := k; j > 0; j = cut[j] {
			ends = append(ends, j)
		}
		for _, j := range slices.Backward(ends) {
			if child[j] != nil {
				specs = child[j].collect(specs)
			} else {
				specs = append(specs, stageSpec{segmentLayers(n.children[cut[j]:j]), devices[j]})
			}
		}
		return specs
	}
	return out
}

// segmentLayers are the layers of consecutive children, in order.
func segmentLayers(children []*spNode) []int {
	var out []int
	for _, c := range children {
		out = append(out, c.layers...)
	}
	return out
}

// fits says whether every stage can keep within bound.
func (p *planner) fits(root *spNode, bound float64) bool {
	p.limit, p.memo = bound, map[*spNode]fit{}
	return p.solve(root).devices <= p.opt.Devices
}

// bisect is the least bound on a stage's time per sample that fits.
func (p *planner) bisect(root *spNode) (float64, bool) {
	w := p.workOf(root)
	hi := 0.0
	for d := 1; d <= p.opt.Devices; d++ {
		hi = max(hi, p.busy(w, d)/float64(p.ls.Batch))
	}
	hi *= 2
	if !p.fits(root, hi) {
		return 0, false
	}
	lo := 0.0
	for range 40 {
		mid := (lo + hi) / 2
		if p.fits(root, mid) {
			hi = mid
		} else {
			lo = mid
		}
		if hi-lo < hi*1e-3 {
			break
		}
	}
	return hi, true
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }
