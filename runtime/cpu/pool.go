package cpu

import (
	"runtime"
	"sync/atomic"
	"time"
)

// spinFor is how long an idle worker of a pool polls for the next launch
// before it sleeps. A model's launches follow each other within
// microseconds, while waking a sleeping thread (a new goroutine per
// launch, as before the pool) took 10–25 µs on the development VM, at
// every launch and every pack phase.
const spinFor = 200 * time.Microsecond

// pool runs a launch's pieces on the calling goroutine and on workers
// that stay between launches. An idle worker polls for the next launch
// for spinFor, yielding its processor every yieldsAfter polls (without
// yielding, the launching goroutine, back from a kernel, could wait for
// a processor until the scheduler preempted the poller: ResNet-50 took
// 61 ms instead of 47), then sleeps until a launch wakes it.
type pool struct {
	spin    time.Duration // how long an idle worker polls
	workers []*worker
	current atomic.Pointer[job]
	quit    atomic.Bool
	// parked makes idle workers sleep at once instead of polling, until
	// the next launch (quiet).
	parked atomic.Bool
}

// quiet makes the idle workers sleep now: what the host runs next is no
// launch (a library's call, whose own threads need the cores that
// polling workers would hold).
func (p *pool) quiet() { p.parked.Store(true) }

// worker is one of a pool's goroutines.
type worker struct {
	sleeping atomic.Bool
	wake     chan struct{}
}

// job is one launch: pieces that the goroutines take in turn.
type job struct {
	pieces     int64
	call       func(piece int64)
	next, done atomic.Int64
}

// newPool starts a pool of workers goroutines besides the caller's,
// which poll for spin after a launch (spinFor).
func newPool(workers int, spin time.Duration) *pool {
	p := &pool{spin: spin}
	for range workers {
		w := &worker{wake: make(chan struct{}, 1)}
		p.workers = append(p.workers, w)
		go p.work(w)
	}
	return p
}

// run calls call(piece) for every piece in [0, pieces), on the caller and
// the workers, and returns when all have returned.
func (p *pool) run(pieces int64, call func(piece int64)) {
	j := &job{pieces: pieces, call: call}
	p.parked.Store(false)
	p.current.Store(j)
	for _, w := range p.workers {
		if w.sleeping.Swap(false) {
			w.signal()
		}
	}
	j.take()
	for i := 0; j.done.Load() < pieces; i++ {
		yieldEvery(i)
	}
}

// yieldsAfter is how many polls of an atomic a goroutine makes between
// yields of its processor. Yielding at every poll put both of a 2-thread
// pool's goroutines in the scheduler's lock: about an eighth of a
// recurrent layer's run (its launches are a few microseconds each) was
// runtime.lock2, unlock2, goschedImpl, wakep and findRunnable under perf.
// ResNet-50 is no slower for it (light-random, 2 threads, five
// alternations: medians 55.3–82.1 ms against 55.9–92.6 yielding at every
// poll).
const yieldsAfter = 64

// yieldEvery yields the processor at every yieldsAfter-th poll i, so that
// a goroutine waiting for a processor (the launcher, back from a kernel)
// still gets one soon.
func yieldEvery(i int) {
	if i%yieldsAfter == yieldsAfter-1 {
		runtime.Gosched()
	}
}

// take runs pieces of j until none is left.
func (j *job) take() {
	for piece := j.next.Add(1) - 1; piece < j.pieces; piece = j.next.Add(1) - 1 {
		j.call(piece)
		j.done.Add(1)
	}
}

// work is a worker's loop: every new job, until the pool closes.
func (p *pool) work(w *worker) {
	var seen *job
	for {
		j := p.await(w, seen)
		if j == nil {
			return
		}
		seen = j
		j.take()
	}
}

// await returns the pool's job once it is not seen, or nil once the pool
// is closed: it polls for spinFor (not while the pool is parked), then
// sleeps until signalled.
func (p *pool) await(w *worker, seen *job) *job {
	deadline := time.Now().Add(p.spin)
	for i := 0; ; i++ {
		if p.quit.Load() {
			return nil
		}
		if j := p.current.Load(); j != seen {
			return j
		}
		yieldEvery(i)
		if !p.parked.Load() && (i%yieldsAfter != yieldsAfter-1 || time.Now().Before(deadline)) {
			continue
		}
		w.sleeping.Store(true)
		// A job published after the store above finds the flag set
		// and signals; one published before it is seen here.
		if j := p.current.Load(); j != seen || p.quit.Load() {
			w.sleeping.Store(false)
			continue
		}
		<-w.wake
		deadline = time.Now().Add(p.spin)
	}
}

// signal wakes w if it sleeps, or makes its next sleep return at once.
func (w *worker) signal() {
	select {
	case w.wake <- struct{}{}:
	default: // a signal is pending already
	}
}

// close stops the workers (those running a job finish it first).
func (p *pool) close() {
	p.quit.Store(true)
	for _, w := range p.workers {
		w.signal()
	}
}
