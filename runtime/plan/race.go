package plan

import (
	"fmt"
	"slices"
	"sort"
)

// remoteRead is a step reading a buffer of another device: a copy's
// source or a reduction's part there.
type remoteRead struct {
	buffer, root int
	owner        int     // the buffer's device
	by           StepRef // the reading step
	// last is the last step of the owner that ends before the read
	// starts (-1: none); next the first that starts after it ends
	// (the owner's steps: none).
	last, next int
}

// checkRaces refuses a step that reads another device's buffer while
// that device may be writing its bytes: every step of the owner writing
// the buffer, a view of it or the buffer it is a view of must end before
// the read starts or start after it ends, through `after` edges and each
// device's order. A device writes only its own buffers, so that such
// reads are the only accesses two devices make to the same bytes.
// Happens-before is computed one device at a time (clock), for the
// devices that read or own such bytes: at most the steps times the
// devices. It returns the reads, each with the window of its owner's
// steps that may run while it does (checkOverlap's).
func (p *Plan) checkRaces(steps [][]Step, order []StepRef, roots []int) ([]remoteRead, error) {
	reads, writes := p.remoteAccesses(steps, roots)
	if len(reads) == 0 {
		return nil, nil
	}
	base := make([]int, len(steps)+1) // base[d]: the global index of device d's first step
	for d, list := range steps {
		base[d+1] = base[d] + len(list)
	}
	clock := make([]int, base[len(steps)])
	for _, c := range clockDevices(reads) {
		happensBefore(steps, order, base, c, clock)
		for i := range reads {
			r := &reads[i]
			if r.owner == c {
				r.last = clock[base[r.by.Device]+r.by.Step]
			}
			if r.by.Device == c {
				owner := clock[base[r.owner]:base[r.owner+1]]
				r.next = sort.Search(len(owner), func(j int) bool { return owner[j] >= r.by.Step })
			}
		}
	}
	for _, r := range reads {
		ws := writes[r.root]
		if k, _ := slices.BinarySearch(ws, r.last+1); k < len(ws) && ws[k] < r.next {
			return nil, p.raceError(steps, r, ws[k])
		}
	}
	return reads, nil
}

// remoteAccesses lists the reads of other devices' buffers and, for the
// buffers they read (by the buffer they are views of), the steps of
// their device writing any of its views, in order.
func (p *Plan) remoteAccesses(steps [][]Step, roots []int) ([]remoteRead, map[int][]int) {
	var reads []remoteRead
	writes := map[int][]int{}
	for d, list := range steps {
		for i := range list {
			sources, _ := p.access(&list[i])
			for _, id := range sources {
				if b := p.Buffers[id]; b.Device != d {
					reads = append(reads, remoteRead{buffer: id, root: roots[id], owner: b.Device, by: StepRef{d, i}})
					writes[roots[id]] = nil
				}
			}
		}
	}
	for _, list := range steps {
		for i := range list {
			_, dests := p.access(&list[i])
			for _, id := range dests {
				if ws, ok := writes[roots[id]]; ok && (len(ws) == 0 || ws[len(ws)-1] != i) {
					writes[roots[id]] = append(ws, i)
				}
			}
		}
	}
	return reads, writes
}

// clockDevices lists the devices whose clocks the reads need: their
// owners' and their readers'.
func clockDevices(reads []remoteRead) []int {
	var out []int
	for _, r := range reads {
		out = append(out, r.owner, r.by.Device)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// happensBefore sets clock, for every step (by global index, base), to
// the last step of device c that ends before it starts, itself when on
// c (-1: none), visiting the steps in order.
func happensBefore(steps [][]Step, order []StepRef, base []int, c int, clock []int) {
	for _, r := range order {
		g := base[r.Device] + r.Step
		v := -1
		if r.Step > 0 {
			v = clock[g-1]
		}
		for _, a := range steps[r.Device][r.Step].After {
			v = max(v, clock[base[a.Device]+a.Step])
		}
		if r.Device == c {
			v = r.Step
		}
		clock[g] = v
	}
}

// raceError names a remote read and step w of its buffer's device,
// which writes its bytes unordered with it.
func (p *Plan) raceError(steps [][]Step, r remoteRead, w int) error {
	reader, writer := &steps[r.by.Device][r.by.Step], &steps[r.owner][w]
	return fmt.Errorf("%s reads buffer %d (%s) of device %d, which step %d of device %d (%s %s) writes, and no `after` orders the two: the read may see the bytes before, during or after the write",
		reader.Where(r.by.Device, r.by.Step), r.buffer, p.Buffers[r.buffer].Name, r.owner, w, r.owner, writer.Op, writer.Label)
}
