package executor

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"tofuc/lang/precision"
	"tofuc/runtime/native"
	"tofuc/runtime/plan"
	"tofuc/runtime/tensor"
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
// closes the others at once, and takes nil for them) runs that device's steps; a copy between
// devices is a message between their ranks, sent and received where the
// steps are in every rank's order of the plan's steps (plan.Order), so
// that every rank meets its messages in the same order and none waits
// for a rank that waits for it. Messages go through ranks from host
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

// allocateMessages allocates the device buffer a message is gathered
// into before it is sent and received into before it is scattered: as
// large as the plan's largest buffer, which bounds a copy's box.
func (pr *Program) allocateMessages() error {
	var most int64
	for _, b := range pr.Plan.Buffers {
		most = max(most, b.Bytes)
	}
	dev := pr.devs[pr.ranks.Rank()]
	var err error
	if pr.messages, err = dev.Alloc(most); err != nil {
		return fmt.Errorf("%s: the buffer of messages, %d bytes: %w", dev.Name(), most, err)
	}
	pr.releases = append(pr.releases, func() { dev.Free(pr.messages) })
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

// sendCopies enqueues on this rank's device the messages of a step of
// another device that copies from this one (a copy step, or a part of
// a reduction): each after the device's earlier work, as rows gathered
// into one message.
func (pr *Program) sendCopies(o op, to int) error {
	me := pr.ranks.Rank()
	for _, c := range o.copies {
		if c.from != me {
			continue
		}
		if err := pr.send(c, to); err != nil {
			return err
		}
	}
	return nil
}

// send enqueues copy c's rows as one message to rank to.
func (pr *Program) send(c transfer, to int) error {
	dev := pr.devs[pr.ranks.Rank()]
	if pr.msgs == nil {
		host := dev.(HostDevice)
		return host.Do(pr.message(func() error {
			msg, err := gatherRows(host, c.src, c.rows)
			if err != nil {
				return err
			}
			return pr.ranks.Send(to, msg)
		}))
	}
	var off int64
	for _, r := range c.rows {
		if err := dev.Copy(pr.messages, dev, c.src, packedTo(r, off)); err != nil {
			return err
		}
		off += r.Bytes()
	}
	return pr.msgs.Send(pr.messages, off, to)
}

// receive enqueues on this rank's device the message of copy c from
// another rank's device, scattered to its rows.
func (pr *Program) receive(c transfer) error {
	dev := pr.devs[pr.ranks.Rank()]
	n := rowsBytes(c.rows)
	if pr.msgs == nil {
		host := dev.(HostDevice)
		return host.Do(pr.message(func() error {
			msg := make([]byte, n)
			if err := pr.ranks.Recv(c.from, msg); err != nil {
				return err
			}
			return scatterRows(host, msg, c.dst, c.rows)
		}))
	}
	if err := pr.msgs.Recv(pr.messages, n, c.from); err != nil {
		return err
	}
	var off int64
	for _, r := range c.rows {
		if err := dev.Copy(c.dst, dev, pr.messages, packedFrom(r, off)); err != nil {
			return err
		}
		off += r.Bytes()
	}
	return nil
}

// packedTo is r with its destination rows packed one after the other
// from offset off; packedFrom likewise its source rows.
func packedTo(r Rows, off int64) Rows {
	r.DstOff, r.DstPitch, r.DstSlice = off, r.Width, r.Width*r.Height
	return r
}

func packedFrom(r Rows, off int64) Rows {
	r.SrcOff, r.SrcPitch, r.SrcSlice = off, r.Width, r.Width*r.Height
	return r
}

// rowsBytes is how much a list of strided copies moves.
func rowsBytes(rows []Rows) int64 {
	var n int64
	for _, r := range rows {
		n += r.Bytes()
	}
	return n
}

// gatherRows reads the source rows of rows (at src) into one buffer, in
// order.
func gatherRows(dev HostDevice, src Ptr, rows []Rows) ([]byte, error) {
	var out []byte
	for _, r := range rows {
		var err error
		r.Each(func(so, _ int64) {
			if err != nil {
				return
			}
			var b []byte
			if b, err = dev.Bytes(src+Ptr(so), r.Width); err == nil {
				out = append(out, b...)
			}
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// scatterRows writes msg, the rows of rows in order, to their
// destinations (at dst).
func scatterRows(dev HostDevice, msg []byte, dst Ptr, rows []Rows) error {
	var err error
	for _, r := range rows {
		r.Each(func(_, do int64) {
			if err != nil {
				return
			}
			var b []byte
			if b, err = dev.Bytes(dst+Ptr(do), r.Width); err == nil {
				msg = msg[copy(b, msg):]
			}
		})
	}
	return err
}

// sendTile sends the rows of an output's tile, which this rank's device
// holds at src, to rank 0 (the device is idle: after the run).
func (pr *Program) sendTile(src Ptr, rows []Rows) error {
	msg := make([]byte, rowsBytes(rows))
	var off int64
	for _, r := range rows {
		if err := pr.devs[pr.ranks.Rank()].Download(msg, src, packedTo(r, off)); err != nil {
			return err
		}
		off += r.Bytes()
	}
	return pr.ranks.Send(0, msg)
}

// receiveTile receives the rows of an output's tile from the rank of
// device d into the output's memory host.
func (pr *Program) receiveTile(host []byte, d int, rows []Rows) error {
	msg := make([]byte, rowsBytes(rows))
	if err := pr.ranks.Recv(d, msg); err != nil {
		return err
	}
	for _, r := range rows {
		r.Each(func(_, do int64) {
			msg = msg[copy(host[do:do+r.Width], msg):]
		})
	}
	return nil
}

// ErrRanksDiffer is the error of every rank when the ranks were not
// given the same plan, libraries, inputs or parameters.
var ErrRanksDiffer = errors.New("the ranks differ")

// agree checks that every rank has the same value of what (the plan's
// seal, its inputs' digest): each sends its own to rank 0, which answers
// every rank with the ranks that differ from its own. Every rank then
// fails alike, naming them.
func agree(r Ranks, what, value string) error {
	if r.Rank() != 0 {
		if err := sendString(r, 0, value); err != nil {
			return err
		}
		verdict, err := recvString(r, 0)
		if err != nil || verdict == "" {
			return err
		}
		return fmt.Errorf("%w: %s", ErrRanksDiffer, verdict)
	}
	others := map[string][]int{} // the ranks of each value unlike rank 0's
	for from := 1; from < r.Size(); from++ {
		v, err := recvString(r, from)
		if err != nil {
			return err
		}
		if v != value {
			others[v] = append(others[v], from)
		}
	}
	verdict := ""
	if len(others) > 0 {
		var parts []string
		for v, rs := range others {
			parts = append(parts, fmt.Sprintf("%s %.16s", rankList(rs), v))
		}
		slices.Sort(parts)
		verdict = fmt.Sprintf("rank 0 has %s %.16s, %s", what, value, strings.Join(parts, ", "))
	}
	for to := 1; to < r.Size(); to++ {
		if err := sendString(r, to, verdict); err != nil {
			return err
		}
	}
	if verdict != "" {
		return fmt.Errorf("%w: %s", ErrRanksDiffer, verdict)
	}
	return nil
}

// rankList names ranks rs ("rank 2", "ranks 2, 3").
func rankList(rs []int) string {
	names := make([]string, len(rs))
	for i, r := range rs {
		names[i] = strconv.Itoa(r)
	}
	if len(rs) == 1 {
		return "rank " + names[0]
	}
	return "ranks " + strings.Join(names, ", ")
}

// sendString sends s as its length, then its bytes.
func sendString(r Ranks, to int, s string) error {
	if err := r.Send(to, binary.LittleEndian.AppendUint64(nil, uint64(len(s)))); err != nil {
		return err
	}
	return r.Send(to, []byte(s))
}

// maxAgreed bounds a string the ranks compare (a rank that sends a
// longer length is refused, not allocated for).
const maxAgreed = 1 << 20

// recvString receives what sendString sent.
func recvString(r Ranks, from int) (string, error) {
	var n [8]byte
	if err := r.Recv(from, n[:]); err != nil {
		return "", err
	}
	size := binary.LittleEndian.Uint64(n[:])
	if size > maxAgreed {
		return "", fmt.Errorf("rank %d sent a %d-byte value to compare, more than %d", from, size, maxAgreed)
	}
	b := make([]byte, size)
	if err := r.Recv(from, b); err != nil {
		return "", err
	}
	return string(b), nil
}

// digest is the SHA-256 of named tensors, in hex: their names, dtypes,
// shapes and values.
func digest(ts map[string]*tensor.Tensor) (string, error) {
	h := sha256.New()
	for _, name := range slices.Sorted(maps.Keys(ts)) {
		t := ts[name]
		fmt.Fprintf(h, "%q %s %v\n", name, t.DType, t.Shape)
		b := make([]byte, int64(t.Len())*int64(t.DType.Size()))
		if err := native.Encode(t, b); err != nil {
			return "", fmt.Errorf("%s: %w", name, err)
		}
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// agreeOn checks that every rank was given the same tensors (what: the
// inputs, the parameters) when the program runs as ranks.
func (pr *Program) agreeOn(what string, ts map[string]*tensor.Tensor) error {
	if pr.ranks == nil {
		return nil
	}
	d, err := digest(ts)
	if err != nil {
		return err
	}
	return agree(pr.ranks, what+" (SHA-256)", d)
}

// HostCollectives are ranks that all-reduce host memory in one call
// (MPI's): an all-reduce step runs as one call of its group's ranks.
type HostCollectives interface {
	// AllReduces reports whether AllReduce combines dtype with reducer.
	AllReduces(dtype, reducer string) bool
	// Group prepares the calls of a group of ranks (member i is rank
	// group[i]): every rank calls it, for the same groups in the same
	// order, before the group's first call.
	Group(group []int) error
	// AllReduce combines part over the ranks of group, in the group's
	// order, into result, on each of them.
	AllReduce(group []int, part, result []byte, dtype string) error
}

// DeviceCollectives are device messages that all-reduce device memory in
// one call of every rank enqueued on the device's stream (NCCL's): an
// all-reduce step whose group is every rank runs as one.
type DeviceCollectives interface {
	AllReduces(dtype, reducer string) bool
	AllReduce(part, result Ptr, count int64, dtype string) error
}

// collective is all-reduce step s of device d run as one collective
// call of its group's ranks, where the ranks' transport makes one for
// the group, dtype and reducer: the rank's own step makes the call,
// another device's step nothing. Every rank decides alike. The library
// sums in its own order: equal to one process's under the policy for
// reordered sums, the same bits on every member. In the exact mode an
// f32 sum is a double one, as the reduction kernel's: host ranks widen
// the parts, GPU ranks send messages.
func (pr *Program) collective(d int, s *plan.Step) (op, bool) {
	if pr.ranks == nil || s.Op != plan.AllReduce {
		return op{}, false
	}
	to := pr.Plan.Buffers[s.To]
	widen := pr.Plan.Precision == precision.Exact && to.DType == "f32"
	part := s.Parts[slices.Index(s.Group, d)]
	if pr.msgs != nil {
		dc, ok := pr.msgs.(DeviceCollectives)
		if !ok || widen || len(s.Group) != pr.ranks.Size() || !dc.AllReduces(to.DType, s.Reducer) {
			return op{}, false
		}
		if !pr.local(d) {
			return op{}, true
		}
		count := to.Bytes / int64(elementSize(to.DType))
		return op{stream: func() error { return dc.AllReduce(pr.addr(part), pr.addr(s.To), count, to.DType) }}, true
	}
	sum := to.DType
	if widen {
		sum = "f64"
	}
	hc, ok := pr.ranks.(HostCollectives)
	if !ok || !hc.AllReduces(sum, s.Reducer) {
		return op{}, false
	}
	if !pr.local(d) {
		return op{}, true
	}
	dev := pr.devs[d].(HostDevice)
	return op{host: pr.message(func() error {
		in, err := dev.Bytes(pr.addr(part), to.Bytes)
		if err != nil {
			return err
		}
		out, err := dev.Bytes(pr.addr(s.To), to.Bytes)
		if err != nil {
			return err
		}
		return allReduceCopies(hc, s.Group, in, out, to.DType, widen)
	})}, true
}

// allReduceCopies all-reduces part into result through copies in Go's
// memory, which MPI may keep writing after a rank gave up (the arena is
// unmapped when the program closes); parts of dtype, or of f32 widened
// to f64 and the sum rounded back.
func allReduceCopies(hc HostCollectives, group []int, part, result []byte, dtype string, widen bool) error {
	if !widen {
		sum := make([]byte, len(part))
		if err := hc.AllReduce(group, slices.Clone(part), sum, dtype); err != nil {
			return err
		}
		copy(result, sum)
		return nil
	}
	wide := make([]byte, 2*len(part))
	for i := 0; i < len(part); i += 4 {
		binary.LittleEndian.PutUint64(wide[2*i:], math.Float64bits(float64(math.Float32frombits(binary.LittleEndian.Uint32(part[i:])))))
	}
	sum := make([]byte, len(wide))
	if err := hc.AllReduce(group, wide, sum, "f64"); err != nil {
		return err
	}
	for i := 0; i < len(result); i += 4 {
		binary.LittleEndian.PutUint32(result[i:], math.Float32bits(float32(math.Float64frombits(binary.LittleEndian.Uint64(sum[2*i:])))))
	}
	return nil
}

// message wraps a host rank's message (or collective call) so that
// after one fails the others are skipped and the run stops enqueuing
// (enqueue): each would otherwise wait out the timeout in turn for a
// rank that is gone.
func (pr *Program) message(f func() error) func() error {
	return func() error {
		if pr.msgFailed != nil {
			return nil // reported once
		}
		err := f()
		if err != nil {
			pr.msgFailed = err
		}
		return err
	}
}

// makeGroups prepares the groups of the all-reduce steps run as host
// collective calls (HostCollectives.Group), in the order every rank
// meets them.
func (pr *Program) makeGroups() error {
	hc, ok := pr.ranks.(HostCollectives)
	if !ok || pr.msgs != nil {
		return nil
	}
	made := map[string]bool{}
	for _, l := range []*list{pr.init, pr.steps} {
		for _, ref := range l.order {
			s := &l.steps[ref.Device][ref.Step]
			if _, ok := pr.collective(ref.Device, s); !ok || made[fmt.Sprint(s.Group)] {
				continue
			}
			made[fmt.Sprint(s.Group)] = true
			if err := hc.Group(s.Group); err != nil {
				return err
			}
		}
	}
	return nil
}
