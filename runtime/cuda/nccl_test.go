package cuda

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"tofuc/internal/fakecuda"
	"tofuc/runtime/executor"
)

// openRanks opens a communicator of n ranks on n fake GPUs (the fake
// driver and NCCL of internal/fakecuda), each rank opening its own from
// a goroutine, as the ranks of a job do from their processes.
func openRanks(t *testing.T, n int) ([]executor.Device, []*Comm) {
	t.Helper()
	devs := openFake(t, strconv.Itoa(n), n)
	withLibrary(t, strconv.Itoa(n), "TOFUC_LIBNCCL", fakecuda.BuildNCCL, func() error { _, err := ncclLib.load(); return err })
	return devs, reopen(t, devs)
}

// onRanks runs f for every rank at once, each in its goroutine, and
// reports the errors with report.
func onRanks(n int, f func(rank int) error, report func(...any)) {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() { errs[r] = f(r) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			report(err)
		}
	}
}

// upload puts xs in a new buffer of dev.
func upload(dev executor.Device, xs []float32) (executor.Ptr, error) {
	p, err := dev.Alloc(int64(4 * len(xs)))
	if err != nil {
		return 0, err
	}
	return p, dev.Upload(p, floatBytes(xs), executor.Whole(int64(4*len(xs))))
}

func download(dev executor.Device, p executor.Ptr, n int) ([]float32, error) {
	out := make([]float32, n)
	return out, dev.Download(floatBytes(out), p, executor.Whole(int64(4*n)))
}

// collective is an operation every rank enqueues, with what its send
// buffer holds (in elements), what its receive buffer does, and the
// receive buffer a rank must hold after it, from every rank's send.
type collective struct {
	name         string
	sends, recvs int
	enqueue      func(m *Comm, send, recv executor.Ptr) error
	want         func(rank int, sends [][]float32) []float32
}

// collectives are the collectives of NCCL on count elements a rank, n
// ranks, each against its definition computed here.
func collectives(n, count int) []collective {
	reduce := func(op func(a, b float64) float64) func(i int, sends [][]float32) float32 {
		return func(i int, sends [][]float32) float32 {
			a := float64(sends[0][i])
			for _, s := range sends[1:] {
				a = op(a, float64(s[i]))
			}
			return float32(a) // the fake sums in double, rounded once
		}
	}
	sum, most := reduce(func(a, b float64) float64 { return a + b }), reduce(math.Max)
	each := func(n int, f func(i int) float32) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = f(i)
		}
		return out
	}
	return []collective{
		{"AllReduce sum", count, count, func(m *Comm, s, r executor.Ptr) error { return m.AllReduce(s, r, int64(count), Float32, Sum) },
			func(_ int, sends [][]float32) []float32 {
				return each(count, func(i int) float32 { return sum(i, sends) })
			}},
		{"AllReduce max", count, count, func(m *Comm, s, r executor.Ptr) error { return m.AllReduce(s, r, int64(count), Float32, Max) },
			func(_ int, sends [][]float32) []float32 {
				return each(count, func(i int) float32 { return most(i, sends) })
			}},
		{"ReduceScatter sum", n * count, count, func(m *Comm, s, r executor.Ptr) error { return m.ReduceScatter(s, r, int64(count), Float32, Sum) },
			func(rank int, sends [][]float32) []float32 {
				return each(count, func(i int) float32 { return sum(rank*count+i, sends) })
			}},
		{"AllGather", count, n * count, func(m *Comm, s, r executor.Ptr) error { return m.AllGather(s, r, int64(count), Float32) },
			func(_ int, sends [][]float32) []float32 { return slices.Concat(sends...) }},
		{"Broadcast", count, count, func(m *Comm, s, r executor.Ptr) error { return m.Broadcast(s, r, int64(count), Float32, n-1) },
			func(_ int, sends [][]float32) []float32 { return sends[n-1] }},
		{"Send and Recv in a ring", count, count, func(m *Comm, s, r executor.Ptr) error {
			return Group(func() error {
				return errors.Join(m.Send(s, int64(4*count), (m.rank+1)%n), m.Recv(r, int64(4*count), (m.rank+n-1)%n))
			})
		}, func(rank int, sends [][]float32) []float32 { return sends[(rank+n-1)%n] }},
	}
}

// TestNCCLCollectives: the version reads, and on 2 and 4 ranks each collective of NCCL (and
// sends and receives in a ring, in a group) through the binding on the
// fake NCCL equals its definition computed here; a copy enqueued on the
// stream right after it, before the wait, copies its result (the order
// of the stream).
func TestNCCLCollectives(t *testing.T) {
	for _, n := range []int{2, 4} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			devs, comms := openRanks(t, n)
			if v, err := NCCLVersion(); v != "2.28.99" || err != nil {
				t.Errorf("NCCL %s, %v; the fake's is 2.28.99", v, err)
			}
			rng := rand.New(rand.NewPCG(uint64(n), 9))
			for _, c := range collectives(n, 5) {
				sends := make([][]float32, n)
				for r := range sends {
					sends[r] = make([]float32, c.sends)
					for i := range sends[r] {
						sends[r][i] = float32(rng.NormFloat64())
					}
				}
				onRanks(n, func(r int) error {
					got, err := runCollective(devs[r], comms[r], c, sends[r])
					if err != nil {
						return fmt.Errorf("%s: %w", c.name, err)
					}
					if want := c.want(r, sends); !slices.Equal(got, want) {
						return fmt.Errorf("%s on rank %d: got %v, want %v", c.name, r, got, want)
					}
					return nil
				}, t.Error)
			}
		})
	}
}

// runCollective runs c on one rank with its send buffer holding send,
// and returns the copy of its receive buffer made on the stream after
// it.
func runCollective(dev executor.Device, m *Comm, c collective, send []float32) ([]float32, error) {
	s, err := upload(dev, send)
	if err != nil {
		return nil, err
	}
	defer dev.Free(s)
	var bufs [2]executor.Ptr
	for i := range bufs {
		if bufs[i], err = upload(dev, make([]float32, c.recvs)); err != nil {
			return nil, err
		}
		defer dev.Free(bufs[i])
	}
	if err := c.enqueue(m, s, bufs[0]); err != nil {
		return nil, err
	}
	if err := dev.Copy(bufs[1], dev, bufs[0], executor.Whole(int64(4*c.recvs))); err != nil {
		return nil, err
	}
	if err := m.Wait(time.Now().Add(10 * time.Second)); err != nil {
		return nil, err
	}
	return download(dev, bufs[1], c.recvs)
}

// TestNCCLMismatch: a receive of another size than its send, and an
// all-reduce of other counts on two ranks, fail on both ranks with
// NCCL's error instead of hanging; a buffer shorter than the operation
// is refused when enqueued.
func TestNCCLMismatch(t *testing.T) {
	devs, _ := openRanks(t, 2)
	for _, tc := range []struct {
		name    string
		enqueue func(m *Comm, buf executor.Ptr) error
	}{
		{"Send and Recv", func(m *Comm, buf executor.Ptr) error {
			if m.rank == 0 {
				return m.Send(buf, 8, 1)
			}
			return m.Recv(buf, 16, 0)
		}},
		{"AllReduce", func(m *Comm, buf executor.Ptr) error {
			return m.AllReduce(buf, buf, int64(2+m.rank), Float32, Sum)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			comms := reopen(t, devs)
			onRanks(2, func(r int) error {
				buf, err := upload(devs[r], make([]float32, 4))
				if err != nil {
					return err
				}
				defer devs[r].Free(buf)
				if err := tc.enqueue(comms[r], buf); err != nil {
					return err
				}
				err = comms[r].Wait(time.Now().Add(10 * time.Second))
				if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("rank %d of 2", r)) || !strings.Contains(err.Error(), "invalid usage") {
					return fmt.Errorf("rank %d: got %v, want NCCL's invalid usage", r, err)
				}
				return nil
			}, t.Error)
		})
	}
	comms := reopen(t, devs)
	buf, err := upload(devs[0], make([]float32, 4))
	if err != nil {
		t.Fatal(err)
	}
	defer devs[0].Free(buf)
	if err := comms[0].AllReduce(buf, buf, 5, Float32, Sum); err == nil || !strings.Contains(err.Error(), "rank 0 of 2 on GPU 0: Fake GPU 0: ncclAllReduce: invalid argument") {
		t.Errorf("an all-reduce beyond its buffer: %v", err)
	}
}

// reopen opens a new communicator on devs, each rank from a goroutine
// (the first, or after the last one's was aborted), closed when the
// test ends.
func reopen(t *testing.T, devs []executor.Device) []*Comm {
	t.Helper()
	id, err := NewUniqueID()
	if err != nil {
		t.Fatal(err)
	}
	comms := make([]*Comm, len(devs))
	onRanks(len(devs), func(r int) (err error) {
		comms[r], err = OpenComm(devs[r], id, r, len(devs))
		return err
	}, t.Fatal)
	t.Cleanup(func() {
		for _, m := range comms {
			if err := m.Close(); err != nil {
				t.Error(err)
			}
		}
	})
	return comms
}

// TestNCCLTimeout: a rank that never posts its part (FAKENCCL_HANG_RANK)
// leaves its peers' operations pending; their waits end by the deadline
// with an error that names the rank and the operation (and the peer of
// a receive), the communicator aborted, and nothing hangs. The first
// rank of an all-reduce to give up makes the others' fail (NCCL's
// remote error) as an aborted peer does.
func TestNCCLTimeout(t *testing.T) {
	devs, comms := openRanks(t, 4)
	t.Setenv("FAKENCCL_HANG_RANK", "1")
	start := time.Now()
	onRanks(4, func(r int) error {
		buf, err := upload(devs[r], make([]float32, 4))
		if err != nil {
			return err
		}
		defer devs[r].Free(buf)
		enqueue := func() error { return comms[r].AllReduce(buf, buf, 4, Float32, Sum) }
		want := fmt.Sprintf("rank %d of 4 on GPU %d: Fake GPU %d: ncclAllReduce (the last of 1 operations", r, r, r)
		ends := []string{"not done by the deadline", "remote process exited"}
		if r == 0 {
			enqueue = func() error { return comms[r].Recv(buf, 16, 1) }
			want = "rank 0 of 4 on GPU 0: Fake GPU 0: ncclRecv of 16 bytes from rank 1 (the last of 1 operations"
			ends = ends[:1]
		}
		if err := enqueue(); err != nil {
			return err
		}
		err = comms[r].Wait(time.Now().Add(200 * time.Millisecond))
		if r == 1 { // it posted nothing: nothing to wait for
			return err
		}
		if err == nil || !strings.HasPrefix(err.Error(), want) || !slices.ContainsFunc(ends, func(e string) bool { return strings.Contains(err.Error(), e) }) {
			return fmt.Errorf("rank %d: got %v, want %q... and one of %q", r, err, want, ends)
		}
		return nil
	}, t.Error)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the waits took %v", d)
	}
}

// TestNoNCCL: a missing NCCL is one line that says where to find one.
func TestNoNCCL(t *testing.T) {
	t.Setenv("TOFUC_LIBNCCL", "/nonexistent/libnccl.so.2")
	_, err := NewUniqueID()
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.HasPrefix(err.Error(), "nccl: no NCCL (/nonexistent/libnccl.so.2: ") ||
		!strings.HasSuffix(err.Error(), "have it, for LD_LIBRARY_PATH or $TOFUC_LIBNCCL") {
		t.Errorf("a missing NCCL: %v", err)
	}
}

// TestNCCLOneGPU: two ranks on one GPU are refused, as NCCL refuses
// them, on both ranks.
func TestNCCLOneGPU(t *testing.T) {
	devs := openFake(t, "1", 2)
	withLibrary(t, "1", "TOFUC_LIBNCCL", fakecuda.BuildNCCL, func() error { _, err := ncclLib.load(); return err })
	id, err := NewUniqueID()
	if err != nil {
		t.Fatal(err)
	}
	onRanks(2, func(r int) error {
		if _, err := OpenComm(devs[r], id, r, 2); err == nil || !strings.Contains(err.Error(), "ncclCommInitRank: invalid usage") {
			return fmt.Errorf("rank %d: got %v, want NCCL's invalid usage", r, err)
		}
		return nil
	}, t.Error)
}
