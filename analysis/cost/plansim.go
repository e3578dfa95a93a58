package cost

import (
	"fmt"
	"slices"

	"tofuc/lang"
	"tofuc/lang/precision"
	"tofuc/runtime/plan"
)

// SimulatePlan is a compiled plan's run (its Steps) on the first
// p.Devices devices of t, step by step as the executor enqueues them:
// each device's steps one after the other on its stream, a step after
// those of other devices it waits for, a collective's members together.
// A launch takes its kernel's roofline (FLOPs at the peak or bytes at
// the memory bandwidth, plus the launch); a copy from another device its
// bytes over the fastest link between the two plus its latency (a local
// one, its bytes read and written); a reduce step fetches each remote
// part so, then launches its kernel; an all-reduce takes
// AllReduceSeconds over the slowest link of its ring. Steps a GPU does
// not run (host-only kernels, a placement group's library variants) and
// opaque steps (host functions) take no time. Compute and Transfer are
// the launches' and the transfers' time on the device that ends last.
//
// On a topology of one host process (Topology.HostProcess) the kernels
// priced are those the host runs (GPU-only ones skipped), a packed
// product's at the device's contraction model (its GEMMs padded to
// whole tiles, f½ once a launch), and the devices share the process's
// threads: the step is every device's work one after the other (never
// shorter than the path of waits above, which is made of such work),
// plus the device's step_seconds; Compute and Transfer are then the
// sums over the devices. The run's
// copies of the inputs and outputs are not part of it (the plan's steps
// start with the inputs on the devices, as executor.Program.Bench times
// them).
func SimulatePlan(p *plan.Plan, t *Topology) (*Simulation, error) {
	return SimulatePlanTimed(p, t, nil)
}

// SimulatePlanTimed is SimulatePlan with the launch and reduce steps of
// measured taking the seconds measured (kernels timed alone: FlexFlow's
// simulator, which measures each operator and simulates how they run
// together), the other steps priced as SimulatePlan prices them (copies
// and collectives over the topology's links) but for a placement
// group's steps, which take their time measured, or none where they
// did not run (another backend's variant ran).
func SimulatePlanTimed(p *plan.Plan, t *Topology, measured map[plan.StepRef]float64) (*Simulation, error) {
	if p.Devices > len(t.Devices) {
		return nil, fmt.Errorf("the topology %q has %d devices, the plan %d", t.Name, len(t.Devices), p.Devices)
	}
	order, err := plan.Order(p.Steps)
	if err != nil {
		return nil, err
	}
	ps := &planSim{p: p, t: t, measured: measured, end: make([][]float64, p.Devices), busy: make([][2]float64, p.Devices)}
	for d, list := range p.Steps {
		ps.end[d] = make([]float64, len(list))
	}
	for i := 0; i < len(order); {
		n, err := ps.step(order[i:])
		if err != nil {
			return nil, err
		}
		i += n
	}
	last := 0
	for d := range ps.end {
		if ps.finish(d) > ps.finish(last) {
			last = d
		}
	}
	sim := &Simulation{Seconds: ps.finish(last), Compute: ps.busy[last][0], Transfer: ps.busy[last][1]}
	if t.HostProcess {
		ps.shareThreads(sim)
	}
	return sim, nil
}

// shareThreads makes sim, the step of devices running at once, that of
// devices sharing one process's threads (SimulatePlan).
func (ps *planSim) shareThreads(sim *Simulation) {
	sim.Compute, sim.Transfer = 0, 0
	for _, b := range ps.busy {
		sim.Compute += b[0]
		sim.Transfer += b[1]
	}
	sim.Seconds = sim.Compute + sim.Transfer + ps.t.Devices[0].StepSeconds
}

// TimedAlone says whether SimulatePlanTimed takes step s as measured:
// a launch, a reduce step, a placement group's step.
func TimedAlone(s *plan.Step) bool {
	return s.Op == plan.Launch || s.Op == plan.Reduce || s.Place != nil
}

// planSim is SimulatePlan's state: when each step ends, and each
// device's time launching kernels and moving data.
type planSim struct {
	p        *plan.Plan
	t        *Topology
	measured map[plan.StepRef]float64
	end      [][]float64
	busy     [][2]float64
}

// finish is when device d's last step ends.
func (ps *planSim) finish(d int) float64 {
	if n := len(ps.end[d]); n > 0 {
		return ps.end[d][n-1]
	}
	return 0
}

// step simulates the step first in order (with the other members of a
// collective, which follow it there) and returns how many it took.
func (ps *planSim) step(order []plan.StepRef) (int, error) {
	r := order[0]
	s := &ps.p.Steps[r.Device][r.Step]
	members := order[:1]
	if s.Op == plan.AllReduce {
		members = order[:len(s.Group)]
	}
	start := 0.0
	for _, m := range members {
		start = max(start, ps.ready(m))
	}
	compute, transfer, err := ps.price(r.Device, s)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", s.Where(r.Device, r.Step), err)
	}
	if seconds, ok := ps.measured[r]; ps.measured != nil && (ok && TimedAlone(s) || s.Place != nil) {
		compute, transfer = seconds, 0
	}
	for _, m := range members {
		ps.end[m.Device][m.Step] = start + compute + transfer
		ps.busy[m.Device][0] += compute
		ps.busy[m.Device][1] += transfer
	}
	return len(members), nil
}

// ready is when step r may start: its device's previous step and the
// steps it waits for have ended.
func (ps *planSim) ready(r plan.StepRef) float64 {
	at := 0.0
	if r.Step > 0 {
		at = ps.end[r.Device][r.Step-1]
	}
	for _, a := range ps.p.Steps[r.Device][r.Step].After {
		at = max(at, ps.end[a.Device][a.Step])
	}
	return at
}

// price is step s of device d's time launching kernels and moving data.
func (ps *planSim) price(d int, s *plan.Step) (compute, transfer float64, err error) {
	if s.Place != nil && !slices.Contains(s.Place.Variants, plan.Generated) {
		return 0, 0, nil
	}
	switch s.Op {
	case plan.Launch:
		return ps.kernel(d, s.Kernel), 0, nil
	case plan.Copy:
		from := ps.p.Buffers[s.From]
		bytes := elemSize(lang.ParseDType(from.DType)) * boxCells(s.Src)
		transfer, err = ps.move(from.Device, d, bytes)
		return 0, transfer, err
	case plan.Reduce:
		for _, id := range s.Parts {
			b := ps.p.Buffers[id]
			if b.Device == d {
				continue // read in place
			}
			t, err := ps.move(b.Device, d, b.Bytes)
			if err != nil {
				return 0, 0, err
			}
			transfer += t
		}
		return ps.kernel(d, s.Kernel), transfer, nil
	case plan.AllReduce:
		l, err := ps.t.Ring(s.Group)
		return 0, AllReduceSeconds(ps.p.Buffers[s.To].Bytes, len(s.Group), l), err
	}
	return 0, 0, nil
}

// kernel is kernel k's roofline on device d (KernelSeconds).
func (ps *planSim) kernel(d, k int) float64 {
	return KernelSeconds(&ps.p.Kernels[k], ps.p.Precision, ps.t, d)
}

// KernelSeconds is a launch of kernel kn, compiled in precision mode
// mode, on device d of t, as SimulatePlan prices it: its roofline, 0 for
// a kernel the device skips (a GPU's host-only kernels, a host
// process's GPU-only ones). On a host process it computes the host
// flavour's FLOPs (HostFLOPs where given) and its costly math calls at
// the device's measured costs (MathSeconds).
func KernelSeconds(kn *plan.Kernel, mode precision.Mode, t *Topology, d int) float64 {
	dev := t.Roofline(d)
	if !t.HostProcess {
		if !kn.OnGPU() {
			return 0
		}
		return dev.Seconds(dev.ComputeSeconds(kn.FLOPs, 0, 0), kn.Bytes, 0) + dev.Launch
	}
	if !kn.OnHost() || kn.HostRange == 0 {
		return 0
	}
	var padding, serial int64
	for _, g := range kn.GEMMs {
		c := ContractionShape{Batch: g.Batch, Rows: g.Rows, Cols: g.Cols, Depth: g.Depth, RowsPacked: g.RowsPacked, ColsPacked: g.ColsPacked}
		padding += c.Padding(dev.TileRows, dev.TileCols, dev.NarrowCols)
		serial += c.SerialBytes()
	}
	contractions := min(len(kn.GEMMs), 1) // a chained pair pays f½ once
	flops := kn.FLOPs
	if kn.HostFLOPs > 0 {
		flops = kn.HostFLOPs // the host's form computes less
	}
	compute := dev.ComputeSeconds(flops, padding, contractions) + mathSeconds(kn, t.Devices[d].MathSeconds[mathModeKey(mode)])
	return dev.Seconds(compute, kn.Bytes, serial) + dev.Launch
}

// mathSeconds is what kn's costly math calls cost beyond the operation
// each counts as, at costs per call by function (none where missing).
func mathSeconds(kn *plan.Kernel, costs map[string]float64) float64 {
	s := 0.0
	for fn, n := range kn.MathCalls {
		s += float64(n) * costs[fn]
	}
	return s
}

// move is bytes from device a to device b: over their fastest link, or
// read and written in b's memory when a is b.
func (ps *planSim) move(a, b int, bytes int64) (float64, error) {
	if a == b {
		return 2 * float64(bytes) / ps.t.Devices[b].MemoryBandwidth, nil
	}
	l, ok := ps.t.link(a, b)
	if !ok {
		return 0, fmt.Errorf("the topology %q has no link that joins devices %d and %d", ps.t.Name, a, b)
	}
	return float64(bytes)/l.Bandwidth + l.Latency, nil
}

// boxCells is the elements of a box.
func boxCells(box []plan.Dim) int64 {
	n := int64(1)
	for _, r := range box {
		n *= r.Hi - r.Lo
	}
	return n
}
