package mpi

import "testing"

// TestBlame follows probes' answers from the rank waited for to the one
// that holds the others.
func TestBlame(t *testing.T) {
	for _, c := range []struct {
		me, from int
		answers  []int32
		want     string
	}{
		{2, 0, []int32{1, silent, 0, 0}, "rank 0 waits for rank 1, which stopped answering (died, or hangs)"},
		{0, 1, []int32{1, silent, 0, 0}, "rank 1 stopped answering (died, or hangs)"},
		{3, 0, []int32{1, 2, noRank, 0}, "rank 0 waits for rank 1, which waits for rank 2, which waits for no rank (it is still working, or stuck outside its messages)"},
		{0, 1, []int32{1, 2, 1, noRank}, "rank 1 waits for rank 2, which waits for rank 1: the ranks wait for each other (a bug in the plan's order of messages)"},
		{0, 1, []int32{1, 0, noRank, noRank}, "rank 1 waits for rank 0: the ranks wait for each other (a bug in the plan's order of messages)"},
	} {
		w := &World{rank: c.me, size: len(c.answers)}
		if got := w.blame(c.from, c.answers); got != c.want {
			t.Errorf("rank %d, waiting for %d, answers %v:\n got %s\nwant %s", c.me, c.from, c.answers, got, c.want)
		}
	}
}
