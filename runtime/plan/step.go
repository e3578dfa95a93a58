package plan

import (
	"cmp"
	"fmt"
	"slices"
)

// checkList checks every step of a list (Init or Steps), then their
// order: no cycle, and every device's reads of another's buffers
// ordered with that device's writes of them.
func (p *Plan) checkList(steps [][]Step, roots []int, held []bool) ([]remoteRead, error) {
	for d, list := range steps {
		for i := range list {
			s := &list[i]
			if err := p.checkStep(d, s, steps, roots, held); err != nil {
				return nil, fmt.Errorf("%s: %w", s.Where(d, i), err)
			}
		}
	}
	order, err := Order(steps)
	if err != nil {
		return nil, err
	}
	return p.checkRaces(steps, order, roots)
}

func (p *Plan) checkStep(d int, s *Step, all [][]Step, roots []int, held []bool) error {
	for _, r := range s.After {
		if r.Device < 0 || r.Device >= p.Devices || r.Step < 0 || r.Step >= len(all[r.Device]) {
			return fmt.Errorf("after: depends on a missing step %v", r)
		}
	}
	var err error
	switch s.Op {
	case Launch:
		err = p.checkLaunch(d, s)
	case Copy:
		err = p.checkCopy(d, s)
	case Reduce:
		err = p.checkReduce(d, s)
	case AllReduce:
		err = p.checkAllReduce(d, s)
	case Opaque:
		err = p.checkOpaque(d, s)
	case Library:
		err = p.checkLibrary(d, s)
	default:
		return fmt.Errorf("unknown op %q", s.Op)
	}
	if err != nil {
		return err
	}
	return p.checkDestinations(s, roots, held)
}

func (p *Plan) checkLaunch(d int, s *Step) error {
	if s.Kernel < 0 || s.Kernel >= len(p.Kernels) {
		return fmt.Errorf("kernel %d does not exist", s.Kernel)
	}
	k := &p.Kernels[s.Kernel]
	if len(s.Args) != len(k.Args) {
		return fmt.Errorf("args: %d arguments for kernel %s of %d", len(s.Args), k.Name, len(k.Args))
	}
	for i, id := range s.Args {
		b, err := p.buffer(id)
		if err != nil {
			return err
		}
		if b.Device != d || b.DType != k.Args[i].DType || !slices.Equal(b.Shape, k.Args[i].Shape) {
			return fmt.Errorf("args: argument %d of kernel %s: buffer %d is %s%v on device %d", i, k.Name, id, b.DType, b.Shape, b.Device)
		}
	}
	return nil
}

func (p *Plan) checkCopy(d int, s *Step) error {
	from, err := p.buffer(s.From)
	if err != nil {
		return err
	}
	to, err := p.buffer(s.To)
	if err != nil {
		return err
	}
	if to.Device != d || from.DType != to.DType || len(s.Src) != len(from.Shape) || len(s.At) != len(to.Shape) || len(from.Shape) != len(to.Shape) {
		return fmt.Errorf("copy from buffer %d (%s%v) to buffer %d (%s%v of device %d) does not match", s.From, from.DType, from.Shape, s.To, to.DType, to.Shape, to.Device)
	}
	for i, r := range s.Src {
		// No sum overflows: every extent is at most MaxCells.
		if r.Lo < 0 || r.Hi < r.Lo || r.Hi > from.Shape[i] || s.At[i] < 0 || s.At[i] > to.Shape[i]-(r.Hi-r.Lo) {
			return fmt.Errorf("src %v at %v: dimension %d lies outside buffer %d (shape %v) or buffer %d (shape %v)", s.Src, s.At, i, s.From, from.Shape, s.To, to.Shape)
		}
	}
	return nil
}

func (p *Plan) checkReduce(d int, s *Step) error {
	to, err := p.buffer(s.To)
	if err != nil {
		return err
	}
	if to.Device != d || len(s.Parts) == 0 {
		return fmt.Errorf("reduction of %d parts into buffer %d of device %d", len(s.Parts), s.To, to.Device)
	}
	if s.Kernel < 0 || s.Kernel >= len(p.Kernels) {
		return fmt.Errorf("kernel %d does not exist", s.Kernel)
	}
	k := &p.Kernels[s.Kernel]
	if s.Reducer == "" || k.Reducer != s.Reducer {
		return fmt.Errorf("reducer %q, but its kernel %s (%s) reduces by %q", s.Reducer, k.Name, k.Label, k.Reducer)
	}
	if len(k.Args) != len(s.Parts)+1 {
		return fmt.Errorf("parts: %d, but its kernel %s takes %d", len(s.Parts), k.Name, len(k.Args)-1)
	}
	for _, a := range k.Args {
		if a.DType != to.DType || !slices.Equal(a.Shape, to.Shape) {
			return fmt.Errorf("kernel %s takes %s%v, the result is %s%v", k.Name, a.DType, a.Shape, to.DType, to.Shape)
		}
	}
	for _, id := range s.Parts {
		b, err := p.buffer(id)
		if err != nil {
			return err
		}
		if b.DType != to.DType || !slices.Equal(b.Shape, to.Shape) {
			return fmt.Errorf("parts: buffer %d is %s%v, the result %s%v", id, b.DType, b.Shape, to.DType, to.Shape)
		}
	}
	if a, b, ok := p.sharing(s.Parts, nil); ok {
		return fmt.Errorf("parts: buffers %d (%s) and %d (%s) share bytes: a part counted twice", a, p.Buffers[a].Name, b, p.Buffers[b].Name)
	}
	return nil
}

// checkAllReduce checks a collective step of device d as a reduce step,
// and its group: at least two devices, distinct, each holding its part,
// d among them. Order checks that every member has the same step.
func (p *Plan) checkAllReduce(d int, s *Step) error {
	if err := p.checkReduce(d, s); err != nil {
		return err
	}
	if len(s.Group) < 2 || len(s.Group) != len(s.Parts) || !slices.Contains(s.Group, d) {
		return fmt.Errorf("group %v: a collective needs two devices or more, one per part (%d), this one (%d) among them", s.Group, len(s.Parts), d)
	}
	for i, e := range s.Group {
		if b := p.Buffers[s.Parts[i]]; b.Device != e || slices.Contains(s.Group[:i], e) {
			return fmt.Errorf("group %v: part %d, buffer %d, lies on device %d, not on member %d, or the member is named twice", s.Group, i, s.Parts[i], b.Device, e)
		}
	}
	return nil
}

func (p *Plan) checkOpaque(d int, s *Step) error {
	c := s.Call
	if c == nil {
		return fmt.Errorf("no call")
	}
	to, err := p.buffer(s.To)
	if err != nil {
		return err
	}
	if _, err := Cells(c.Batch); err != nil {
		return fmt.Errorf("call.batch: %w", err)
	}
	if _, err := Cells(c.Shape); err != nil {
		return fmt.Errorf("call.result_shape: %w", err)
	}
	if to.Device != d || !slices.Equal(to.Shape, append(slices.Clone(c.Batch), c.Shape...)) {
		return fmt.Errorf("call.batch %v and result_shape %v: buffer %d is of shape %v on device %d, not their concatenation on device %d", c.Batch, c.Shape, s.To, to.Shape, to.Device, d)
	}
	if len(c.Fixed) != len(c.Args) {
		return fmt.Errorf("call.fixed: %d lists for %d arguments", len(c.Fixed), len(c.Args))
	}
	for i, id := range c.Args {
		if err := p.checkOpaqueArg(d, c, i, id); err != nil {
			return fmt.Errorf("call.args: argument %d: %w", i, err)
		}
	}
	return nil
}

// checkOpaqueArg checks argument i, buffer id, of call c on device d:
// every dimension fixed to a batch index holds every index of it.
func (p *Plan) checkOpaqueArg(d int, c *OpaqueCall, i, id int) error {
	b, err := p.buffer(id)
	if err != nil {
		return err
	}
	if b.Device != d || len(c.Fixed[i]) != len(b.Shape) {
		return fmt.Errorf("buffer %d is of rank %d on device %d, fixed %v", id, len(b.Shape), b.Device, c.Fixed[i])
	}
	for dim, f := range c.Fixed[i] {
		if f < -1 || f >= int64(len(c.Batch)) {
			return fmt.Errorf("fixes dimension %d to batch index %d of %d", dim, f, len(c.Batch))
		}
		if f >= 0 && c.Batch[f] > b.Shape[dim] {
			return fmt.Errorf("dimension %d of buffer %d (shape %v) is fixed to batch index %d, which runs to %d", dim, id, b.Shape, f, c.Batch[f])
		}
	}
	return nil
}

// checkDestinations refuses a step writing a buffer that holds an
// input's or a parameter's tile (held), or bytes that another of its
// buffers holds: its destination is none of its sources. A chained
// launch reads back the output of its first kernel, which it writes: it
// may pass that buffer twice.
func (p *Plan) checkDestinations(s *Step, roots []int, held []bool) error {
	reads, writes := p.access(s)
	for _, id := range writes {
		if held[roots[id]] {
			return fmt.Errorf("writes buffer %d (%s), which holds a tile of an input or a parameter: the runtime writes those, the steps only read them", id, p.Buffers[id].Name)
		}
	}
	if s.Op == Launch && p.Kernels[s.Kernel].Form == "chain" {
		written := map[int]bool{}
		for _, id := range writes {
			written[id] = true
		}
		reads = slices.DeleteFunc(slices.Clone(reads), func(id int) bool { return written[id] })
	}
	written := make([]bool, len(reads), len(reads)+len(writes))
	for range writes {
		written = append(written, true)
	}
	if a, b, ok := p.sharing(append(slices.Clone(reads), writes...), written); ok {
		return fmt.Errorf("buffers %d (%s) and %d (%s) share bytes, and the step writes one of them", a, p.Buffers[a].Name, b, p.Buffers[b].Name)
	}
	return nil
}

// access lists the buffers a checked step reads and those it writes: a
// launch those its kernel's Writes name, the others the step's
// destination.
func (p *Plan) access(s *Step) (reads, writes []int) {
	switch s.Op {
	case Launch:
		w := p.Kernels[s.Kernel].Writes
		for i, id := range s.Args {
			if len(w) > 0 && w[0] == i {
				writes, w = append(writes, id), w[1:]
			} else {
				reads = append(reads, id)
			}
		}
		return reads, writes
	case Copy:
		return []int{s.From}, []int{s.To}
	case Reduce, AllReduce:
		return s.Parts, []int{s.To}
	case Opaque:
		return s.Call.Args, []int{s.To}
	case Library:
		b := s.LibraryBuffers()
		return slices.Concat(b[:2], b[3:]), b[2:3]
	}
	return nil, nil
}

// sharing finds two of buffers ids sharing bytes, one of them marked in
// written (nil: all are): a sort by offset, then a sweep.
func (p *Plan) sharing(ids []int, written []bool) (a, b int, found bool) {
	type span struct {
		id, device int
		lo, hi     int64
		written    bool
	}
	spans := make([]span, 0, len(ids))
	for i, id := range ids {
		if buf := p.Buffers[id]; buf.Bytes > 0 {
			spans = append(spans, span{id, buf.Device, buf.Offset, buf.Offset + buf.Bytes, written == nil || written[i]})
		}
	}
	slices.SortFunc(spans, func(x, y span) int { return cmp.Or(cmp.Compare(x.device, y.device), cmp.Compare(x.lo, y.lo)) })
	var reach, reachWritten span // of the spans before, the one reaching furthest, and the written one
	for i, s := range spans {
		if i == 0 || s.device != spans[i-1].device {
			reach, reachWritten = span{}, span{}
		}
		switch {
		case s.written && reach.hi > s.lo:
			return reach.id, s.id, true
		case reachWritten.hi > s.lo:
			return reachWritten.id, s.id, true
		}
		if s.hi > reach.hi {
			reach = s
		}
		if s.written && s.hi > reachWritten.hi {
			reachWritten = s
		}
	}
	return 0, 0, false
}
