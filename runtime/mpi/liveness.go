package mpi

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

// A ping's answer is the rank the pinged rank waits for: noRank when it
// waits for none, allRanks when it waits in a collective call; silent
// stands for no answer.
const (
	noRank   = -1
	silent   = -2
	allRanks = -3
	// probeFor bounds the pings of a rank that gave up waiting.
	probeFor = 2 * time.Second
)

// pingByte is what a ping sends.
var pingByte byte

// peerFailed explains a failed wait for rank peer: it follows the ranks
// each waits for, from peer, to the one that holds them (one that no
// longer answers, or one that waits for no rank).
func (w *World) peerFailed(what string, peer int, cause error) error {
	blame := w.blame(peer, w.probe(probeFor))
	// The others gave up at about the same time and probe too: this
	// rank's exit must not end the job (the launcher stops the ranks
	// and resumes a stopped one) before their probes are answered.
	time.Sleep(probeFor)
	return fmt.Errorf("%s rank %d: %w: %s", what, peer, cause, blame)
}

// blame follows the chain of waits from rank from through answers (a
// probe's) and says where it ends: "rank 0 waits for rank 1, which
// stopped answering".
func (w *World) blame(from int, answers []int32) string {
	if answers == nil {
		return "MPI is ending"
	}
	var chain []string
	seen := map[int]bool{}
	for r := from; ; {
		seen[r] = true
		next := answers[r]
		switch {
		case next == silent:
			chain = append(chain, "stopped answering (died, or hangs)")
		case next == noRank:
			chain = append(chain, "waits for no rank (it is still working, or stuck outside its messages)")
		case next == allRanks:
			chain = append(chain, "waits in an all-reduce: "+w.blameAll(answers))
		case int(next) == w.rank || seen[int(next)]:
			chain = append(chain, fmt.Sprintf("waits for rank %d: the ranks wait for each other (a bug in the plan's order of messages)", next))
		default:
			chain = append(chain, fmt.Sprintf("waits for rank %d", next))
			r = int(next)
			continue
		}
		return fmt.Sprintf("rank %d %s", from, strings.Join(chain, ", which "))
	}
}

// blameAll says which ranks hold a collective call, from a probe's
// answers: those that stopped answering, else those that are not in it.
func (w *World) blameAll(answers []int32) string {
	if answers == nil {
		return "MPI is ending"
	}
	if gone := silentRanks(answers); gone != "" {
		return gone
	}
	var out []string
	for r, a := range answers {
		if a != allRanks {
			out = append(out, fmt.Sprintf("rank %d waits for %s", r, waitName(a)))
		}
	}
	if len(out) == 0 {
		return "every rank waits in it (one slower than the timeout?)"
	}
	return strings.Join(out, ", ")
}

// waitName names what a rank's answer says it waits for.
func waitName(a int32) string {
	if a == noRank {
		return "no rank"
	}
	return fmt.Sprintf("rank %d", a)
}

// probe pings every other rank and returns what each answered within
// d: the rank it waits for, noRank, or silent (this rank's own entry is
// what it waits for); nil once MPI is ending (Close).
func (w *World) probe(d time.Duration) []int32 {
	if !w.finalizing.TryRLock() {
		return nil // MPI is ending: no rank is asked
	}
	defer w.finalizing.RUnlock()
	deadline := time.Now().Add(d)
	answers := make([]int32, w.size)
	for r := range answers {
		answers[r] = silent
	}
	reqs := make([]uintptr, w.size)
	for r := range w.size {
		if r == w.rank {
			answers[r] = w.waitingFor.Load()
			continue
		}
		var send uintptr
		if w.lib.isend(unsafe.Pointer(&pingByte), 1, w.lib.byteType, int32(r), tagPing, w.ping, &send) != success {
			continue
		}
		w.lib.requestFree(&send) // pingByte never changes: MPI may send it when it can
		if w.lib.irecv(unsafe.Pointer(&answers[r]), 4, w.lib.byteType, int32(r), tagPong, w.ping, &reqs[r]) != success {
			reqs[r] = 0
		}
	}
	for r, req := range reqs {
		if req == 0 {
			continue
		}
		if done, err := w.wait(&reqs[r], deadline); !done || err != nil {
			w.abandon(reqs[r], answers, true) // a late answer lands in memory kept alive
			answers[r] = silent
		}
	}
	runtime.KeepAlive(answers)
	return slices.Clone(answers)
}

// answerPings answers every rank's pings with the rank this one waits
// for, until Close.
func (w *World) answerPings() {
	defer w.pinged.Done()
	for {
		var req uintptr
		if w.lib.irecv(unsafe.Pointer(&w.pingIn[0]), 1, w.lib.byteType, anySource, tagPing, w.ping, &req) != success {
			return
		}
		from, ok := w.awaitPing(&req)
		if !ok {
			return
		}
		binary.LittleEndian.PutUint32(w.pongOut[:], uint32(w.waitingFor.Load()))
		var sreq uintptr
		if w.lib.isend(unsafe.Pointer(&w.pongOut[0]), 4, w.lib.byteType, from, tagPong, w.ping, &sreq) == success {
			if done, _ := w.wait(&sreq, time.Now().Add(probeFor)); !done {
				w.abandon(sreq, nil, true) // the asker gave up, or died; pongOut lives on
			}
		}
	}
}

// awaitPing polls the receive of a ping until it arrives (its sender) or
// Close.
func (w *World) awaitPing(req *uintptr) (int32, bool) {
	for {
		var flag int32
		var st status
		if w.lib.test(req, &flag, &st) != success {
			return 0, false
		}
		if flag != 0 {
			return st.source, true
		}
		select {
		case <-w.pinger:
			w.lib.cancel(req)
			w.lib.requestFree(req) // pingIn lives on
			return 0, false
		case <-time.After(time.Millisecond):
		}
	}
}

// ExitOnStop makes a signal to stop (the launcher's SIGTERM when another
// rank failed, or an interrupt) end this process with status 1 after one
// line on stderr: what the rank waited for and, where the chain of
// waits from it ends in a rank that no longer answers, that rank. (The
// other ranks are being stopped too: a chain that ends elsewhere says
// nothing sure.) The probe behind that line, and a pause after it,
// each take a third of the time mpirun gives a rank between SIGTERM and
// SIGKILL (stopProbe): the pause because mpirun kills every rank still
// running as soon as one stopped rank exits, and all of them are
// stopped at once and probe about as long.
func (w *World) ExitOnStop(stderr io.Writer) {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	stopFor := stopProbe(os.Getenv(sigkillTimeoutEnv))
	go func() {
		sig := <-stop
		msg := fmt.Sprintf("rank %d of %d: stopped (%v)", w.rank, w.size, sig)
		peer := w.waitingFor.Load()
		answers := w.probe(stopFor)
		switch {
		case peer >= 0:
			msg += fmt.Sprintf(" while waiting for rank %d", peer)
		case peer == allRanks:
			msg += " in an all-reduce"
		}
		chain := ""
		if peer >= 0 {
			chain = w.blame(int(peer), answers)
		}
		if strings.Contains(chain, "stopped answering") {
			msg += ": " + chain
		} else if gone := silentRanks(answers); gone != "" {
			msg += ": " + gone
		}
		fmt.Fprintln(stderr, msg)
		time.Sleep(stopFor) // the others print theirs before this exit ends them
		os.Exit(1)
	}()
}

// sigkillTimeoutEnv is how mpirun tells its ranks the seconds it waits
// after SIGTERM before it kills them (`--mca odls_base_sigkill_timeout
// S`, or the variable itself); Open MPI's default is 1.
const sigkillTimeoutEnv = "OMPI_MCA_odls_base_sigkill_timeout"

// stopProbe is how long a stopped rank's probe may take, from mpirun's
// time before SIGKILL (seconds, as in sigkillTimeoutEnv; 1 when unset
// or unreadable): a third of it, so that the probe, the line and the
// pause after it fit on a busy machine, and at most probeFor.
func stopProbe(sigkillTimeout string) time.Duration {
	seconds, err := strconv.Atoi(sigkillTimeout)
	if err != nil || seconds < 1 {
		seconds = 1
	}
	return min(time.Duration(seconds)*time.Second/3, probeFor)
}

// silentRanks names the ranks that did not answer a probe.
func silentRanks(answers []int32) string {
	var rs []string
	for r, a := range answers {
		if a == silent {
			rs = append(rs, fmt.Sprint(r))
		}
	}
	switch len(rs) {
	case 0:
		return ""
	case 1:
		return "rank " + rs[0] + " stopped answering"
	}
	return "ranks " + strings.Join(rs, ", ") + " stopped answering"
}
