package cost

import (
	"fmt"
	"slices"

	"tofuc/lang"
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
func SimulatePlan(p *plan.Plan, t *Topology) (*Simulation, error) {
	if p.Devices > len(t.Devices) {
		return nil, fmt.Errorf("the topology %q has %d devices, the plan %d", t.Name, len(t.Devices), p.Devices)
	}
	order, err := plan.Order(p.Steps)
	if err != nil {
		return nil, err
	}
	ps := &planSim{p: p, t: t, end: make([][]float64, p.Devices), busy: make([][2]float64, p.Devices)}
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
	return &Simulation{Seconds: ps.finish(last), Compute: ps.busy[last][0], Transfer: ps.busy[last][1]}, nil
}

// planSim is SimulatePlan's state: when each step ends, and each
// device's time launching kernels and moving data.
type planSim struct {
	p    *plan.Plan
	t    *Topology
	end  [][]float64
	busy [][2]float64
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

// kernel is kernel k's roofline on device d, 0 for one a GPU skips.
func (ps *planSim) kernel(d, k int) float64 {
	kn := &ps.p.Kernels[k]
	if !kn.OnGPU() {
		return 0
	}
	dev := ps.t.Roofline(d)
	return max(dev.ComputeSeconds(kn.FLOPs, 0, 0), float64(kn.Bytes)/dev.Bandwidth) + dev.Launch
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
