// Package host runs the logical devices of a plan in this process: each
// is an executor.Device whose memory is host memory and whose kernels an
// Engine runs (runtime/cpu: the host-flavour kernels, natively;
// runtime/simt: the GPU-flavour kernels under the SIMT emulator). Host
// devices can run opaque steps (executor.HostDevice).
//
// How enqueued work runs is the devices' Mode:
//
//   - Inline: at once, on the goroutine that enqueues it. A plan of one
//     device runs so: no hand-over per step; so does a plan of several
//     timed one step at a time (executor.Options.OneAtATime), enqueued
//     in the order of its steps.
//   - Streams: each device has a goroutine of its own that runs its
//     queue in order, a Wait holding it until the Record it waits for has
//     run on another device's goroutine: the devices of a partitioned
//     plan run at once, as GPUs would.
//   - Strict: nothing runs until some device is synchronised, and then
//     the devices run their queues last device first, each as far as it
//     can go, a Wait holding a queue until the Record it waits for has
//     run. A copy that does not wait for the device producing its data
//     therefore reads stale memory: the tests use it to expose ordering
//     mistakes that other modes would only show at times. Its memory
//     starts as NaNs (every byte 0xff), so that a read of bytes no step
//     wrote shows too.
//
// In every mode a Wait for an event no Record precedes (which CUDA
// ignores), a host transfer while work is queued, and an access outside
// allocated memory are errors.
package host

import (
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"tofuc/lang"
	"tofuc/runtime/executor"
	"tofuc/runtime/native"
	"tofuc/runtime/plan"
)

// Engine runs the kernels of a plan on host memory.
type Engine interface {
	// Runs reports whether the engine runs kernel k's launches.
	Runs(k *plan.Kernel) bool
	// Launch runs kernel k, which it Runs; its argument vector (the
	// addresses of its buffers, then that of its status words) is at
	// argv.
	Launch(k *plan.Kernel, argv uintptr) error
	Close() error
}

// Mode is how enqueued work runs (see the package comment).
type Mode uint8

// Modes.
const (
	Inline Mode = iota
	Streams
	Strict
)

// ModeOf is the mode a plan of n devices runs in, as opts ask: Strict
// when asked (tests), else Inline for one device or one at a time, and
// Streams for several.
func ModeOf(n int, opts executor.Options) Mode {
	switch {
	case opts.Strict:
		return Strict
	case n == 1 || opts.OneAtATime:
		return Inline
	}
	return Streams
}

// system is the state the devices of one plan share.
type system struct {
	plan   *plan.Plan
	engine Engine
	mode   Mode
	devs   []*device
	mu     sync.Mutex // guards what follows, and the queues
	cond   *sync.Cond // signalled when a task ends or is queued
	events []*event
	allocs []*native.Memory // sorted by address
	closed int
}

type event struct {
	enqueued, done int // Records enqueued and run
	at             time.Time
	timing         bool
}

// task is one enqueued operation; it reports false while it must wait
// (the lock held).
type task struct {
	ready func() bool // nil: always
	run   func() error
}

type device struct {
	sys     *system
	id      int
	queue   []task
	running bool // a Streams device's goroutine runs a task
	closed  bool
	err     error // the first failure since the last Sync
}

// Open returns the logical devices of plan p on host memory, their
// kernels run by engine, which they close with the last of them.
func Open(p *plan.Plan, engine Engine, mode Mode) []executor.Device {
	sys := &system{plan: p, engine: engine, mode: mode}
	sys.cond = sync.NewCond(&sys.mu)
	out := make([]executor.Device, p.Devices)
	for d := range out {
		dev := &device{sys: sys, id: d}
		sys.devs = append(sys.devs, dev)
		out[d] = dev
		if mode == Streams {
			go dev.serve()
		}
	}
	return out
}

func (d *device) Name() string { return fmt.Sprintf("host device %d", d.id) }

func (d *device) Runs(k *plan.Kernel) bool { return d.sys.engine.Runs(k) }

// LibraryEngine is an engine of the host's own kernels, whose devices run
// the vendor libraries' steps of placement groups
// (executor.LibraryDevice); an emulated GPU's engine is not one.
type LibraryEngine interface {
	Engine
	RunsLibraries() bool
}

// Quieter is an engine whose idle threads poll for the next launch.
// Quiet makes them sleep now: the host function that follows (a
// library's call) may have threads of its own that need the cores.
type Quieter interface {
	Quiet()
}

// RunsLibraries reports whether the engine is a LibraryEngine that runs
// them.
func (d *device) RunsLibraries() bool {
	le, ok := d.sys.engine.(LibraryEngine)
	return ok && le.RunsLibraries()
}

func (d *device) Alloc(n int64) (executor.Ptr, error) {
	m, err := native.Alloc(n)
	if err != nil {
		return 0, err
	}
	s := d.sys
	if s.mode == Strict {
		// Bytes no step has written read as NaNs (every byte 0xff), not
		// as the zeros of fresh memory, which would hide the read.
		for i := range m.Bytes() {
			m.Bytes()[i] = 0xff
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	i := sort.Search(len(s.allocs), func(i int) bool { return s.allocs[i].Addr(0) > m.Addr(0) })
	s.allocs = slices.Insert(s.allocs, i, m)
	return executor.Ptr(m.Addr(0)), nil
}

func (d *device) Free(p executor.Ptr) error {
	s := d.sys
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, m := range s.allocs {
		if executor.Ptr(m.Addr(0)) == p {
			s.allocs = slices.Delete(s.allocs, i, i+1)
			return m.Free()
		}
	}
	return fmt.Errorf("freeing %#x, which is not allocated", p)
}

// Bytes is the memory [p, p+n), which must lie in one allocation.
func (d *device) Bytes(p executor.Ptr, n int64) ([]byte, error) {
	s := d.sys
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes(p, n)
}

// bytes is Bytes with the lock held.
func (s *system) bytes(p executor.Ptr, n int64) ([]byte, error) {
	i := sort.Search(len(s.allocs), func(i int) bool { return executor.Ptr(s.allocs[i].Addr(0)) > p }) - 1
	if i >= 0 && n >= 0 {
		m := s.allocs[i]
		off := int64(p) - int64(m.Addr(0))
		if off+n <= int64(len(m.Bytes())) {
			return m.Bytes()[off : off+n], nil
		}
	}
	return nil, fmt.Errorf("bytes [%#x, %#x) are not allocated", p, int64(p)+n)
}

// idle reports an error when any device has work queued or running.
func (s *system) idle() error {
	for _, d := range s.devs {
		if len(d.queue) > 0 || d.running {
			return fmt.Errorf("a host transfer while device %d has work queued", d.id)
		}
	}
	return nil
}

func (d *device) Upload(dst executor.Ptr, src []byte, r executor.Rows) error {
	return d.transfer(r, func(off int64) ([]byte, error) { return hostBytes(src, off, r.Width) },
		func(off int64) ([]byte, error) { return d.sys.bytes(dst+executor.Ptr(off), r.Width) })
}

func (d *device) Download(dst []byte, src executor.Ptr, r executor.Rows) error {
	return d.transfer(r, func(off int64) ([]byte, error) { return d.sys.bytes(src+executor.Ptr(off), r.Width) },
		func(off int64) ([]byte, error) { return hostBytes(dst, off, r.Width) })
}

// transfer copies rows between host memory and an idle device's.
func (d *device) transfer(r executor.Rows, src, dst func(off int64) ([]byte, error)) error {
	s := d.sys
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.idle(); err != nil {
		return err
	}
	return copyRows(r, src, dst)
}

func hostBytes(b []byte, off, n int64) ([]byte, error) {
	if off < 0 || off+n > int64(len(b)) {
		return nil, fmt.Errorf("host bytes [%d, %d) outside %d", off, off+n, len(b))
	}
	return b[off : off+n], nil
}

// copyRows copies every row of r from the memory src gives at its offset
// to the memory dst gives.
func copyRows(r executor.Rows, src, dst func(off int64) ([]byte, error)) error {
	var err error
	r.Each(func(so, do int64) {
		if err != nil {
			return
		}
		var s, d []byte
		if s, err = src(so); err == nil {
			if d, err = dst(do); err == nil {
				copy(d, s)
			}
		}
	})
	return err
}

func (d *device) Copy(dst executor.Ptr, from executor.Device, src executor.Ptr, r executor.Rows) error {
	if f, ok := from.(*device); !ok || f.sys != d.sys {
		return fmt.Errorf("a copy from %s, not a host device of the same plan", from.Name())
	}
	return d.enqueue(task{run: func() error {
		return copyRows(r, func(off int64) ([]byte, error) { return d.Bytes(src+executor.Ptr(off), r.Width) },
			func(off int64) ([]byte, error) { return d.Bytes(dst+executor.Ptr(off), r.Width) })
	}})
}

func (d *device) Zero(p executor.Ptr, n int64) error {
	return d.enqueue(task{run: func() error {
		b, err := d.Bytes(p, n)
		clear(b)
		return err
	}})
}

func (d *device) Launch(k int, a *executor.Args) error {
	kern := &d.sys.plan.Kernels[k]
	if a.Len() != len(kern.Args)+1 {
		return fmt.Errorf("kernel %s takes %d arguments, %d given", kern.Name, len(kern.Args)+1, a.Len())
	}
	return d.enqueue(task{run: func() error {
		for i, arg := range kern.Args {
			if _, err := d.Bytes(a.Value(i), argBytes(arg)); err != nil {
				return fmt.Errorf("kernel %s, argument %d: %w", kern.Name, i, err)
			}
		}
		return d.sys.engine.Launch(kern, a.Values())
	}})
}

// Do enqueues f (executor.HostDevice), run with the engine's idle
// threads quiet.
func (d *device) Do(f func() error) error {
	return d.enqueue(task{run: func() error {
		if q, ok := d.sys.engine.(Quieter); ok {
			q.Quiet()
		}
		return f()
	}})
}

// argBytes is the size of an argument.
func argBytes(a plan.Arg) int64 {
	n := int64(lang.ParseDType(a.DType).Size())
	for _, d := range a.Shape {
		n *= d
	}
	return n
}

func (d *device) NewEvent(timing bool) (executor.Event, error) {
	s := d.sys
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, &event{timing: timing})
	return executor.Event(len(s.events)), nil
}

// event returns event e, the lock held.
func (s *system) event(e executor.Event) (*event, error) {
	if e < 1 || int(e) > len(s.events) {
		return nil, fmt.Errorf("no event %d", e)
	}
	return s.events[e-1], nil
}

func (d *device) Record(e executor.Event) error {
	s := d.sys
	s.mu.Lock()
	ev, err := s.event(e)
	if err == nil {
		ev.enqueued++
	}
	s.mu.Unlock()
	if err != nil {
		return err
	}
	return d.enqueue(task{run: func() error {
		s.mu.Lock()
		ev.done++
		ev.at = time.Now()
		s.mu.Unlock()
		return nil
	}})
}

func (d *device) Wait(e executor.Event) error {
	s := d.sys
	s.mu.Lock()
	ev, err := s.event(e)
	n := 0
	if err == nil {
		n = ev.enqueued
	}
	s.mu.Unlock()
	switch {
	case err != nil:
		return err
	case n == 0:
		return fmt.Errorf("device %d waits for event %d, which no Record precedes", d.id, e)
	}
	return d.enqueue(task{ready: func() bool { return ev.done >= n }, run: func() error { return nil }})
}

func (d *device) Elapsed(start, end executor.Event) (float64, error) {
	s := d.sys
	s.mu.Lock()
	defer s.mu.Unlock()
	a, err := s.event(start)
	if err != nil {
		return 0, err
	}
	b, err := s.event(end)
	if err != nil {
		return 0, err
	}
	if !a.timing || !b.timing || a.done == 0 || b.done == 0 {
		return 0, fmt.Errorf("elapsed time between events %d and %d, not both recorded timing events", start, end)
	}
	return float64(b.at.Sub(a.at).Nanoseconds()) / 1e6, nil
}

// enqueue adds t to the device's work: run at once (Inline), queued for
// the device's goroutine (Streams) or until a Sync (Strict).
func (d *device) enqueue(t task) error {
	s := d.sys
	if s.mode == Inline {
		if t.ready != nil {
			s.mu.Lock()
			ready := t.ready()
			s.mu.Unlock()
			if !ready {
				return fmt.Errorf("device %d waits for an event that no device records before it", d.id)
			}
		}
		d.fail(t.run())
		return nil
	}
	s.mu.Lock()
	d.queue = append(d.queue, t)
	s.mu.Unlock()
	s.cond.Broadcast()
	return nil
}

// fail keeps err as the device's first failure since its last Sync.
func (d *device) fail(err error) {
	if err == nil {
		return
	}
	d.sys.mu.Lock()
	if d.err == nil {
		d.err = err
	}
	d.sys.mu.Unlock()
}

// serve runs a Streams device's queue until the device closes.
func (d *device) serve() {
	s := d.sys
	s.mu.Lock()
	defer s.mu.Unlock()
	for !d.closed {
		if len(d.queue) == 0 || d.queue[0].ready != nil && !d.queue[0].ready() {
			s.cond.Wait()
			continue
		}
		t := d.queue[0]
		d.queue = d.queue[1:]
		d.running = true
		s.mu.Unlock()
		err := t.run()
		s.mu.Lock()
		d.running = false
		if err != nil && d.err == nil {
			d.err = err
		}
		s.cond.Broadcast()
	}
}

// Sync waits for the device's work and reports its first failure.
func (d *device) Sync() error {
	s := d.sys
	var err error
	switch s.mode {
	case Strict:
		err = s.drain()
	case Streams:
		s.mu.Lock()
		for len(d.queue) > 0 || d.running {
			if d.stuck() {
				err = fmt.Errorf("device %d waits forever for an event", d.id)
				d.queue = nil
				break
			}
			s.cond.Wait()
		}
		s.mu.Unlock()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		err = d.err
	}
	d.err = nil
	return err
}

// stuck reports whether no device can make progress while some has
// work queued (the lock held).
func (d *device) stuck() bool {
	for _, o := range d.sys.devs {
		if o.running || len(o.queue) > 0 && (o.queue[0].ready == nil || o.queue[0].ready()) {
			return false
		}
	}
	return true
}

// drain runs the Strict queues, last device first, each as far as it can
// go, until they are empty; a failing task's error is kept for its
// device's Sync. Queues that wait forever are dropped with an error.
func (s *system) drain() error {
	for progress := true; progress; {
		progress = false
		for i := len(s.devs) - 1; i >= 0; i-- {
			d := s.devs[i]
			for len(d.queue) > 0 {
				t := d.queue[0]
				if t.ready != nil && !t.ready() {
					break
				}
				d.queue = d.queue[1:]
				d.fail(t.run())
				progress = true
			}
		}
	}
	var err error
	for _, d := range s.devs {
		if len(d.queue) > 0 && err == nil {
			err = fmt.Errorf("device %d waits forever for an event", d.id)
		}
		d.queue = nil
	}
	return err
}

// Close stops the device's goroutine; the last device to close closes
// the engine.
func (d *device) Close() error {
	s := d.sys
	s.mu.Lock()
	if d.closed {
		s.mu.Unlock()
		return nil
	}
	d.closed = true // serve returns
	s.closed++
	last := s.closed == len(s.devs)
	s.mu.Unlock()
	s.cond.Broadcast()
	if last {
		return s.engine.Close()
	}
	return nil
}
