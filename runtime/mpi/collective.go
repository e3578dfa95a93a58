package mpi

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"time"

	"tofuc/lang"
)

// AllReduces reports whether AllReduce combines elements of dtype with
// reducer: MPI sums f32, f64, i32 and i64 (its max and min do not keep
// a NaN as tofuc's do).
func (w *World) AllReduces(dtype, reducer string) bool {
	_, ok := w.lib.sums[dtype]
	return ok && reducer == "sum"
}

// Group makes the communicator of a group of ranks (member i is rank
// group[i]) for AllReduce. Every rank calls it, for the same groups in
// the same order, as MPI_Comm_split wants; a rank that does not come
// fails the others after the timeout.
func (w *World) Group(group []int) error {
	key := fmt.Sprint(group)
	if _, ok := w.groups[key]; ok || len(group) == w.size {
		return nil // made, or the world's
	}
	color, at := int32(undefined), int32(0)
	if i := slices.Index(group, w.rank); i >= 0 {
		color, at = 0, int32(i)
	}
	var comm uintptr
	done := make(chan int32, 1)
	go func() { done <- w.lib.commSplit(w.data, color, at, &comm) }()
	select {
	case code := <-done:
		if err := w.check("MPI_Comm_split", code); err != nil {
			return fmt.Errorf("the group of ranks %v: %w", group, err)
		}
	case <-time.After(w.Timeout):
		return fmt.Errorf("the group of ranks %v: MPI_Comm_split not done in %s: %s", group, w.Timeout, w.blameAll(w.probe(probeFor)))
	}
	if comm != 0 && color == 0 {
		w.lib.commSetErrh(comm, w.lib.errorsReturn)
	}
	if w.groups == nil {
		w.groups = map[string]uintptr{}
	}
	w.groups[key] = comm
	return nil
}

// AllReduce sums part, elements of dtype, over the ranks of group (this
// one among them; Group made it) into result, as long as part, on each
// of them (MPI_Iallreduce, polled). part and result are Go memory,
// which a call that times out keeps alive for MPI (abandon).
func (w *World) AllReduce(group []int, part, result []byte, dtype string) error {
	comm := w.data
	if len(group) != w.size {
		var ok bool
		if comm, ok = w.groups[fmt.Sprint(group)]; !ok || !slices.Contains(group, w.rank) {
			return fmt.Errorf("an all-reduce of the ranks %v, a group not made (Group) or without rank %d", group, w.rank)
		}
	}
	size := int64(lang.ParseDType(dtype).Size())
	if len(part) != len(result) || int64(len(part))%size != 0 || int64(len(part))/size > math.MaxInt32 {
		return fmt.Errorf("an all-reduce of %d bytes into %d of %s: not whole elements, or more than MPI counts", len(part), len(result), dtype)
	}
	w.waitingFor.Store(allRanks)
	defer w.waitingFor.Store(noRank)
	var req uintptr
	err := w.check("MPI_Iallreduce", w.lib.iallreduce(ptr(part), ptr(result), int32(int64(len(part))/size), w.lib.sums[dtype], w.lib.opSum, comm, &req))
	if err == nil {
		var done bool
		done, err = w.wait(&req, time.Now().Add(w.Timeout))
		if err == nil && !done {
			w.abandon(req, [][]byte{part, result}, false)
			err = fmt.Errorf("not done in %s", w.Timeout)
		}
	}
	runtime.KeepAlive(part)
	runtime.KeepAlive(result)
	if err != nil {
		answers := w.probe(probeFor)
		time.Sleep(probeFor) // as peerFailed: the others' probes answered first
		return fmt.Errorf("an all-reduce of %d bytes among the ranks %v: %w: %s", len(part), group, err, w.blameAll(answers))
	}
	return nil
}
