package mpi

import (
	"testing"
	"time"
)

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

// TestBlameAll names who holds a collective call: the ranks that no
// longer answer, else those not in it.
func TestBlameAll(t *testing.T) {
	w := &World{rank: 0, size: 4}
	for _, c := range []struct {
		answers []int32
		want    string
	}{
		{[]int32{allRanks, silent, allRanks, silent}, "ranks 1, 3 stopped answering"},
		{[]int32{allRanks, allRanks, noRank, 1}, "rank 2 waits for no rank, rank 3 waits for rank 1"},
		{[]int32{allRanks, allRanks, allRanks, allRanks}, "every rank waits in it (one slower than the timeout?)"},
		{nil, "MPI is ending"},
	} {
		if got := w.blameAll(c.answers); got != c.want {
			t.Errorf("answers %v: %q, want %q", c.answers, got, c.want)
		}
	}
}

// TestStopProbe: a stopped rank probes for a third of the time mpirun
// gives it before SIGKILL (1 s when unset or unreadable), at most
// probeFor.
func TestStopProbe(t *testing.T) {
	third := time.Second / 3
	for in, want := range map[string]time.Duration{"": third, "x": third, "0": third, "1": third, "5": 5 * time.Second / 3, "60": probeFor} {
		if got := stopProbe(in); got != want {
			t.Errorf("stopProbe(%q) = %s, want %s", in, got, want)
		}
	}
}
