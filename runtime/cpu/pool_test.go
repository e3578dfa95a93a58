package cpu

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// TestPoolRunsEveryPiece: every piece of every launch runs exactly once
// and before run returns, whether the workers are polling (launches back
// to back) or asleep (a pause longer than spinFor), with more workers
// than pieces and fewer.
func TestPoolRunsEveryPiece(t *testing.T) {
	p := newPool(3, spinFor)
	defer p.close()
	for launch := range 300 {
		pieces := int64(1 + launch%37)
		counts := make([]atomic.Int32, pieces)
		p.run(pieces, func(piece int64) {
			if launch%7 == 0 {
				time.Sleep(50 * time.Microsecond) // pieces of unequal cost
			}
			counts[piece].Add(1)
		})
		for i := range counts {
			if n := counts[i].Load(); n != 1 {
				t.Fatalf("launch %d: piece %d of %d ran %d times by the time run returned", launch, i, pieces, n)
			}
		}
		if launch%50 == 49 {
			time.Sleep(5 * spinFor) // the workers go to sleep
		}
	}
}

// TestPoolClose: closing a pool stops its workers, asleep or polling.
func TestPoolClose(t *testing.T) {
	before := runtime.NumGoroutine()
	asleep, polling := newPool(4, spinFor), newPool(4, spinFor)
	asleep.run(8, func(int64) {})
	polling.run(8, func(int64) {})
	time.Sleep(5 * spinFor)
	polling.run(8, func(int64) {})
	asleep.close()
	polling.close()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines after closing the pools, %d before", runtime.NumGoroutine(), before)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestPoolWorkersHelp: the workers take pieces, not only the caller:
// each of a launch's two pieces waits until both have started, which
// only two goroutines at once can do, after pauses that put the
// workers to sleep and without them (launches back to back).
func TestPoolWorkersHelp(t *testing.T) {
	p := newPool(1, spinFor)
	defer p.close()
	for launch := range 100 {
		if launch%10 == 0 {
			time.Sleep(5 * spinFor)
		}
		var started atomic.Int32
		failed := atomic.Bool{}
		p.run(2, func(int64) {
			started.Add(1)
			deadline := time.Now().Add(time.Second)
			for started.Load() < 2 {
				if time.Now().After(deadline) {
					failed.Store(true)
					return
				}
				runtime.Gosched()
			}
		})
		if failed.Load() {
			t.Fatalf("launch %d: a piece waited a second for the other to start: no worker took it", launch)
		}
	}
}

// TestQuietPoolSleeps: after quiet, an idle worker sleeps at once,
// where it would poll for its whole spin (a minute here) and hold a core
// that a library's threads need.
func TestQuietPoolSleeps(t *testing.T) {
	p := newPool(1, time.Minute)
	defer p.close()
	p.run(2, func(int64) {})
	time.Sleep(10 * time.Millisecond)
	if p.workers[0].sleeping.Load() {
		t.Fatal("the worker slept before its spin ended")
	}
	p.quiet()
	deadline := time.Now().Add(5 * time.Second)
	for !p.workers[0].sleeping.Load() {
		if time.Now().After(deadline) {
			t.Fatal("the worker still polls 5 s after quiet")
		}
		time.Sleep(time.Millisecond)
	}
	var ran atomic.Int32
	p.run(4, func(int64) { ran.Add(1) }) // a launch wakes it
	if ran.Load() != 4 {
		t.Fatalf("%d of 4 pieces ran after a quiet pool's launch", ran.Load())
	}
}
