// Package emu implements runtime/gpu's Device on host memory, running a
// plan's GPU-flavour kernels under the SIMT emulator (runtime/simt), so
// that the GPU executor is tested on machines without a GPU.
//
// Streams are emulated strictly, to expose ordering mistakes that a real
// GPU would only show at times: enqueued work does not run until some
// device is synchronised, and then the devices run their queues last
// device first, each as far as it can go, a Wait holding a queue until
// the Record it waits for has run. A copy that does not wait for the
// device producing its data therefore reads stale memory. A Wait for an
// event with no Record enqueued before it (which CUDA ignores), a host
// transfer while work is queued, and an access outside allocated memory
// are errors.
package emu

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"tofuc/lang"
	"tofuc/runtime/gpu"
	"tofuc/runtime/native"
	"tofuc/runtime/plan"
	"tofuc/runtime/simt"
)

// system is the state the emulated devices of one plan share.
type system struct {
	plan   *plan.Plan
	engine *simt.Engine
	devs   []*device
	events []*event
	allocs []*native.Memory // sorted by address
}

type event struct {
	enqueued, done int // Records enqueued and run
	at             time.Time
	timing         bool
}

// task is one enqueued operation; it reports false while it must wait.
type task func() (bool, error)

type device struct {
	sys   *system
	id    int
	queue []task
	err   error // the first failure since the last Sync
}

// Open returns the emulated devices of plan p compiled into dir (it needs
// the plan's SIMT module); threads <= 0 means GOMAXPROCS.
func Open(p *plan.Plan, dir string, threads int) ([]gpu.Device, error) {
	e, err := simt.New(p, dir, threads)
	if err != nil {
		return nil, err
	}
	sys := &system{plan: p, engine: e}
	out := make([]gpu.Device, p.Devices)
	for d := range out {
		dev := &device{sys: sys, id: d}
		sys.devs = append(sys.devs, dev)
		out[d] = dev
	}
	return out, nil
}

func (d *device) Name() string { return fmt.Sprintf("emulated device %d", d.id) }

func (d *device) Alloc(n int64) (gpu.Ptr, error) {
	m, err := native.Alloc(n)
	if err != nil {
		return 0, err
	}
	s := d.sys
	i := sort.Search(len(s.allocs), func(i int) bool { return s.allocs[i].Addr(0) > m.Addr(0) })
	s.allocs = slices.Insert(s.allocs, i, m)
	return gpu.Ptr(m.Addr(0)), nil
}

func (d *device) Free(p gpu.Ptr) error {
	s := d.sys
	for i, m := range s.allocs {
		if gpu.Ptr(m.Addr(0)) == p {
			s.allocs = slices.Delete(s.allocs, i, i+1)
			return m.Free()
		}
	}
	return fmt.Errorf("freeing %#x, which is not allocated", p)
}

// bytes is the memory [p, p+n), which must lie in one allocation.
func (s *system) bytes(p gpu.Ptr, n int64) ([]byte, error) {
	i := sort.Search(len(s.allocs), func(i int) bool { return gpu.Ptr(s.allocs[i].Addr(0)) > p }) - 1
	if i >= 0 {
		m := s.allocs[i]
		off := int64(p) - int64(m.Addr(0))
		if off+n <= int64(len(m.Bytes())) {
			return m.Bytes()[off : off+n], nil
		}
	}
	return nil, fmt.Errorf("bytes [%#x, %#x) are not allocated", p, int64(p)+n)
}

// idle reports an error when any device has work queued.
func (s *system) idle() error {
	for _, d := range s.devs {
		if len(d.queue) > 0 {
			return fmt.Errorf("a host transfer while device %d has work queued", d.id)
		}
	}
	return nil
}

func (d *device) Upload(dst gpu.Ptr, src []byte, r gpu.Rows) error {
	if err := d.sys.idle(); err != nil {
		return err
	}
	return copyRows(r, func(off int64) ([]byte, error) { return hostBytes(src, off, r.Width) },
		func(off int64) ([]byte, error) { return d.sys.bytes(dst+gpu.Ptr(off), r.Width) })
}

func (d *device) Download(dst []byte, src gpu.Ptr, r gpu.Rows) error {
	if err := d.sys.idle(); err != nil {
		return err
	}
	return copyRows(r, func(off int64) ([]byte, error) { return d.sys.bytes(src+gpu.Ptr(off), r.Width) },
		func(off int64) ([]byte, error) { return hostBytes(dst, off, r.Width) })
}

func hostBytes(b []byte, off, n int64) ([]byte, error) {
	if off < 0 || off+n > int64(len(b)) {
		return nil, fmt.Errorf("host bytes [%d, %d) outside %d", off, off+n, len(b))
	}
	return b[off : off+n], nil
}

// copyRows copies every row of r from the memory src gives at its offset
// to the memory dst gives.
func copyRows(r gpu.Rows, src, dst func(off int64) ([]byte, error)) error {
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

func (d *device) enqueue(t task) error {
	d.queue = append(d.queue, t)
	return nil
}

func (d *device) Copy(dst gpu.Ptr, from gpu.Device, src gpu.Ptr, r gpu.Rows) error {
	if _, ok := from.(*device); !ok {
		return fmt.Errorf("a copy from %s, not an emulated device", from.Name())
	}
	return d.enqueue(func() (bool, error) {
		return true, copyRows(r, func(off int64) ([]byte, error) { return d.sys.bytes(src+gpu.Ptr(off), r.Width) },
			func(off int64) ([]byte, error) { return d.sys.bytes(dst+gpu.Ptr(off), r.Width) })
	})
}

func (d *device) Zero(p gpu.Ptr, n int64) error {
	return d.enqueue(func() (bool, error) {
		b, err := d.sys.bytes(p, n)
		clear(b)
		return true, err
	})
}

func (d *device) Launch(k int, a *gpu.Args) error {
	kern := &d.sys.plan.Kernels[k]
	if a.Len() != len(kern.Args)+1 {
		return fmt.Errorf("kernel %s takes %d arguments, %d given", kern.Name, len(kern.Args)+1, a.Len())
	}
	return d.enqueue(func() (bool, error) {
		for i, arg := range kern.Args {
			if _, err := d.sys.bytes(a.Value(i), argBytes(arg)); err != nil {
				return true, fmt.Errorf("kernel %s, argument %d: %w", kern.Name, i, err)
			}
		}
		return true, d.sys.engine.Launch(kern, a.Values())
	})
}

// argBytes is the size of an argument.
func argBytes(a plan.Arg) int64 {
	n := int64(lang.ParseDType(a.DType).Size())
	for _, d := range a.Shape {
		n *= d
	}
	return n
}

func (d *device) NewEvent(timing bool) (gpu.Event, error) {
	d.sys.events = append(d.sys.events, &event{timing: timing})
	return gpu.Event(len(d.sys.events)), nil
}

func (s *system) event(e gpu.Event) (*event, error) {
	if e < 1 || int(e) > len(s.events) {
		return nil, fmt.Errorf("no event %d", e)
	}
	return s.events[e-1], nil
}

func (d *device) Record(e gpu.Event) error {
	ev, err := d.sys.event(e)
	if err != nil {
		return err
	}
	ev.enqueued++
	return d.enqueue(func() (bool, error) {
		ev.done++
		ev.at = time.Now()
		return true, nil
	})
}

func (d *device) Wait(e gpu.Event) error {
	ev, err := d.sys.event(e)
	if err != nil {
		return err
	}
	if ev.enqueued == 0 {
		return fmt.Errorf("device %d waits for event %d, which no Record precedes", d.id, e)
	}
	n := ev.enqueued
	return d.enqueue(func() (bool, error) { return ev.done >= n, nil })
}

func (d *device) Elapsed(start, end gpu.Event) (float64, error) {
	a, err := d.sys.event(start)
	if err != nil {
		return 0, err
	}
	b, err := d.sys.event(end)
	if err != nil {
		return 0, err
	}
	if !a.timing || !b.timing || a.done == 0 || b.done == 0 {
		return 0, fmt.Errorf("elapsed time between events %d and %d, not both recorded timing events", start, end)
	}
	return float64(b.at.Sub(a.at).Nanoseconds()) / 1e6, nil
}

// Sync runs every device's queue (see the package comment) and reports
// this device's first failure.
func (d *device) Sync() error {
	if err := d.sys.drain(); err != nil {
		return err
	}
	err := d.err
	d.err = nil
	return err
}

// drain runs the queues, last device first, each as far as it can go,
// until they are empty; a failing task's error is kept for its device's
// Sync. Queues that wait forever are dropped with an error.
func (s *system) drain() error {
	for progress := true; progress; {
		progress = false
		for i := len(s.devs) - 1; i >= 0; i-- {
			d := s.devs[i]
			for len(d.queue) > 0 {
				done, err := d.queue[0]()
				if err != nil && d.err == nil {
					d.err = err
				}
				if !done && err == nil {
					break
				}
				d.queue = d.queue[1:]
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

func (d *device) Close() error { return nil }
