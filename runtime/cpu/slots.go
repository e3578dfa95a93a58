package cpu

import "sync"

// slots hands the engine's threads out to launches: a launch takes as
// many as it splits its range over, in the order the launches asked,
// waiting until that many are free. The devices of one process (a
// pipeline's stages) launch from goroutines of their own; launching at
// once, each on every thread, they ran more threads than there are
// cores, callers spinning for pieces that preempted threads held: the
// multi-modal example's 4-device training step took 15% longer than
// its launches one at a time (docs/partition.md).
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
