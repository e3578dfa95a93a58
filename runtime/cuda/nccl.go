package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"time"

	"tofuc/runtime/executor"
)

// NCCL (libnccl.so.2), loaded at run time through purego like the driver
// and the other GPU libraries: the communication of GPU ranks, enqueued
// on their logical devices' streams, so that it keeps its order with
// their kernels (docs/gpu.md, "NCCL").

// ncclAPI is the part of NCCL 2 (nccl.h) tofuc calls. Counts are
// size_t, datatypes and reductions enums, communicators and streams
// pointers.
type ncclAPI struct {
	getVersion        func(v *int32) int32
	getUniqueID       func(id *UniqueID) int32
	commInitRank      uintptr // called by callInitRank: its id is passed by value
	commDestroy       func(c uintptr) int32
	commAbort         func(c uintptr) int32
	commGetAsyncError func(c uintptr, r *int32) int32
	getErrorString    func(r int32) uintptr
	groupStart        func() int32
	groupEnd          func() int32
	send              func(buf, count uint64, t DataType, peer int32, c, s uintptr) int32
	recv              func(buf, count uint64, t DataType, peer int32, c, s uintptr) int32
	allReduce         func(send, recv, count uint64, t DataType, op RedOp, c, s uintptr) int32
	reduceScatter     func(send, recv, recvCount uint64, t DataType, op RedOp, c, s uintptr) int32
	allGather         func(send, recv, sendCount uint64, t DataType, c, s uintptr) int32
	broadcast         func(send, recv, count uint64, t DataType, root int32, c, s uintptr) int32
}

// ncclLib loads NCCL: $TOFUC_LIBNCCL, else libnccl.so.2.
var ncclLib = &gpuLibrary[ncclAPI]{label: "nccl", what: "NCCL", env: "TOFUC_LIBNCCL",
	where: "PyTorch's wheels (site-packages/nvidia/nccl/lib) and NVIDIA's libnccl2 package",
	files: []string{"libnccl.so.2"},
	symbols: func(api *ncclAPI) []symbol {
		return []symbol{{&api.getVersion, "ncclGetVersion"}, {&api.getUniqueID, "ncclGetUniqueId"},
			{&api.commInitRank, "ncclCommInitRank"}, {&api.commDestroy, "ncclCommDestroy"}, {&api.commAbort, "ncclCommAbort"},
			{&api.commGetAsyncError, "ncclCommGetAsyncError"}, {&api.getErrorString, "ncclGetErrorString"},
			{&api.groupStart, "ncclGroupStart"}, {&api.groupEnd, "ncclGroupEnd"},
			{&api.send, "ncclSend"}, {&api.recv, "ncclRecv"}, {&api.allReduce, "ncclAllReduce"},
			{&api.reduceScatter, "ncclReduceScatter"}, {&api.allGather, "ncclAllGather"}, {&api.broadcast, "ncclBroadcast"}}
	}}

// DataType is an ncclDataType_t.
type DataType int32

// NCCL's datatypes.
const (
	Int8     DataType = 0
	Uint8    DataType = 1
	Int32    DataType = 2
	Uint32   DataType = 3
	Int64    DataType = 4
	Uint64   DataType = 5
	Float16  DataType = 6
	Float32  DataType = 7
	Float64  DataType = 8
	Bfloat16 DataType = 9
)

// RedOp is an ncclRedOp_t.
type RedOp int32

// NCCL's reductions.
const (
	Sum  RedOp = 0
	Prod RedOp = 1
	Max  RedOp = 2
	Min  RedOp = 3
	Avg  RedOp = 4
)

// UniqueID is an ncclUniqueId: rank 0 makes it (NewUniqueID) and sends
// it to the other ranks, and every rank opens its communicator with it.
type UniqueID [128]byte

// ncclError is an error for an NCCL result other than success, with
// NCCL's message.
func ncclError(api *ncclAPI, call string, r int32) error {
	if r == 0 {
		return nil
	}
	return fmt.Errorf("%s: %s (NCCL error %d)", call, goString(api.getErrorString(r)), r)
}

// NCCLVersion is the version of the NCCL that loads, as major.minor.patch.
func NCCLVersion() (string, error) {
	api, err := ncclLib.load()
	if err != nil {
		return "", err
	}
	var v int32
	if err := ncclError(api, "ncclGetVersion", api.getVersion(&v)); err != nil {
		return "", err
	}
	if v < 20900 { // NCCL_VERSION_CODE before 2.9: 1000·major + 100·minor + patch
		return fmt.Sprintf("%d.%d.%d", v/1000, v%1000/100, v%100), nil
	}
	return fmt.Sprintf("%d.%d.%d", v/10000, v%10000/100, v%100), nil
}

// NewUniqueID makes the id of a new communicator (ncclGetUniqueId), on
// rank 0, for every rank's OpenComm.
func NewUniqueID() (UniqueID, error) {
	var id UniqueID
	api, err := ncclLib.load()
	if err != nil {
		return id, err
	}
	return id, ncclError(api, "ncclGetUniqueId", api.getUniqueID(&id))
}

// Comm is one rank's NCCL communicator, on a logical device: its
// operations are enqueued on the device's stream, after the work
// enqueued there before them (kernels, copies, other operations) and
// before the work enqueued after them. One goroutine uses a Comm.
type Comm struct {
	v          *device
	api        *ncclAPI
	comm       uintptr // 0 once closed or aborted
	rank, size int
	last       string // the last operation enqueued, for Wait's errors
	since      int    // operations enqueued since the last Wait
	// host is the communicator as host messages (Ranks), whose device
	// buffer Close frees.
	host *hostOverNCCL
}

// OpenComm makes logical device dev (of Driver.Open) rank rank of the
// size ranks that open a communicator with id (ncclCommInitRank). It
// returns once every rank has opened its own, so each rank calls it at
// the same time, from its own process or goroutine, on a GPU of its own
// (NCCL refuses two ranks on one GPU).
func OpenComm(dev executor.Device, id UniqueID, rank, size int) (*Comm, error) {
	v, ok := dev.(*device)
	if !ok {
		return nil, fmt.Errorf("NCCL runs on the logical devices of CUDA GPUs, not on %s", dev.Name())
	}
	api, err := ncclLib.load()
	if err != nil {
		return nil, err
	}
	m := &Comm{v: v, api: api, rank: rank, size: size}
	err = v.c.do(func() error {
		r, err := callInitRank(api.commInitRank, &m.comm, int32(size), &id, int32(rank))
		if err != nil {
			return err
		}
		return ncclError(api, "ncclCommInitRank", r)
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", m.where(), err)
	}
	v.c.users++ // the communicator's context outlives a device closed first
	return m, nil
}

// OpenCommWithin is OpenComm bounded by timeout: ncclCommInitRank waits
// for every rank, and one that never comes would hold this one for
// ever. The call left behind on timeout keeps waiting: the process is
// meant to end.
func OpenCommWithin(dev executor.Device, id UniqueID, rank, size int, timeout time.Duration) (*Comm, error) {
	type opened struct {
		m   *Comm
		err error
	}
	done := make(chan opened, 1)
	go func() {
		m, err := OpenComm(dev, id, rank, size)
		done <- opened{m, err}
	}()
	select {
	case o := <-done:
		return o.m, o.err
	case <-time.After(timeout):
		return nil, fmt.Errorf("rank %d of %d: NCCL's communicator not made in %s: a rank did not come (stopped, failed, or unreachable)", rank, size, timeout)
	}
}

// release gives up the communicator's hold on its context.
func (m *Comm) release() error {
	if m.v.c.users--; m.v.c.users == 0 {
		return m.v.c.release()
	}
	return nil
}

// where names the rank in errors.
func (m *Comm) where() string {
	return fmt.Sprintf("rank %d of %d on %s", m.rank, m.size, m.v.Name())
}

// enqueue makes NCCL call what on the device's stream, with the device's
// context current.
func (m *Comm) enqueue(what string, call func(comm, stream uintptr) int32) error {
	if m.comm == 0 {
		return fmt.Errorf("%s: %s on a communicator closed or aborted: open another", m.where(), what)
	}
	err := m.v.c.do(func() error { return ncclError(m.api, what, call(m.comm, m.v.stream)) })
	if err != nil {
		return fmt.Errorf("%s: %w", m.where(), err)
	}
	m.last, m.since = what, m.since+1
	return nil
}

// Send enqueues a send of bytes bytes at buf to rank peer, which
// enqueues a Recv of as many.
func (m *Comm) Send(buf executor.Ptr, bytes int64, peer int) error {
	return m.enqueue(fmt.Sprintf("ncclSend of %d bytes to rank %d", bytes, peer), func(c, s uintptr) int32 {
		return m.api.send(uint64(buf), uint64(bytes), Int8, int32(peer), c, s)
	})
}

// Recv enqueues a receive of bytes bytes into buf from rank peer.
func (m *Comm) Recv(buf executor.Ptr, bytes int64, peer int) error {
	return m.enqueue(fmt.Sprintf("ncclRecv of %d bytes from rank %d", bytes, peer), func(c, s uintptr) int32 {
		return m.api.recv(uint64(buf), uint64(bytes), Int8, int32(peer), c, s)
	})
}

// AllReduce enqueues recv = op over the ranks of their send, count
// elements of type t (send may be recv).
func (m *Comm) AllReduce(send, recv executor.Ptr, count int64, t DataType, op RedOp) error {
	return m.enqueue("ncclAllReduce", func(c, s uintptr) int32 {
		return m.api.allReduce(uint64(send), uint64(recv), uint64(count), t, op, c, s)
	})
}

// ReduceScatter enqueues recv = op over the ranks of the rank's block
// of count elements of their send (size·count elements).
func (m *Comm) ReduceScatter(send, recv executor.Ptr, count int64, t DataType, op RedOp) error {
	return m.enqueue("ncclReduceScatter", func(c, s uintptr) int32 {
		return m.api.reduceScatter(uint64(send), uint64(recv), uint64(count), t, op, c, s)
	})
}

// AllGather enqueues recv (size·count elements) = every rank's send
// (count elements), in rank order.
func (m *Comm) AllGather(send, recv executor.Ptr, count int64, t DataType) error {
	return m.enqueue("ncclAllGather", func(c, s uintptr) int32 {
		return m.api.allGather(uint64(send), uint64(recv), uint64(count), t, c, s)
	})
}

// Broadcast enqueues recv = rank root's send, count elements (send is
// read on root only).
func (m *Comm) Broadcast(send, recv executor.Ptr, count int64, t DataType, root int) error {
	return m.enqueue(fmt.Sprintf("ncclBroadcast from rank %d", root), func(c, s uintptr) int32 {
		return m.api.broadcast(uint64(send), uint64(recv), uint64(count), t, int32(root), c, s)
	})
}

// Group runs f, which enqueues operations, between ncclGroupStart and
// ncclGroupEnd: NCCL then runs them together, so that a rank's sends
// and receives (to peers that send back) do not wait for each other.
// NCCL's group is its thread's, so f runs on one OS thread.
func Group(f func() error) error {
	api, err := ncclLib.load()
	if err != nil {
		return err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := ncclError(api, "ncclGroupStart", api.groupStart()); err != nil {
		return err
	}
	err = f()
	return errors.Join(err, ncclError(api, "ncclGroupEnd", api.groupEnd()))
}

// Wait waits until the work enqueued on the device's stream is done,
// polling the stream (cuStreamQuery) and NCCL's asynchronous error,
// until deadline. An error of NCCL's, or work not done by the deadline
// (a peer that never posted its part waits for ever), aborts the
// communicator, so that the stream's work ends.
func (m *Comm) Wait(deadline time.Time) error {
	if m.comm == 0 {
		return fmt.Errorf("%s: a wait on a communicator closed or aborted: open another", m.where())
	}
	pending := fmt.Sprintf("%s (the last of %d operations enqueued since the last wait)", m.last, m.since)
	for pause := 50 * time.Microsecond; ; pause = min(2*pause, 10*time.Millisecond) {
		done, err := m.poll()
		if err != nil {
			return errors.Join(fmt.Errorf("%s: %s failed: %w; the communicator is aborted", m.where(), pending, err), m.Abort())
		}
		if done {
			m.since = 0
			return nil
		}
		if time.Now().After(deadline) {
			return errors.Join(fmt.Errorf("%s: %s not done by the deadline: a peer did not post its part (is its rank stuck or gone?); the communicator is aborted", m.where(), pending), m.Abort())
		}
		time.Sleep(pause)
	}
}

// poll reports whether the device's stream has no work left, or NCCL's
// asynchronous error.
func (m *Comm) poll() (bool, error) {
	var async int32
	if err := ncclError(m.api, "ncclCommGetAsyncError", m.api.commGetAsyncError(m.comm, &async)); err != nil {
		return false, err
	}
	if err := ncclError(m.api, "NCCL", async); err != nil {
		return false, err
	}
	d := m.v.c.drv
	var r result
	err := m.v.c.do(func() error {
		if r = d.cuStreamQuery(m.v.stream); r == errorNotReady {
			return nil
		}
		return d.check("cuStreamQuery", r)
	})
	return r == 0, err
}

// Abort ends the communicator at once (ncclCommAbort), its operations in
// flight dropped; a peer may be hanging.
func (m *Comm) Abort() error {
	if m.comm == 0 {
		return nil
	}
	c := m.comm
	m.comm = 0
	err := m.v.c.do(func() error { return ncclError(m.api, "ncclCommAbort", m.api.commAbort(c)) })
	return errors.Join(err, m.release())
}

// Close destroys the communicator (ncclCommDestroy), once its
// operations are done (Wait).
func (m *Comm) Close() error {
	if m.comm == 0 {
		return nil
	}
	if m.host != nil && m.host.buf != 0 {
		if err := m.v.Free(m.host.buf); err != nil {
			return err
		}
		m.host.buf, m.host.size = 0, 0
	}
	err := m.v.c.do(func() error { return ncclError(m.api, "ncclCommDestroy", m.api.commDestroy(m.comm)) })
	if err != nil {
		return fmt.Errorf("%s: %w (Wait for the operations in flight, or Abort)", m.where(), err)
	}
	m.comm = 0
	return m.release()
}

// Messages is the communicator as a rank's device messages
// (executor.DeviceMessages), each wait for them bounded by timeout.
func (m *Comm) Messages(timeout time.Duration) executor.DeviceMessages {
	return boundedComm{m, timeout}
}

type boundedComm struct {
	*Comm
	timeout time.Duration
}

func (b boundedComm) Wait() error { return b.Comm.Wait(time.Now().Add(b.timeout)) }

// summed are the dtypes whose all-reduce NCCL sums for the executor
// (executor.DeviceCollectives), and NCCL's type of each: not f16 or
// bf16, whose sum tofuc's reduction kernels round otherwise.
var summed = map[string]DataType{"f32": Float32, "f64": Float64, "i32": Int32, "i64": Int64}

func (b boundedComm) AllReduces(dtype, reducer string) bool {
	_, ok := summed[dtype]
	return ok && reducer == "sum"
}

func (b boundedComm) AllReduce(part, result executor.Ptr, count int64, dtype string) error {
	return b.Comm.AllReduce(part, result, count, summed[dtype], Sum)
}
