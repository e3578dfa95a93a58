package plan

import (
	"fmt"
	"sort"
)

// checkOverlap refuses two buffers of a device that share bytes while
// both are live. A buffer is live from the first step of its device that
// uses it (or a view of it) to the last, Init's steps before Steps'; the
// buffers of the inputs, parameters and outputs, and those a step of
// another device uses, live throughout. A buffer and the buffers it is a
// view of may share bytes. The code generator places buffers by
// lifetimes at least as long (docs/plan.md, "Buffer"), so that every
// plan it writes passes.
func (p *Plan) checkOverlap() error {
	const always = -1
	type span struct{ first, last int }
	live := make([]span, len(p.Buffers))
	for i := range live {
		live[i] = span{first: -2}
	}
	var touch func(id, at int)
	touch = func(id, at int) {
		l := &live[id]
		switch {
		case l.first == always:
		case at == always || l.first == -2:
			l.first, l.last = at, at
		default:
			l.last = at
		}
		if v := p.Buffers[id].ViewOf; v >= 0 {
			touch(v, at)
		}
	}
	for _, bs := range [][]Binding{p.Inputs, p.Params, p.Outputs} {
		for _, b := range bs {
			for _, t := range b.Tiles {
				touch(t.Buffer, always)
			}
		}
	}
	for d := range p.Devices {
		at := 0
		for _, list := range [][]Step{p.Init[d], p.Steps[d]} {
			for _, s := range list {
				for _, id := range s.buffers() {
					if p.Buffers[id].Device != d {
						touch(id, always) // another device's: read throughout
					} else {
						touch(id, at)
					}
				}
				at++
			}
		}
	}
	// Per device, by offset: each buffer against those before it whose
	// bytes reach past its start.
	order := make([]int, len(p.Buffers))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(i, j int) bool {
		a, b := p.Buffers[order[i]], p.Buffers[order[j]]
		if a.Device != b.Device {
			return a.Device < b.Device
		}
		return a.Offset < b.Offset
	})
	var open []int
	for _, id := range order {
		b := p.Buffers[id]
		kept := open[:0]
		for _, o := range open {
			ob := p.Buffers[o]
			if ob.Device == b.Device && ob.Offset+ob.Bytes > b.Offset {
				kept = append(kept, o)
			}
		}
		open = kept
		if b.Bytes == 0 {
			continue
		}
		for _, o := range open {
			lb, lo := live[id], live[o]
			unused := lb.first == -2 || lo.first == -2
			overlap := lb.first == always || lo.first == always || lb.first <= lo.last && lo.first <= lb.last
			if !unused && overlap && !p.related(id, o) {
				return fmt.Errorf("buffers %d (%s) and %d (%s) of device %d share bytes [%d, %d) while both are live", o, p.Buffers[o].Name, id, b.Name, b.Device, b.Offset, min(b.Offset+b.Bytes, p.Buffers[o].Offset+p.Buffers[o].Bytes))
			}
		}
		open = append(open, id)
	}
	return nil
}

// related reports whether one of two buffers is a view of the other, or
// both of one buffer.
func (p *Plan) related(a, b int) bool {
	root := func(id int) int {
		for n := 0; p.Buffers[id].ViewOf >= 0 && n <= len(p.Buffers); n++ {
			id = p.Buffers[id].ViewOf
		}
		return id
	}
	return root(a) == root(b)
}

// buffers lists the buffers a step uses.
func (s *Step) buffers() []int {
	switch s.Op {
	case Launch:
		return s.Args
	case Copy:
		return []int{s.From, s.To}
	case Reduce:
		return append(append([]int(nil), s.Parts...), s.To)
	case Opaque:
		return append(append([]int(nil), s.Call.Args...), s.To)
	}
	return nil
}
