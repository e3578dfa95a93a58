package executor

import (
	"errors"
	"fmt"
	"path/filepath"

	"tofuc/runtime/plan"
)

// Ranks connects the processes that run one plan, one logical device
// each: rank r runs device r (runtime/mpi, under mpirun). The messages
// between two ranks arrive in the order they were sent.
type Ranks interface {
	Rank() int
	Size() int
	// Send sends b to rank to and Recv receives len(b) bytes from rank
	// from; both return once done, or with an error that names the rank
	// which did not answer in time.
	Send(to int, b []byte) error
	Recv(from int, b []byte) error
}

// DeviceMessages sends and receives a rank's device memory on the
// device's stream, ordered with its kernels (NCCL's on a GPU: cuda.Comm):
// the messages of ranks whose device memory the host does not read.
type DeviceMessages interface {
	// Send and Recv enqueue a message of n bytes to or from rank peer.
	Send(src Ptr, n int64, peer int) error
	Recv(dst Ptr, n int64, peer int) error
	// Wait waits for the device's work, its messages included; a wait
	// that outlasts the rank's timeout fails, saying which rank holds
	// it.
	Wait() error
}

// OpenRank loads plan p, compiled into dir, as rank ranks.Rank() of the
// processes that run it, on a device of the kind called name (LoadRank),
// which must be a host device: its messages are MPI's, from host memory.
func OpenRank(p *plan.Plan, dir, name string, opts Options, ranks Ranks) (*Program, error) {
	if err := CheckRanks(p, ranks.Size()); err != nil {
		return nil, err
	}
	k, err := Lookup(name)
	if err != nil {
		return nil, err
	}
	if err := agree(ranks, "the backend", name); err != nil {
		return nil, err
	}
	opts.OneRank = true
	devs, err := k.Open(p, dir, opts)
	if err != nil {
		return nil, err
	}
	return LoadRank(p, devs, ranks, nil)
}

// LoadRank loads plan p as rank ranks.Rank() of the processes that run
// it: the rank's logical device (of devs, which the program owns; it
// closes the others at once, and takes nil for them) runs that device's
// steps; a copy between devices is a message between their ranks, sent
// and received where the steps are in every rank's order of the plan's
// steps (plan.Order), so that every rank meets its messages in the same
// order and none waits for a rank that waits for it. Messages go through ranks from host
// memory, or through msgs on the device's stream (a GPU's, whose memory
// the host does not read); control messages (agreement, outputs)
// through ranks.
func LoadRank(p *plan.Plan, devs []Device, ranks Ranks, msgs DeviceMessages) (*Program, error) {
	r := ranks.Rank()
	err := CheckRanks(p, ranks.Size())
	if _, host := devs[r].(HostDevice); err == nil && !host && msgs == nil {
		err = fmt.Errorf("%s cannot run as a rank without messages of its own device (NCCL on a GPU)", devs[r].Name())
	}
	if err != nil {
		for _, d := range devs {
			if d != nil {
				err = errors.Join(err, d.Close())
			}
		}
		return nil, err
	}
	for d := range devs {
		if d == r {
			continue
		}
		if devs[d] != nil {
			if err := devs[d].Close(); err != nil {
				return nil, err
			}
		}
		devs[d] = elsewhere{rank: d}
	}
	pr, err := load(p, devs, ranks, msgs)
	if err != nil {
		return nil, err
	}
	if err := pr.makeGroups(); err != nil {
		pr.Close()
		return nil, err
	}
	if msgs == nil {
		return pr, nil
	}
	if err := pr.allocateMessages(); err != nil {
		pr.Close()
		return nil, err
	}
	return pr, nil
}

// CheckRanksIn refuses n ranks for the plan compiled into dir unless n is
// its number of devices: what a command that starts the ranks itself
// checks before it starts them.
func CheckRanksIn(dir string, n int) error {
	p, err := plan.Read(filepath.Join(dir, "plan.json"))
	if err != nil {
		return err
	}
	return CheckRanks(p, n)
}

// CheckRanks refuses ranks fewer or more than plan p's devices.
func CheckRanks(p *plan.Plan, ranks int) error {
	if ranks != p.Devices {
		return fmt.Errorf("ranks: %d, the plan's devices: %d; start one rank a device (mpirun -np %d, or --nproc-per-node %d)", ranks, p.Devices, p.Devices, p.Devices)
	}
	return nil
}

// DevicesRun is how many of plan p's logical devices this process runs:
// one as a rank, else all.
func (o Options) DevicesRun(p *plan.Plan) int {
	if o.OneRank {
		return 1
	}
	return p.Devices
}

// local reports whether device d runs in this process.
func (pr *Program) local(d int) bool { return pr.ranks == nil || d == pr.ranks.Rank() }

// elsewhere stands for a logical device another rank runs: it holds no
// memory here and runs nothing; the executor sends it what it copies
// from this rank's device and receives what this device copies from it.
type elsewhere struct{ rank int }

func (e elsewhere) Runs(*plan.Kernel) bool            { return true }
func (e elsewhere) Alloc(int64) (Ptr, error)          { return 0, nil }
func (e elsewhere) Free(Ptr) error                    { return nil }
func (e elsewhere) Zero(Ptr, int64) error             { return nil }
func (e elsewhere) NewEvent(bool) (Event, error)      { return 0, nil }
func (e elsewhere) Record(Event) error                { return nil }
func (e elsewhere) Wait(Event) error                  { return nil }
func (e elsewhere) Sync() error                       { return nil }
func (e elsewhere) Close() error                      { return nil }
func (e elsewhere) Name() string                      { return fmt.Sprintf("rank %d's device", e.rank) }
func (e elsewhere) Launch(int, *Args) error           { return e.refuse() }
func (e elsewhere) Upload(Ptr, []byte, Rows) error    { return e.refuse() }
func (e elsewhere) Download([]byte, Ptr, Rows) error  { return e.refuse() }
func (e elsewhere) Copy(Ptr, Device, Ptr, Rows) error { return e.refuse() }
func (e elsewhere) Elapsed(Event, Event) (float64, error) {
	return 0, e.refuse()
}

func (e elsewhere) refuse() error {
	return fmt.Errorf("device %d runs in rank %d's process, not this one", e.rank, e.rank)
}
