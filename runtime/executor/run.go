package executor

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"

	"tofuc/lang"
	"tofuc/runtime/native"
	"tofuc/runtime/plan"
	"tofuc/runtime/tensor"
)

// bindings numbers the parameter bindings of every program in the
// process (Program.binding).
var bindings atomic.Uint64

// Run binds the parameters (running the init steps when they changed
// since the last run: other tensors, compared by identity), writes the
// inputs, runs the steps on every device and returns the outputs by name.
// Run as ranks (OpenRank), every rank is given the whole inputs and
// parameters and writes the tiles its device holds; the outputs are
// gathered on rank 0, the other ranks return none.
func (pr *Program) Run(inputs, params map[string]*tensor.Tensor) (map[string]*tensor.Tensor, error) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if err := pr.prepareRun(inputs, params); err != nil {
		return nil, err
	}
	if err := pr.placeOnDevices(); err != nil {
		return nil, err
	}
	if err := pr.runTimed(); err != nil {
		return nil, err
	}
	out := map[string]*tensor.Tensor{}
	for _, b := range pr.Plan.Outputs {
		t, err := pr.read(b)
		if err != nil {
			return nil, fmt.Errorf("output %s: %w", b.Name, err)
		}
		if t != nil {
			out[b.Name] = t
		}
	}
	return out, nil
}

// prepareRun binds the parameters and writes the inputs.
func (pr *Program) prepareRun(inputs, params map[string]*tensor.Tensor) error {
	if err := pr.agreeOn("inputs", inputs); err != nil {
		return err
	}
	rebind := pr.bound == nil || !maps.Equal(params, pr.bound)
	if pr.ranks != nil {
		// Each rank compares its own tensors: they must take the same
		// branch, whose messages (the init steps') differ.
		if err := agree(pr.ranks, "whether the parameters changed", fmt.Sprint(rebind)); err != nil {
			return err
		}
	}
	if rebind {
		if err := pr.agreeOn("parameters", params); err != nil {
			return err
		}
		pr.bound = nil // until the init steps have run
		pr.binding = bindings.Add(1)
		if err := pr.write(pr.Plan.Params, params, "parameter"); err != nil {
			return err
		}
		if err := pr.run(pr.init, nil); err != nil {
			return err
		}
		// A copy: the caller may change its map. Never nil once bound.
		pr.bound = maps.Clone(params)
		if pr.bound == nil {
			pr.bound = map[string]*tensor.Tensor{}
		}
	}
	return pr.write(pr.Plan.Inputs, inputs, "input")
}

// write copies named tensors into their tiles, on every device holding
// one.
func (pr *Program) write(bindings []plan.Binding, values map[string]*tensor.Tensor, what string) error {
	for _, b := range bindings {
		t, ok := values[b.Name]
		if !ok {
			return fmt.Errorf("missing %s %s", what, b.Name)
		}
		if t.DType.String() != b.DType || fmt.Sprint(ints64(t.Shape)) != fmt.Sprint(b.Shape) {
			return fmt.Errorf("%s %s is %s%v, the plan wants %s%v", what, b.Name, t.DType, t.Shape, b.DType, b.Shape)
		}
		if mem, ok := pr.wholeOnHost(b); ok {
			if err := native.Encode(t, mem); err != nil {
				return err
			}
			continue
		}
		host := make([]byte, int64(t.Len())*int64(t.DType.Size()))
		if err := native.Encode(t, host); err != nil {
			return err
		}
		for _, tile := range b.Tiles {
			buf := pr.Plan.Buffers[tile.Buffer]
			if !pr.local(buf.Device) {
				continue // its rank writes it
			}
			rows := BoxRows(int64(t.DType.Size()), b.Shape, tile.Box, buf.Shape, make([]int64, len(buf.Shape)))
			for _, r := range rows {
				if err := pr.devs[buf.Device].Upload(pr.addr(tile.Buffer), host, r); err != nil {
					return fmt.Errorf("%s %s: %w", what, b.Name, err)
				}
			}
		}
	}
	return nil
}

// read assembles a named tensor from its tiles.
func (pr *Program) read(b plan.Binding) (*tensor.Tensor, error) {
	dt := lang.ParseDType(b.DType)
	shape := ints(b.Shape)
	gather := pr.ranks != nil && pr.ranks.Rank() != 0
	if mem, ok := pr.wholeOnHost(b); ok && !gather { // a rank other than 0 sends even a whole output
		return native.Decode(dt, shape, mem)
	}
	var host []byte
	if !gather {
		host = make([]byte, int64(tensor.NumElements(shape))*int64(dt.Size()))
	}
	for _, tile := range b.Tiles {
		buf := pr.Plan.Buffers[tile.Buffer]
		at := make([]int64, len(tile.Box))
		for d, r := range tile.Box {
			at[d] = r.Lo
		}
		rows := BoxRows(int64(dt.Size()), buf.Shape, wholeBox(buf.Shape), b.Shape, at)
		var err error
		switch {
		case gather && pr.local(buf.Device):
			err = pr.sendTile(pr.addr(tile.Buffer), rows)
		case gather: // another rank's tile
		case pr.local(buf.Device):
			for _, r := range rows {
				if err = pr.devs[buf.Device].Download(host, pr.addr(tile.Buffer), r); err != nil {
					break
				}
			}
		default:
			err = pr.receiveTile(host, buf.Device, rows)
		}
		if err != nil {
			return nil, err
		}
	}
	if gather {
		return nil, nil
	}
	return native.Decode(dt, shape, host)
}

// wholeOnHost returns the memory of b's tile when it is b's only one,
// holds the whole tensor and lies on a host device (the inputs and
// outputs of a plan of one host device): Run encodes and decodes those in
// place, without a copy through a buffer of its own (1.6 ms of a 1024²
// matmul's 15 ms run).
func (pr *Program) wholeOnHost(b plan.Binding) ([]byte, bool) {
	if len(b.Tiles) != 1 {
		return nil, false
	}
	buf := pr.Plan.Buffers[b.Tiles[0].Buffer]
	dev, ok := pr.devs[buf.Device].(HostDevice)
	if !ok || buf.DType != b.DType || !slices.Equal(buf.Shape, b.Shape) {
		return nil, false
	}
	mem, err := dev.Bytes(pr.addr(b.Tiles[0].Buffer), buf.Bytes)
	return mem, err == nil
}

// timer holds the events recorded around every launch of a list, for
// Bench.
type timer struct {
	start, end map[plan.StepRef]Event
}

// startOf is the event before step ref, when t times it.
func (t *timer) startOf(ref plan.StepRef) (Event, bool) {
	if t == nil {
		return 0, false
	}
	e, ok := t.start[ref]
	return e, ok
}

// run enqueues a list of steps on every device, waits for them and
// reports the first failing launch.
func (pr *Program) run(l *list, t *timer) error {
	for d, dev := range pr.devs {
		if err := dev.Zero(pr.scratch[d], pr.statusBytes[d]); err != nil {
			return fmt.Errorf("device %d: %w", d, err)
		}
	}
	if pr.msgFailed != nil {
		return fmt.Errorf("an earlier run's message failed: load the plan again (%w)", pr.msgFailed)
	}
	for _, ref := range l.order {
		if pr.msgFailed != nil {
			break // Sync reports it
		}
		if err := pr.enqueue(l, ref, t); err != nil {
			s := &l.steps[ref.Device][ref.Step]
			return fmt.Errorf("%s: %w", s.Where(ref.Device, ref.Step), err)
		}
	}
	if pr.msgs != nil {
		if err := pr.msgs.Wait(); err != nil { // bounded, where a Sync is not
			return err
		}
	}
	if err := pr.sync(); err != nil {
		return err
	}
	return pr.checkStatus(l)
}

// enqueue enqueues step ref of list l on its device: waits for the
// steps of other devices it depends on, its copies and its launch, and
// the event other devices wait for.
func (pr *Program) enqueue(l *list, ref plan.StepRef, t *timer) error {
	dev := pr.devs[ref.Device]
	s := &l.steps[ref.Device][ref.Step]
	if !pr.local(ref.Device) {
		if !s.Place.Runs(pr.inForce) {
			return nil
		}
		return pr.sendCopies(l.ops[ref.Device][ref.Step], ref.Device)
	}
	for _, r := range s.After {
		if e, ok := l.events[r]; ok && r.Device != ref.Device && pr.local(r.Device) {
			if err := dev.Wait(e); err != nil {
				return err
			}
		}
	}
	o := l.ops[ref.Device][ref.Step]
	if !s.Place.Runs(pr.inForce) {
		o = op{} // another variant of its placement group runs
	}
	for _, c := range o.copies {
		if !pr.local(c.from) {
			if err := pr.receive(c); err != nil {
				return err
			}
			continue
		}
		for _, r := range c.rows {
			if err := dev.Copy(c.dst, pr.devs[c.from], c.src, r); err != nil {
				return err
			}
		}
	}
	if o.launch != nil && dev.Runs(&pr.Plan.Kernels[o.launch.k]) {
		if err := pr.timed(dev, ref, t, func() error { return dev.Launch(o.launch.k, o.launch.args) }); err != nil {
			return err
		}
	}
	if o.host != nil {
		if err := pr.timed(dev, ref, t, func() error { return dev.(HostDevice).Do(o.host) }); err != nil {
			return err
		}
	}
	if o.stream != nil {
		if err := pr.timed(dev, ref, t, o.stream); err != nil {
			return err
		}
	}
	if e, ok := l.events[ref]; ok {
		return dev.Record(e)
	}
	return nil
}

// timed enqueues work, between the timing events of step ref when t
// times it.
func (pr *Program) timed(dev Device, ref plan.StepRef, t *timer, enqueue func() error) error {
	start, ok := t.startOf(ref)
	if ok {
		if err := dev.Record(start); err != nil {
			return err
		}
	}
	if err := enqueue(); err != nil {
		return err
	}
	if ok {
		return dev.Record(t.end[ref])
	}
	return nil
}

// sync waits for every device and reports the first failure.
func (pr *Program) sync() error {
	var errs []error
	for d, dev := range pr.devs {
		if err := dev.Sync(); err != nil {
			errs = append(errs, fmt.Errorf("device %d (%s): %w", d, dev.Name(), err))
		}
	}
	return errors.Join(errs...)
}

// checkStatus reads every device's status words and reports the first
// launch, in device then step order, that recorded an error.
func (pr *Program) checkStatus(l *list) error {
	for d, dev := range pr.devs {
		if pr.statusBytes[d] == 0 || !pr.local(d) {
			continue
		}
		raw := make([]byte, pr.statusBytes[d])
		if err := dev.Download(raw, pr.scratch[d], Whole(pr.statusBytes[d])); err != nil {
			return fmt.Errorf("device %d: reading the status words: %w", d, err)
		}
		words := make([]uint64, len(raw)/8)
		for i := range words {
			words[i] = binary.LittleEndian.Uint64(raw[8*i:])
		}
		for i, o := range l.ops[d] {
			if o.launch == nil {
				continue
			}
			k := &pr.Plan.Kernels[o.launch.k]
			if err := k.StatusError(words[o.launch.status : o.launch.status+plan.StatusWords]); err != nil {
				s := &l.steps[d][i]
				return fmt.Errorf("%s: %w", s.Where(d, i), err)
			}
		}
	}
	return nil
}

func wholeBox(shape []int64) []plan.Dim {
	box := make([]plan.Dim, len(shape))
	for d, n := range shape {
		box[d] = plan.Dim{Hi: n}
	}
	return box
}

func ints(s []int64) []int {
	out := make([]int, len(s))
	for i, d := range s {
		out[i] = int(d)
	}
	return out
}

func ints64(s []int) []int64 {
	out := make([]int64, len(s))
	for i, d := range s {
		out[i] = int64(d)
	}
	return out
}

func elementSize(dtype string) int { return lang.ParseDType(dtype).Size() }
