package cpu

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestSlots: launches from many goroutines, each taking 1 to 3 of 3
// threads, never hold more than 3 at once, and all of them run (a
// launch of every thread is not starved by launches of one).
func TestSlots(t *testing.T) {
	const threads = 3
	s := newSlots(threads)
	var inUse, most atomic.Int64
	var wg sync.WaitGroup
	for g := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				n := 1 + (g+i)%threads
				s.acquire(n)
				now := inUse.Add(int64(n))
				for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
				}
				if i%50 == 0 {
					time.Sleep(10 * time.Microsecond)
				}
				inUse.Add(-int64(n))
				s.release(n)
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("launches still waiting after 30 s")
	}
	if m := most.Load(); m > threads || m < 2 {
		t.Errorf("at most %d threads held at once, want 2 to %d", m, threads)
	}
}

// TestSlotsInOrder: a launch that waits for every thread is served
// before one that asked after it, although that one's single thread is
// free.
func TestSlotsInOrder(t *testing.T) {
	s := newSlots(2)
	s.acquire(1)
	order := make(chan string, 2)
	go func() { s.acquire(2); order <- "all"; s.release(2) }()
	waitForTickets(s, 2) // "all" waits with its ticket
	go func() { s.acquire(1); order <- "one"; s.release(1) }()
	waitForTickets(s, 3)
	s.release(1)
	if first := <-order; first != "all" {
		t.Errorf("%s was served first, want the launch that asked first", first)
	}
	<-order
}

// waitForTickets waits until s has handed out n tickets.
func waitForTickets(s *slots, n uint64) {
	for {
		s.mu.Lock()
		handed := s.next
		s.mu.Unlock()
		if handed >= n {
			return
		}
		time.Sleep(time.Millisecond)
	}
}
