package executor

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"tofuc/lang/precision"
	"tofuc/runtime/plan"
)

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
