package mpi

import (
	"cmp"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// World is this process's place among the ranks a launcher (mpirun)
// started: its rank and their number, and the messages between them.
type World struct {
	lib        *library
	rank, size int
	// data carries the plans' messages; ping the liveness pings that
	// name a rank which stopped answering (answered by a goroutine of
	// every rank, so that a rank busy waiting still answers).
	data, ping uintptr
	// Timeout bounds every wait for another rank.
	Timeout time.Duration
	// Version is the MPI library's own description.
	Version string
	pinger  chan struct{}
	pinged  sync.WaitGroup
	// waitingFor is the rank whose message this one waits for (-1:
	// none), the answer to a ping.
	waitingFor atomic.Int32
	// groups are the communicators of the groups of ranks that
	// all-reduce together (Group), by their members.
	groups map[string]uintptr
	// abandoned are the buffers of requests given up (abandon).
	abandoned   []any
	abandonedMu sync.Mutex
	// pingIn and pongOut are the buffers of answerPings' messages:
	// MPI writes and reads them after the calls that name them return,
	// so they live in the World, not on a goroutine's stack.
	pingIn  [1]byte
	pongOut [4]byte
	// finalizing is held to read by every probe and to write by Close:
	// MPI_Finalize must not run beside another call.
	finalizing sync.RWMutex
}

// Launched reports whether this process was started by an MPI launcher
// as one rank of several (Open MPI's mpirun, or a PMIx launcher such as
// Slurm's srun).
func Launched() bool {
	for _, v := range []string{"OMPI_COMM_WORLD_SIZE", "PMIX_RANK"} {
		if os.Getenv(v) != "" {
			return true
		}
	}
	return false
}

// Message tags: the data of plans, and liveness pings and answers.
const (
	tagData = 1
	tagPing = 2
	tagPong = 3
	// anySource is Open MPI's MPI_ANY_SOURCE.
	anySource = -1
	// chunk bounds one message: MPI counts are 32-bit.
	chunk = 1 << 30
)

// Init starts MPI in this process (once; Close ends it) with timeout as
// the bound of every wait for another rank.
func Init(timeout time.Duration) (*World, error) {
	lib, name, err := load()
	if err != nil {
		return nil, err
	}
	w := &World{lib: lib, Timeout: timeout}
	var provided int32
	started := make(chan int32, 1)
	go func() { started <- lib.initThread(0, 0, threadMultiple, &provided) }()
	select {
	case code := <-started:
		if err := w.check("MPI_Init_thread", code); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	case <-time.After(timeout):
		// MPI_Init waits for every rank: one that never started (or
		// stopped before) would hold this one for ever.
		return nil, fmt.Errorf("rank %s: MPI did not start in %s: a rank did not start, the launcher's daemons cannot reach each other, or --timeout is shorter than MPI's start", cmp.Or(os.Getenv("OMPI_COMM_WORLD_RANK"), os.Getenv("PMIX_RANK"), "?"), timeout)
	}
	if provided < threadMultiple {
		lib.finalize()
		return nil, fmt.Errorf("%s runs one thread at a time (MPI thread level %d), tofuc needs MPI_THREAD_MULTIPLE", name, provided)
	}
	var rank, size int32
	for _, err := range []error{
		w.check("MPI_Comm_rank", lib.commRank(lib.commWorld, &rank)),
		w.check("MPI_Comm_size", lib.commSize(lib.commWorld, &size)),
		w.check("MPI_Comm_dup", lib.commDup(lib.commWorld, &w.data)),
		w.check("MPI_Comm_dup", lib.commDup(lib.commWorld, &w.ping)),
	} {
		if err != nil {
			lib.finalize()
			return nil, err
		}
	}
	// A failing call returns its error (a rank that died) instead of
	// ending the process: this package names the rank.
	lib.commSetErrh(w.data, lib.errorsReturn)
	lib.commSetErrh(w.ping, lib.errorsReturn)
	lib.commSetErrh(lib.commWorld, lib.errorsReturn) // where errors of no communicator go

	w.rank, w.size = int(rank), int(size)
	w.waitingFor.Store(noRank)
	w.Version = w.libraryVersion()
	w.pinger = make(chan struct{})
	w.pinged.Add(1)
	go w.answerPings()
	return w, nil
}

// Rank is this process's rank, 0 to Size-1.
func (w *World) Rank() int { return w.rank }

// Size is the number of ranks.
func (w *World) Size() int { return w.size }

// Send sends b to rank to; it returns once b may be reused.
func (w *World) Send(to int, b []byte) error {
	return w.transfer("sending to", to, b, false, func(p unsafe.Pointer, n int32, req *uintptr) int32 {
		return w.lib.isend(p, n, w.lib.byteType, int32(to), tagData, w.data, req)
	})
}

// Recv receives len(b) bytes from rank from into b.
func (w *World) Recv(from int, b []byte) error {
	return w.transfer("receiving from", from, b, true, func(p unsafe.Pointer, n int32, req *uintptr) int32 {
		return w.lib.irecv(p, n, w.lib.byteType, int32(from), tagData, w.data, req)
	})
}

// transfer starts a message of b in chunks and waits for each.
func (w *World) transfer(what string, peer int, b []byte, receive bool, start func(unsafe.Pointer, int32, *uintptr) int32) error {
	if peer < 0 || peer >= w.size || peer == w.rank {
		return fmt.Errorf("%s rank %d, not another of the %d ranks", what, peer, w.size)
	}
	deadline := time.Now().Add(w.Timeout)
	w.waitingFor.Store(int32(peer))
	defer w.waitingFor.Store(noRank)
	for off := 0; off < len(b) || off == 0; off += chunk {
		part := b[off:min(off+chunk, len(b))]
		var req uintptr
		if err := w.check("MPI_Isend/Irecv", start(ptr(part), int32(len(part)), &req)); err != nil {
			return w.peerFailed(what, peer, err)
		}
		done, st, err := w.waitStatus(&req, deadline)
		runtime.KeepAlive(part)
		if err != nil {
			return w.peerFailed(what, peer, err)
		}
		if done && receive && st.count != uint64(len(part)) {
			return fmt.Errorf("%s rank %d: %d bytes, where %d were expected: the ranks' messages differ (a bug: please report it)", what, peer, st.count, len(part))
		}
		if !done {
			w.abandon(req, part, true)
			return w.peerFailed(what, peer, fmt.Errorf("no answer in %s", w.Timeout))
		}
		if len(b) == 0 {
			break
		}
	}
	return nil
}

// ptr is the address of b's first byte (nil for an empty b).
func ptr(b []byte) unsafe.Pointer {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Pointer(&b[0])
}

// wait polls request req until it completes or the deadline passes:
// never a call that blocks, so that a rank that died cannot hang this
// one.
func (w *World) wait(req *uintptr, deadline time.Time) (bool, error) {
	done, _, err := w.waitStatus(req, deadline)
	return done, err
}

// waitStatus is wait, with the status of the request completed (the
// bytes a receive received).
func (w *World) waitStatus(req *uintptr, deadline time.Time) (bool, status, error) {
	pause := time.Duration(0)
	for {
		var flag int32
		var st status
		if err := w.check("MPI_Test", w.lib.test(req, &flag, &st)); err != nil {
			return false, st, err
		}
		if flag != 0 { // MPI_Test's own result is the request's (st.err is left unset)
			return true, st, nil
		}
		if time.Now().After(deadline) {
			return false, st, nil
		}
		// Spin first (a message between two steps is often on its
		// way), then sleep up to a millisecond between polls.
		if pause == 0 {
			runtime.Gosched()
		} else {
			time.Sleep(pause)
		}
		pause = min(max(pause*2, time.Microsecond), time.Millisecond)
	}
}

// abandon gives up request req, whose buffer buf MPI may still read or
// write (a message whose peer stopped answering, or matched and under
// way): a message is cancelled where MPI still can (a collective cannot
// be: MPI_Cancel of one is a fatal error), and buf kept from the garbage
// collector for the life of the process, never freed. Only a rank that
// is about to fail abandons a request.
func (w *World) abandon(req uintptr, buf any, message bool) {
	if message {
		w.lib.cancel(&req)
	}
	w.abandonedMu.Lock()
	w.abandoned = append(w.abandoned, buf)
	w.abandonedMu.Unlock()
}

// Abort ends every rank's process with code (MPI_Abort).
func (w *World) Abort(code int) { w.lib.abort(w.lib.commWorld, int32(code)) }

// Close ends MPI in this process; every rank calls it. MPI_Finalize
// waits for every rank: bounded by the timeout, as every wait.
func (w *World) Close() error {
	close(w.pinger)
	w.pinged.Wait()
	w.finalizing.Lock() // held: the process ends without MPI
	done := make(chan int32, 1)
	go func() { done <- w.lib.finalize() }()
	select {
	case code := <-done:
		return w.check("MPI_Finalize", code)
	case <-time.After(w.Timeout):
		return fmt.Errorf("MPI_Finalize not done in %s: a rank did not end (stopped, or hangs)", w.Timeout)
	}
}

// check turns an MPI error code into an error naming the call.
func (w *World) check(call string, code int32) error {
	if code == success {
		return nil
	}
	buf := make([]byte, 256)
	n := int32(0)
	if w.lib.errorString(code, &buf[0], &n) == success && n > 0 {
		return fmt.Errorf("%s: %s", call, string(buf[:min(int(n), len(buf))]))
	}
	return fmt.Errorf("%s: MPI error %d", call, code)
}

// libraryVersion is MPI_Get_library_version up to its first comma ("Open MPI v4.1.4").
func (w *World) libraryVersion() string {
	buf := make([]byte, 8192) // MPI_MAX_LIBRARY_VERSION_STRING is 256 in Open MPI
	n := int32(0)
	if w.lib.libraryVer(&buf[0], &n) != success {
		return "unknown MPI"
	}
	s, _, _ := strings.Cut(string(buf[:min(int(n), len(buf))]), ",")
	return strings.TrimRight(s, "\x00 ,")
}
