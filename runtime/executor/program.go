package executor

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"tofuc/runtime/plan"
	"tofuc/runtime/tensor"
)

// Program is a plan loaded onto its devices, ready to run.
type Program struct {
	Plan *plan.Plan
	devs []Device
	// ranks connects the processes of a plan run as ranks (OpenRank):
	// this one runs device ranks.Rank(); nil when it runs them all.
	// msgs carries the plan's messages on the device's stream when the
	// host cannot read its memory, through the device buffer messages.
	ranks    Ranks
	msgs     DeviceMessages
	messages Ptr
	// msgFailed is the first failure of a host rank's message: the run
	// stops there.
	msgFailed error
	// arena is each device's arena; scratch each device's status words
	// (statusWords per launch) followed by its staging buffers.
	arena, scratch []Ptr
	statusBytes    []int64
	// launches and staged count the status words and the staging bytes
	// handed out so far, per device.
	launches, staged []int64
	init, steps      *list
	args             []*Args
	bound            map[string]*tensor.Tensor // the parameters last bound
	// binding numbers that binding, unique in the process: a library
	// that keeps what it made of the parameters (oneDNN's reordered
	// weights) makes it again for another number.
	binding uint64
	mu      sync.Mutex
	// Timing makes Run time every launch (StepTimes), with events on
	// the devices' streams.
	Timing bool
	// Unmeasured makes devices with libraries of their own (GPUs) run
	// every group's first library that loads, untimed: no
	// placeOnDevices.
	Unmeasured bool
	timer      *timer
	times      []StepTime
	// inForce is each placement group's variant that runs; loaded holds
	// the variants whose libraries loaded, Generated among them, whose
	// steps are prepared. Notes say where a variant the plan chose does
	// not run, and why.
	inForce []string
	loaded  map[string]bool
	// placed is what placeOnDevices chose, once (placeDone).
	placed    []GroupChoice
	placeDone bool
	Notes     []string
	// releases free the library resources the program holds (oneDNN's
	// convolutions).
	releases []func()
}

// list is one list of steps (the plan's Init or Steps), prepared.
type list struct {
	steps [][]plan.Step
	ops   [][]op
	// order is the order in which the steps are enqueued: each after
	// the steps it waits for. events are the steps another device waits
	// for, recorded after them.
	order  []plan.StepRef
	events map[plan.StepRef]Event
}

// op is what one step enqueues: copies (a copy step, or the parts of a
// reduction held by other devices), then a launch (a launch or reduce
// step) or a call on the host (an opaque step).
type op struct {
	copies []transfer
	launch *launch
	host   func() error
	// stream enqueues a library step's call on the device's stream (a
	// GPU's library).
	stream func() error
	// lib is a library step's call (run by host or stream), which is
	// timed as launches are.
	lib plan.LibraryCall
}

// transfer copies rows from device from's memory at src to dst.
type transfer struct {
	from     int
	src, dst Ptr
	rows     []Rows
}

// launch runs plan kernel k; its status words are word status of its
// device's scratch.
type launch struct {
	k      int
	args   *Args
	status int64
}

// stagingAlign aligns staging buffers (CUDA allocations are 256-byte
// aligned; kernels may rely on the alignment of their arguments).
const stagingAlign = 256

// Load prepares plan p on devs, one per logical device of the plan: it
// allocates every device's arena, status words and staging buffers and
// lays out the argument vector of every launch. Plans with opaque steps
// on devices that are no HostDevice are refused. The program owns the
// devices: Close closes them, and so does a failing Load.
func Load(p *plan.Plan, devs []Device) (*Program, error) {
	return load(p, devs, nil, nil)
}

// load is Load, in a rank's process when ranks is not nil (its device's
// messages msgs, when not nil).
func load(p *plan.Plan, devs []Device, ranks Ranks, msgs DeviceMessages) (_ *Program, err error) {
	pr := &Program{Plan: p, devs: devs, ranks: ranks, msgs: msgs}
	defer func() {
		if err != nil {
			pr.Close()
		}
	}()
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if len(devs) != p.Devices {
		return nil, fmt.Errorf("the plan runs on %d devices, %d given", p.Devices, len(devs))
	}
	if err := supported(p, devs); err != nil {
		return nil, err
	}
	if err := CheckHostMemory(p, devs); err != nil {
		return nil, err
	}
	pr.chooseVariants()
	if ranks != nil {
		if err := agree(ranks, "the plan sealed", p.Seal); err != nil {
			return nil, err
		}
		if err := agree(ranks, "the libraries in force", strings.Join(pr.inForce, ",")); err != nil {
			return nil, err
		}
	}
	if err := pr.allocate(); err != nil {
		return nil, err
	}
	if pr.init, err = pr.prepare(p.Init); err != nil {
		return nil, err
	}
	if pr.steps, err = pr.prepare(p.Steps); err != nil {
		return nil, err
	}
	return pr, nil
}

// supported refuses what the devices cannot run: opaque steps on a
// device without host memory (a GPU).
func supported(p *plan.Plan, devs []Device) error {
	for _, lists := range [][][]plan.Step{p.Init, p.Steps} {
		for d, steps := range lists {
			for i, s := range steps {
				_, host := devs[d].(HostDevice)
				if _, far := devs[d].(elsewhere); s.Op == plan.Opaque && !host && !far {
					return fmt.Errorf("device %d, step %d (%s): the opaque function %s runs on a host, which a GPU runtime does not have: run this plan with tofuc run", d, i, s.Label, s.Call.Fn)
				}
			}
		}
	}
	return nil
}

// allocate sizes and allocates every device's arena and scratch memory.
func (pr *Program) allocate() error {
	p := pr.Plan
	n := p.Devices
	pr.arena, pr.scratch = make([]Ptr, n), make([]Ptr, n)
	pr.statusBytes, pr.launches, pr.staged = make([]int64, n), make([]int64, n), make([]int64, n)
	staging := make([]int64, n)
	for _, lists := range [][][]plan.Step{p.Init, p.Steps} {
		for d, steps := range lists {
			for _, s := range steps {
				if _, one := pr.collective(d, &s); one {
					continue // one library call: no launch, nothing staged
				}
				if (s.Op == plan.Launch || s.Combines()) && pr.prepared(&s) {
					pr.statusBytes[d] += plan.StatusWords * 8
				}
				if s.Combines() {
					staging[d] += int64(len(remoteParts(p, d, &s))) * align(p.Buffers[s.To].Bytes)
				}
			}
		}
	}
	for d, dev := range pr.devs {
		var err error
		if pr.arena[d], err = dev.Alloc(p.ArenaBytes[d]); err != nil {
			return fmt.Errorf("device %d: arena of %d bytes: %w", d, p.ArenaBytes[d], err)
		}
		if pr.scratch[d], err = dev.Alloc(align(pr.statusBytes[d]) + staging[d]); err != nil {
			return fmt.Errorf("device %d: %w", d, err)
		}
	}
	return nil
}

func align(n int64) int64 { return (n + stagingAlign - 1) / stagingAlign * stagingAlign }

// remoteParts lists the parts of a reduction on device d that other
// devices hold.
func remoteParts(p *plan.Plan, d int, s *plan.Step) []int {
	var out []int
	for _, id := range s.Parts {
		if p.Buffers[id].Device != d {
			out = append(out, id)
		}
	}
	return out
}

// addr is the device address of buffer id.
func (pr *Program) addr(id int) Ptr {
	b := pr.Plan.Buffers[id]
	return pr.arena[b.Device] + Ptr(b.Offset)
}

// prepare lays out the operations of a list of steps and the order in
// which they are enqueued.
func (pr *Program) prepare(steps [][]plan.Step) (*list, error) {
	l := &list{steps: steps, ops: make([][]op, len(steps)), events: map[plan.StepRef]Event{}}
	var err error
	if l.order, err = plan.Order(steps); err != nil {
		return nil, err
	}
	for d, ss := range steps {
		for i := range ss {
			s := &ss[i]
			o, err := pr.op(d, i, s)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", s.Where(d, i), err)
			}
			l.ops[d] = append(l.ops[d], o)
			for _, r := range s.After {
				if _, ok := l.events[r]; ok || r.Device == d {
					continue // a device's own steps are ordered by its stream
				}
				if l.events[r], err = pr.devs[r.Device].NewEvent(false); err != nil {
					return nil, err
				}
			}
		}
	}
	return l, nil
}

// op prepares step s, step i of device d.
func (pr *Program) op(d, i int, s *plan.Step) (op, error) {
	if !pr.prepared(s) {
		return op{}, nil // a variant whose library is missing
	}
	if o, ok := pr.collective(d, s); ok {
		return o, nil
	}
	if !pr.local(d) {
		return pr.copiesOf(d, s), nil
	}
	switch s.Op {
	case plan.Copy:
		return pr.copiesOf(d, s), nil
	case plan.Launch:
		l, err := pr.launch(d, s.Kernel, s.Args, nil)
		return op{launch: l}, err
	case plan.Reduce, plan.AllReduce:
		return pr.reduce(d, s)
	case plan.Opaque:
		return op{host: pr.opaque(pr.devs[d].(HostDevice), s, s.Where(d, i))}, nil
	case plan.Library:
		if sd, ok := pr.devs[d].(StreamLibraryDevice); ok {
			return op{stream: pr.streamLibrary(sd, s), lib: s.LibraryCall()}, nil
		}
		call, err := pr.library(pr.devs[d], s, s.Where(d, i))
		return op{host: call, lib: s.LibraryCall()}, err
	}
	return op{}, fmt.Errorf("unknown step %q", s.Op)
}

// reduce copies the parts other devices hold into staging buffers of
// device d and launches the step's reduction kernel on the parts there:
// a reduce step, and one member's step of an all-reduce, which this
// executor runs as each member's reduction of every part (as ranks too:
// the parts are messages, in the order the group's steps meet in).
func (pr *Program) reduce(d int, s *plan.Step) (op, error) {
	o, staged := pr.stageParts(d, s)
	var err error
	o.launch, err = pr.launch(d, s.Kernel, append(append([]int{}, s.Parts...), s.To), staged)
	return o, err
}

// stageParts is the copies of reduce step s of device d that bring the
// parts other devices hold to its staging buffers, and where each part
// is staged.
func (pr *Program) stageParts(d int, s *plan.Step) (op, map[int]Ptr) {
	size := pr.Plan.Buffers[s.To].Bytes
	staged := map[int]Ptr{}
	var o op
	for _, id := range remoteParts(pr.Plan, d, s) {
		dst := pr.nextStaging(d, size)
		staged[id] = dst
		o.copies = append(o.copies, transfer{from: pr.Plan.Buffers[id].Device, src: pr.addr(id), dst: dst, rows: []Rows{Whole(size)}})
	}
	return o, staged
}

// copiesOf is what step s of device d, which another rank runs,
// copies: the sends of this rank's part (sendCopies).
func (pr *Program) copiesOf(d int, s *plan.Step) op {
	switch s.Op {
	case plan.Copy:
		from, to := pr.Plan.Buffers[s.From], pr.Plan.Buffers[s.To]
		rows := BoxRows(int64(elementSize(from.DType)), from.Shape, s.Src, to.Shape, s.At)
		return op{copies: []transfer{{from: from.Device, src: pr.addr(s.From), dst: pr.addr(s.To), rows: rows}}}
	case plan.Reduce, plan.AllReduce:
		o, _ := pr.stageParts(d, s)
		return o
	}
	return op{} // it runs there
}

// nextStaging takes the next n bytes of device d's staging memory.
func (pr *Program) nextStaging(d int, n int64) Ptr {
	p := pr.scratch[d] + Ptr(align(pr.statusBytes[d])+pr.staged[d])
	pr.staged[d] += align(n)
	return p
}

// launch lays out the arguments of kernel k on buffers ids of device d
// (a buffer in staged is read from its staging copy) and its status
// words.
func (pr *Program) launch(d, k int, ids []int, staged map[int]Ptr) (*launch, error) {
	ptrs := make([]Ptr, 0, len(ids)+1)
	for _, id := range ids {
		if p, ok := staged[id]; ok {
			ptrs = append(ptrs, p)
			continue
		}
		ptrs = append(ptrs, pr.addr(id))
	}
	status := pr.launches[d] * plan.StatusWords
	pr.launches[d]++
	args, err := NewArgs(append(ptrs, pr.scratch[d]+Ptr(status*8)))
	if err != nil {
		return nil, err
	}
	pr.args = append(pr.args, args)
	return &launch{k: k, args: args, status: status}, nil
}

// Close frees the program's memory and closes its devices.
func (pr *Program) Close() error {
	for _, release := range pr.releases {
		release()
	}
	pr.releases = nil
	var errs []error
	for _, a := range pr.args {
		errs = append(errs, a.Free())
	}
	for d, dev := range pr.devs {
		if d < len(pr.arena) { // allocated
			for _, p := range []Ptr{pr.arena[d], pr.scratch[d]} {
				if p != 0 {
					errs = append(errs, dev.Free(p))
				}
			}
		}
		errs = append(errs, dev.Close())
	}
	return errors.Join(errs...)
}
