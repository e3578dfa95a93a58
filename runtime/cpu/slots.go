package cpu

import "sync"

// slots hands the engine's threads out to launches, in the order the
// launches asked, each waiting until the threads it takes are free: one
// for a launch on the caller's thread alone, all of them for a launch
// split over the pool (whose workers join whichever launch they see
// last: two launches of two threads each, at once on four threads, ran
// on five). The devices of one process (a pipeline's stages) launch
// from goroutines of their own; launching at once, each on every
// thread, they ran more threads than there are cores, callers spinning
// for pieces that preempted threads held: the multi-modal example's
// 4-device training step took 20% longer than with the slots
// (docs/decisions.md, "Launches take the host's threads in turn").
type slots struct {
	mu         sync.Mutex
	turn       *sync.Cond
	free       int
	next, head uint64 // the next ticket to hand out, the one served next
}

func newSlots(threads int) *slots {
	s := &slots{free: threads}
	s.turn = sync.NewCond(&s.mu)
	return s
}

// acquire waits for its turn and for n free threads, and takes them.
func (s *slots) acquire(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ticket := s.next
	s.next++
	for ticket != s.head || s.free < n {
		s.turn.Wait()
	}
	s.head++
	s.free -= n
	s.turn.Broadcast() // the next ticket may find its threads free
}

// release gives back n threads.
func (s *slots) release(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.free += n
	s.turn.Broadcast()
}
