package plan

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// span is when a buffer is live: from the step first to the step last
// of its device, counted through Init then Steps.
type span struct{ first, last int }

const (
	unused = math.MinInt // first of a buffer no step uses
	always = -1          // first of a buffer live throughout
)

// checkOverlap refuses two buffers of a device that share bytes while
// both are live. A buffer is live from the first step of its device that
// uses it (or a view of it) to the last, Init's steps before Steps', and
// on to the last step of its device that may start before another
// device's step reading it ends (reads: the step before the first that
// starts after the read ends, which checkRaces found): a device may give
// the bytes to another buffer once it has waited for the read; the
// buffers of the inputs, parameters and outputs, and those another
// device's init steps read, live throughout. A buffer and its views share
// bytes (a view lies within the buffer it is a view of: checkView), so
// only the buffers that are no view are compared, each live while any
// of its views is. The code generator places buffers by lifetimes at
// least as long (docs/plan.md, "Buffer"), so that every plan it writes
// passes. A sweep over time with a count of live buffers per byte range
// (rangeCount) costs the buffers times the logarithm of their number.
func (p *Plan) checkOverlap(roots []int, reads []remoteRead) error {
	live := p.liveSpans(roots, reads)
	var ids []int // the roots used, with bytes
	for id, l := range live {
		if roots[id] == id && l.first != unused && p.Buffers[id].Bytes > 0 {
			ids = append(ids, id)
		}
	}
	edges := p.byteEdges(ids)
	starts := slices.Clone(ids)
	slices.SortFunc(starts, func(a, b int) int { return cmp.Compare(live[a].first, live[b].first) })
	ends := slices.Clone(ids)
	slices.SortFunc(ends, func(a, b int) int { return cmp.Compare(live[a].last, live[b].last) })
	count := newRangeCount(len(edges))
	started, ended := 0, 0
	for _, id := range starts {
		for ; ended < started && live[ends[ended]].last < live[id].first; ended++ {
			lo, hi := p.edgeRange(edges, ends[ended])
			count.add(lo, hi, -1)
		}
		lo, hi := p.edgeRange(edges, id)
		if count.sum(lo, hi) > 0 {
			return p.overlapError(id, starts[:started], live)
		}
		count.add(lo, hi, 1)
		started++
	}
	return nil
}

// liveSpans is when each buffer is live, a view's steps counted for the
// buffer it is a view of.
func (p *Plan) liveSpans(roots []int, reads []remoteRead) []span {
	live := make([]span, len(p.Buffers))
	for i := range live {
		live[i] = span{first: unused}
	}
	touch := func(id, at int) {
		l := &live[roots[id]]
		switch {
		case l.first == always:
		case at == always || l.first == unused:
			l.first, l.last = at, at
		default:
			l.last = at
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
		p.touchSteps(d, touch)
	}
	for _, r := range reads {
		// Every step of the owner before the first that starts after r
		// ends (r.next, counted after its init steps) may run before or
		// while r reads: the bytes must hold the buffer until then.
		init := len(p.Init[r.owner])
		hi := init + r.next - 1
		if hi < 0 {
			continue // read before the owner's first step: nothing of it is live
		}
		lo := min(init+r.last+1, hi)
		l := &live[r.root]
		switch {
		case l.first == always:
		case l.first == unused:
			l.first, l.last = lo, hi
		default:
			l.first, l.last = min(l.first, lo), max(l.last, hi)
		}
	}
	for i := range live {
		if live[i].first == always {
			live[i].last = math.MaxInt
		}
	}
	return live
}

// touchSteps calls touch with every buffer device d's steps use and the
// step's time; another device's buffer only when an init step reads it
// (always: read throughout), the steps' reads being liveSpans' windows.
func (p *Plan) touchSteps(d int, touch func(id, at int)) {
	at := 0
	for k, list := range [][]Step{p.Init[d], p.Steps[d]} {
		for i := range list {
			reads, writes := p.access(&list[i])
			for _, id := range append(slices.Clone(reads), writes...) {
				switch {
				case p.Buffers[id].Device == d:
					touch(id, at)
				case k == 0:
					touch(id, always)
				}
			}
			at++
		}
	}
}

// byteEdge is a byte of a device's arena where a buffer starts or ends.
type byteEdge struct {
	device int
	at     int64
}

// byteEdges are the distinct edges of buffers ids, in order.
func (p *Plan) byteEdges(ids []int) []byteEdge {
	edges := make([]byteEdge, 0, 2*len(ids))
	for _, id := range ids {
		b := p.Buffers[id]
		edges = append(edges, byteEdge{b.Device, b.Offset}, byteEdge{b.Device, b.Offset + b.Bytes})
	}
	slices.SortFunc(edges, compareEdges)
	return slices.Compact(edges)
}

func compareEdges(a, b byteEdge) int {
	return cmp.Or(cmp.Compare(a.device, b.device), cmp.Compare(a.at, b.at))
}

// edgeRange is the range of edges [lo, hi) buffer id's bytes span: the
// pieces between consecutive edges that it covers.
func (p *Plan) edgeRange(edges []byteEdge, id int) (lo, hi int) {
	b := p.Buffers[id]
	lo, _ = slices.BinarySearchFunc(edges, byteEdge{b.Device, b.Offset}, compareEdges)
	hi, _ = slices.BinarySearchFunc(edges, byteEdge{b.Device, b.Offset + b.Bytes}, compareEdges)
	return lo, hi
}

// overlapError names buffer id and one of the buffers started before it
// that shares its bytes and its time (a search of them all, once).
func (p *Plan) overlapError(id int, started []int, live []span) error {
	b := p.Buffers[id]
	for _, o := range started {
		ob := p.Buffers[o]
		if ob.Device == b.Device && ob.Offset < b.Offset+b.Bytes && b.Offset < ob.Offset+ob.Bytes && live[o].last >= live[id].first {
			lo, hi := max(b.Offset, ob.Offset), min(b.Offset+b.Bytes, ob.Offset+ob.Bytes)
			return fmt.Errorf("buffers %d (%s) and %d (%s) of device %d share bytes [%d, %d) while both are live", o, ob.Name, id, b.Name, b.Device, lo, hi)
		}
	}
	return fmt.Errorf("buffer %d (%s) of device %d shares bytes with a live buffer", id, b.Name, b.Device)
}

// rangeCount adds to ranges of positions and sums them (two Fenwick
// trees: a range update is two point updates of each).
type rangeCount struct{ b1, b2 []int64 }

func newRangeCount(n int) *rangeCount {
	return &rangeCount{make([]int64, n+1), make([]int64, n+1)}
}

// add adds v to the positions [lo, hi).
func (c *rangeCount) add(lo, hi int, v int64) {
	c.point(lo, v)
	c.point(hi, -v)
}

func (c *rangeCount) point(i int, v int64) {
	for j := i + 1; j < len(c.b1); j += j & -j {
		c.b1[j] += v
		c.b2[j] += v * int64(i)
	}
}

// prefix is the sum of positions [0, i).
func (c *rangeCount) prefix(i int) int64 {
	var s1, s2 int64
	for j := i; j > 0; j -= j & -j {
		s1 += c.b1[j]
		s2 += c.b2[j]
	}
	return s1*int64(i) - s2
}

// sum is the sum of positions [lo, hi).
func (c *rangeCount) sum(lo, hi int) int64 { return c.prefix(hi) - c.prefix(lo) }
