package executor_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"tofuc/internal/fakecuda"
	"tofuc/internal/modelcase"
	"tofuc/lang"
	"tofuc/lang/precision"
	"tofuc/runtime/cpu"
	"tofuc/runtime/cuda"
	"tofuc/runtime/executor"
	"tofuc/runtime/simt"
	"tofuc/runtime/tensor"
)

// mesh is the ranks of one process's goroutines, joined by channels:
// what runtime/mpi does between processes, for the executor's tests.
type mesh struct {
	size  int
	links [][]chan []byte // links[from][to]
	// timeout bounds a wait; timeouts counts each rank's waits that
	// ran out.
	timeout  time.Duration
	timeouts []atomic.Int32
}

func newMesh(size int) *mesh {
	m := &mesh{size: size, links: make([][]chan []byte, size), timeout: time.Minute, timeouts: make([]atomic.Int32, size)}
	for from := range size {
		m.links[from] = make([]chan []byte, size)
		for to := range size {
			m.links[from][to] = make(chan []byte, 1<<12)
		}
	}
	return m
}

// meshRank is rank rank of a mesh (executor.Ranks).
type meshRank struct {
	*mesh
	rank int
}

func (r meshRank) Rank() int { return r.rank }
func (r meshRank) Size() int { return r.size }

func (r meshRank) Send(to int, b []byte) error {
	select {
	case r.links[r.rank][to] <- append([]byte(nil), b...):
		return nil
	case <-time.After(r.timeout):
		r.timeouts[r.rank].Add(1)
		return fmt.Errorf("rank %d cannot send to rank %d", r.rank, to)
	}
}

func (r meshRank) Recv(from int, b []byte) error {
	select {
	case msg := <-r.links[from][r.rank]:
		if len(msg) != len(b) {
			return fmt.Errorf("rank %d sent %d bytes, rank %d expected %d", from, len(msg), r.rank, len(b))
		}
		copy(b, msg)
		return nil
	case <-time.After(r.timeout):
		r.timeouts[r.rank].Add(1)
		return fmt.Errorf("rank %d waits for rank %d", r.rank, from)
	}
}

// meshSums is a mesh's ranks that all-reduce f32 and f64 sums in one
// call (executor.HostCollectives), each member adding every member's part
// in the group's order, in the element type, as MPI's do; calls counts
// the calls.
type meshSums struct {
	meshRank
	calls *atomic.Int32
}

func (m meshSums) AllReduces(dtype, reducer string) bool {
	return (dtype == "f32" || dtype == "f64") && reducer == "sum"
}

func (m meshSums) Group([]int) error { return nil }

func (m meshSums) AllReduce(group []int, part, result []byte, dtype string) error {
	m.calls.Add(1)
	for _, to := range group {
		if to != m.rank {
			if err := m.Send(to, part); err != nil {
				return err
			}
		}
	}
	size := lang.ParseDType(dtype).Size()
	f32, f64 := make([]float32, len(part)/size), make([]float64, len(part)/size)
	for _, from := range group {
		b := part
		if from != m.rank {
			b = make([]byte, len(part))
			if err := m.Recv(from, b); err != nil {
				return err
			}
		}
		for i := range f32 {
			if size == 4 {
				f32[i] += math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
			} else {
				f64[i] += math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
			}
		}
	}
	for i := range f32 {
		if size == 4 {
			binary.LittleEndian.PutUint32(result[4*i:], math.Float32bits(f32[i]))
		} else {
			binary.LittleEndian.PutUint64(result[8*i:], math.Float64bits(f64[i]))
		}
	}
	return nil
}

// meshMessages is a rank's device messages (executor.DeviceMessages)
// over a mesh, enqueued on its host device's stream as NCCL's are on a
// GPU's: the executor's path for devices whose memory the host does not
// read, tested on host devices.
type meshMessages struct {
	meshRank
	dev executor.HostDevice
}

func (m meshMessages) Send(src executor.Ptr, n int64, peer int) error {
	return m.dev.Do(func() error {
		b, err := m.dev.Bytes(src, n)
		if err != nil {
			return err
		}
		return m.meshRank.Send(peer, b)
	})
}

func (m meshMessages) Recv(dst executor.Ptr, n int64, peer int) error {
	return m.dev.Do(func() error {
		b, err := m.dev.Bytes(dst, n)
		if err != nil {
			return err
		}
		return m.meshRank.Recv(peer, b)
	})
}

func (m meshMessages) Wait() error { return m.dev.Sync() }

// openRank opens rank r of plan m on devices of a kind, its messages
// from host memory or, with onStream, on its device's stream.
func openRank(m *model, kind string, strict, onStream bool, rank executor.Ranks) (*executor.Program, error) {
	if !onStream {
		return executor.OpenRank(m.Plan, m.Dir, kind, executor.Options{Strict: strict}, rank)
	}
	k, err := executor.Lookup(kind)
	if err != nil {
		return nil, err
	}
	devs, err := k.Open(m.Plan, m.Dir, executor.Options{Strict: strict, OneRank: true})
	if err != nil {
		return nil, err
	}
	mr := rank.(meshRank)
	return executor.LoadRank(m.Plan, devs, rank, meshMessages{mr, devs[mr.rank].(executor.HostDevice)})
}

// runRanks runs every rank of plan m's in a goroutine of its own, rank r
// given the inputs inputs(r), and returns rank 0's outputs and every
// rank's error; with sums, the ranks all-reduce in one call and count
// the calls there.
func runRanks(t *testing.T, m *model, kind string, strict, onStream bool, sums *atomic.Int32, inputs func(r int) map[string]*tensor.Tensor) (map[string]*tensor.Tensor, []error) {
	t.Helper()
	n := m.Plan.Devices
	mesh := newMesh(n)
	errs := make([]error, n)
	outs := make([]map[string]*tensor.Tensor, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var rank executor.Ranks = meshRank{mesh, r}
			if sums != nil {
				rank = meshSums{meshRank{mesh, r}, sums}
			}
			pr, err := openRank(m, kind, strict, onStream, rank)
			if err != nil {
				errs[r] = err
				return
			}
			defer pr.Close()
			outs[r], errs[r] = pr.Run(inputs(r), m.Params)
		}()
	}
	wg.Wait()
	for r := 1; r < n; r++ {
		if errs[r] == nil && len(outs[r]) != 0 {
			t.Errorf("rank %d returned %d outputs; only rank 0 gathers them", r, len(outs[r]))
		}
	}
	return outs[0], errs
}

// rankCases are the multi-device examples and a convolutional network
// whose plan splits images among devices.
var rankCases = append(examples[1:3:3], modelcase.Case{File: "wresnet", Devices: 4, Classes: 10, Set: map[string]any{"depth": 50, "width": 1, "batch": 4, "image": 32, "classes": 10}})

// TestRanksMatchOneProcess runs multi-device plans as ranks, one a
// device, each with its own program (as processes under mpirun do): rank
// 0's outputs equal the one-process run's bit for bit, on the host
// kernels and on the emulated GPU kernels in the Strict mode, with
// messages from host memory and, as a GPU's are, on the device's stream
// through a buffer of the device, and with the training steps'
// all-reduces made as one call of every rank (the exact mode's f32
// parts widened to f64 and added in the order the reduction kernel
// adds them).
func TestRanksMatchOneProcess(t *testing.T) {
	for _, c := range rankCases {
		t.Run(c.String(), func(t *testing.T) {
			m := compile(t, c)
			for _, kind := range []struct {
				name   string
				strict bool
			}{{cpu.Kind.Name, false}, {simt.Kind.Name, true}} {
				if c.File == "wresnet" && kind.strict {
					continue // its emulated kernels take most of the package's time, and show nothing the MLP's and RNN's do not
				}
				want, err := hostRun(t, m, kind.name, m.Params)
				if err != nil {
					t.Fatal(err)
				}
				for _, mode := range []struct {
					onStream, sums bool
				}{{false, false}, {true, false}, {false, true}} {
					var sums *atomic.Int32
					if mode.sums {
						sums = &atomic.Int32{}
					}
					got, errs := runRanks(t, m, kind.name, kind.strict, mode.onStream, sums, func(int) map[string]*tensor.Tensor { return m.Inputs })
					for r, err := range errs {
						if err != nil {
							t.Fatalf("%s, rank %d: %v", kind.name, r, err)
						}
					}
					compareAll(t, fmt.Sprintf("%s as ranks %+v", kind.name, mode), got, want, exact)
					if mode.sums && m.Plan.Devices > 1 && strings.Contains(c.String(), "train") && sums.Load() == 0 {
						t.Errorf("%s: no all-reduce made one call", kind.name)
					}
				}
			}
		})
	}
}

// TestRanksDisagree gives one rank other inputs, then runs a plan with
// fewer ranks than devices: every rank refuses, naming the rank that
// differs.
func TestRanksDisagree(t *testing.T) {
	m := compile(t, examples[1])
	other := map[string]*tensor.Tensor{}
	for name, in := range m.Inputs {
		other[name] = in.Clone()
		other[name].SetFlat(0, other[name].Flat(0)+1)
	}
	_, errs := runRanks(t, m, cpu.Kind.Name, false, false, nil, func(r int) map[string]*tensor.Tensor {
		if r == 2 {
			return other
		}
		return m.Inputs
	})
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "rank 2 ") {
			t.Errorf("rank %d: %v, want the inputs of rank 2 named", r, err)
		}
	}
	if _, err := executor.OpenRank(m.Plan, m.Dir, cpu.Kind.Name, executor.Options{}, meshRank{newMesh(2), 0}); err == nil || !strings.Contains(err.Error(), "ranks: 2, the plan's devices: 4") {
		t.Errorf("4 devices on 2 ranks: %v", err)
	}
}

// TestRanksOnNCCL runs the MLP's 2-device training step (f32) as 2
// ranks on the fake driver's two GPUs, one a rank
// (cuda.Driver.OpenRank), their messages NCCL's on the devices' streams
// (the fake libnccl, whose ranks are threads of one process), their
// all-reduces one ncclAllReduce each, their host messages (agreement,
// outputs) on a mesh as MPI's, then on NCCL too: rank 0's outputs equal
// the one-process run of the same GPU kernels under the emulator, within
// the tolerance for reordered sums.
func TestRanksOnNCCL(t *testing.T) {
	drv, err := fakeDriver()
	if err != nil {
		t.Skip(err)
	}
	fakeLibrary(t, "TOFUC_LIBNCCL", fakecuda.BuildNCCL)
	m := compile(t, modelcase.Case{File: "mlp", Train: true, Devices: 2, Classes: 10, Precision: precision.F32, Set: map[string]any{"batch": 8, "hidden": 16}})
	t.Setenv("FAKECUDA_SIMT", filepath.Join(m.Dir, m.Plan.Modules[simt.Module].Files[0].Path))
	want, err := hostRun(t, m, simt.Kind.Name, m.Params)
	if err != nil {
		t.Fatal(err)
	}
	id, err := cuda.NewUniqueID()
	if err != nil {
		t.Fatal(err)
	}
	for _, control := range []string{"MPI", "NCCL"} {
		var calls atomic.Int32
		mesh := newMesh(2)
		outs := make([]map[string]*tensor.Tensor, 2)
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for r := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				outs[r], errs[r] = runNCCLRank(drv, m, id, meshRank{mesh, r}, control == "NCCL", &calls)
			}()
		}
		wg.Wait()
		for r, err := range errs {
			if err != nil {
				t.Fatalf("rank %d: %v", r, err)
			}
		}
		compareAll(t, "ranks on NCCL, host messages on "+control, outs[0], want, reordered)
		if calls.Load() == 0 {
			t.Error("no all-reduce was NCCL's")
		}
		if id, err = cuda.NewUniqueID(); err != nil {
			t.Fatal(err)
		}
	}
}

// countedSums counts the all-reduces of device messages that make them
// (executor.DeviceCollectives).
type countedSums struct {
	executor.DeviceMessages
	calls *atomic.Int32
}

func (c countedSums) AllReduces(dtype, reducer string) bool {
	return c.DeviceMessages.(executor.DeviceCollectives).AllReduces(dtype, reducer)
}

func (c countedSums) AllReduce(part, result executor.Ptr, count int64, dtype string) error {
	c.calls.Add(1)
	return c.DeviceMessages.(executor.DeviceCollectives).AllReduce(part, result, count, dtype)
}

// runNCCLRank runs rank r of m on its GPU with an NCCL communicator; the
// ranks' host messages go through the mesh (as MPI's would), or through
// NCCL (ranks started without MPI).
func runNCCLRank(drv *cuda.Driver, m *model, id cuda.UniqueID, r meshRank, hostOnNCCL bool, calls *atomic.Int32) (map[string]*tensor.Tensor, error) {
	devs, err := drv.OpenRank(m.Plan, m.Dir, r.rank, r.rank)
	if err != nil {
		return nil, err
	}
	comm, err := cuda.OpenComm(devs[r.rank], id, r.rank, r.size)
	if err != nil {
		return nil, errors.Join(err, devs[r.rank].Close())
	}
	var ranks executor.Ranks = r
	if hostOnNCCL {
		ranks = comm.Ranks(time.Minute)
	}
	pr, err := executor.LoadRank(m.Plan, devs, ranks, countedSums{comm.Messages(time.Minute), calls})
	if err != nil {
		return nil, errors.Join(err, comm.Abort())
	}
	out, err := pr.Run(m.Inputs, m.Params)
	return out, errors.Join(err, comm.Close(), pr.Close())
}

// dyingRank is a mesh's rank that is gone after a number of messages:
// its sends and receives fail from then on.
type dyingRank struct {
	meshRank
	left *atomic.Int32
}

func (r dyingRank) Send(to int, b []byte) error {
	if r.left.Add(-1) < 0 {
		return fmt.Errorf("rank %d is gone", r.rank)
	}
	return r.meshRank.Send(to, b)
}

func (r dyingRank) Recv(from int, b []byte) error {
	if r.left.Add(-1) < 0 {
		return fmt.Errorf("rank %d is gone", r.rank)
	}
	return r.meshRank.Recv(from, b)
}

// TestRanksStopAtFirstTimeout: rank 1 of the MLP's 4-device training
// step goes after a few of the plan's messages; every other rank waits
// out one timeout and stops, not one timeout a message (each a full
// --timeout for a rank that is gone).
func TestRanksStopAtFirstTimeout(t *testing.T) {
	m := compile(t, examples[1])
	for _, after := range []int32{22, 30} { // in the plan's messages (the ranks' agreement takes 20)
		mesh := newMesh(4)
		mesh.timeout = 300 * time.Millisecond
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for r := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var rank executor.Ranks = meshRank{mesh, r}
				if r == 1 {
					left := &atomic.Int32{}
					left.Store(after)
					rank = dyingRank{meshRank{mesh, r}, left}
				}
				pr, err := executor.OpenRank(m.Plan, m.Dir, cpu.Kind.Name, executor.Options{}, rank)
				if err == nil {
					_, err = pr.Run(m.Inputs, m.Params)
					pr.Close()
				}
				errs[r] = err
			}()
		}
		wg.Wait()
		for r := range 4 {
			if errs[r] == nil {
				t.Errorf("rank 1 gone after %d messages: rank %d succeeded", after, r)
			}
			if n := mesh.timeouts[r].Load(); n > 1 {
				t.Errorf("rank 1 gone after %d messages: rank %d waited out %d timeouts: %v", after, r, n, errs[r])
			}
		}
	}
}
