package cost

import (
	"encoding/json"
	"fmt"
	"iter"
	"math"
	"os"
	"slices"
	"sort"
	"strings"

	"tofuc/lang/precision"
)

// Topology describes a machine for the step-time simulation: its devices
// and the links between them (docs/partition.md, "Topology files").
type Topology struct {
	Name    string           `json:"name"`
	Devices []TopologyDevice `json:"devices"`
	Links   []Link           `json:"links"`
	// HostProcess says that the devices are the host runtime's devices of
	// one process (the cpu backend, --devices N): they launch the host's
	// kernels on one pool of threads, which they share
	// (SimulatePlan). tofuc bench --calibrate --devices N writes one.
	HostProcess bool `json:"host_process,omitempty"`
}

// TopologyDevice is one accelerator (or the host's cores as one device).
type TopologyDevice struct {
	Name string `json:"name"`
	// PeakFLOPS is the floating-point operations per second its kernels
	// reach, MemoryBandwidth the bytes per second of its memory.
	PeakFLOPS       float64 `json:"peak_flops"`
	MemoryBandwidth float64 `json:"memory_bandwidth"`
	// MemoryBytes is its capacity; LaunchSeconds the overhead of a kernel.
	MemoryBytes   int64   `json:"memory_bytes"`
	LaunchSeconds float64 `json:"launch_seconds"`
	// IOBandwidth, when positive, is the bytes per second at which a
	// step's inputs enter the device and its outputs leave it (the host
	// runtime's copies), and StepSeconds a step's fixed cost beyond its
	// kernels and copies; the single-device simulation adds both to the
	// kernels. 0: not modelled.
	IOBandwidth float64 `json:"io_bandwidth,omitempty"`
	StepSeconds float64 `json:"step_seconds,omitempty"`
	// ContractionHalfFLOPs, ContractionTile and ContractionNarrowCols,
	// when given, model the rate of its contraction kernels
	// (Device.HalfFLOPs, TileRows, TileCols and NarrowCols;
	// docs/partition.md): a contraction computes its multiply-adds
	// padded to whole tiles of ContractionTile[0] rows ×
	// ContractionTile[1] columns (its micro-kernel's), its columns
	// unpadded where there are at most ContractionNarrowCols of them
	// (a narrow kernel's), and the half-performance size besides
	// (Hockney's f½), at peak_flops, the rate of an unboundedly large
	// one. Absent: every kernel computes at peak_flops.
	ContractionHalfFLOPs  float64 `json:"contraction_half_flops,omitempty"`
	ContractionTile       []int64 `json:"contraction_tile,omitempty"`
	ContractionNarrowCols int64   `json:"contraction_narrow_cols,omitempty"`
	// ChainedLaunches: the device runs a chained pair of kernels as one
	// launch (Device.ChainedLaunches), as the host runtime does, which
	// --calibrate measures. Absent: as two, as a GPU does.
	ChainedLaunches bool `json:"chained_launches,omitempty"`
	// MathSeconds, when given, is what one call of a costly math
	// function (CalibratedMath) costs beyond one operation, in seconds,
	// by the precision mode it was measured in ("exact", "f32") and the
	// function: --calibrate measures it on the host, where a call is a
	// library routine of tens of operations (an erf in double took 12 ns
	// a value on two threads). On a host process (HostProcess) a
	// compiled plan's kernel adds its calls (plan.Kernel.MathCalls) at
	// these costs (KernelSeconds); the graph's simulations (Simulate,
	// SimulateOne) do not. Absent, or a function missing: a call is one
	// operation.
	MathSeconds map[string]map[string]float64 `json:"math_seconds,omitempty"`
}

// Link connects devices through one interconnect (a switch, a bus): each
// of them sends and receives Bandwidth bytes per second through it, each
// transfer paying Latency seconds first.
type Link struct {
	Devices   []int   `json:"devices"`
	Bandwidth float64 `json:"bandwidth"`
	Latency   float64 `json:"latency"`
}

// Topologies are the built-in profiles, by --topology name.
var Topologies = map[string]*Topology{
	"h100-nvlink": h100NVLink,
	// Eight GPUs of the same kind on PCIe 4.0 x16 through the host: about
	// 25 GB/s per direction each, and a longer latency.
	"pcie": uniform("8x H100 PCIe over PCIe 4.0", 8, TopologyDevice{Name: "H100 PCIe", PeakFLOPS: 51e12,
		MemoryBandwidth: 2e12, MemoryBytes: 80 << 30, LaunchSeconds: 3e-6}, 25e9, 10e-6),
	// Two and four such NVLink machines (DGX H100) joined by InfiniBand
	// NDR: each GPU has its own 400 Gb/s adapter, 50 GB/s per direction,
	// about 5 µs through one switch.
	"h100-2x8-ib": nodes(2, h100NVLink, 50e9, 5e-6),
	"h100-4x8-ib": nodes(4, h100NVLink, 50e9, 5e-6),
}

// h100NVLink is eight H100 SXM on NVSwitch: NVLink 4 gives each GPU 450
// GB/s per direction; f32 CUDA-core peak and HBM3 bandwidth as the
// roofline's.
var h100NVLink = uniform("8x H100 SXM over NVLink", 8, TopologyDevice{Name: "H100 SXM", PeakFLOPS: 67e12,
	MemoryBandwidth: 3.35e12, MemoryBytes: 80 << 30, LaunchSeconds: 3e-6}, 450e9, 2e-6)

// nodes is n machines of topology one, their devices numbered machine
// by machine, each machine's links kept and every device on one more
// link between the machines.
func nodes(n int, one *Topology, bandwidth, latency float64) *Topology {
	per := len(one.Devices)
	t := &Topology{Name: fmt.Sprintf("%d machines of %s, over InfiniBand", n, one.Name)}
	between := Link{Bandwidth: bandwidth, Latency: latency}
	for m := range n {
		t.Devices = append(t.Devices, one.Devices...)
		for _, l := range one.Links {
			inside := Link{Bandwidth: l.Bandwidth, Latency: l.Latency}
			for _, d := range l.Devices {
				inside.Devices = append(inside.Devices, m*per+d)
			}
			t.Links = append(t.Links, inside)
		}
		for d := range per {
			between.Devices = append(between.Devices, m*per+d)
		}
	}
	t.Links = append(t.Links, between)
	return t
}

// uniform is n identical devices on one link.
func uniform(name string, n int, d TopologyDevice, bandwidth, latency float64) *Topology {
	t := &Topology{Name: name}
	l := Link{Bandwidth: bandwidth, Latency: latency}
	for i := range n {
		t.Devices = append(t.Devices, d)
		l.Devices = append(l.Devices, i)
	}
	t.Links = []Link{l}
	return t
}

// TopologyNames lists the built-in profiles.
func TopologyNames() []string {
	var out []string
	for name := range Topologies {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// LoadTopology is a built-in profile by name, or the JSON file at path.
func LoadTopology(nameOrPath string) (*Topology, error) {
	if t, ok := Topologies[nameOrPath]; ok {
		return t, nil
	}
	data, err := os.ReadFile(nameOrPath)
	if err != nil {
		return nil, fmt.Errorf("topology %s: not a built-in profile (%s) nor a readable file: %w", nameOrPath, strings.Join(TopologyNames(), ", "), err)
	}
	var t Topology
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil {
		return nil, fmt.Errorf("%s: %w", nameOrPath, err)
	}
	if err := t.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", nameOrPath, err)
	}
	return &t, nil
}

// Validate checks that every quantity is positive and finite and every
// link names existing devices.
func (t *Topology) Validate() error {
	positive := func(x float64) bool { return x > 0 && !math.IsInf(x, 0) }
	if len(t.Devices) == 0 {
		return fmt.Errorf("a topology needs at least one device")
	}
	for i, d := range t.Devices {
		if !positive(d.PeakFLOPS) || !positive(d.MemoryBandwidth) || d.MemoryBytes <= 0 || d.LaunchSeconds < 0 || math.IsInf(d.LaunchSeconds, 0) || d.IOBandwidth < 0 || math.IsInf(d.IOBandwidth, 0) || d.StepSeconds < 0 || math.IsInf(d.StepSeconds, 0) || d.ContractionHalfFLOPs < 0 || math.IsInf(d.ContractionHalfFLOPs, 0) {
			return fmt.Errorf("device %d (%s): peak_flops, memory_bandwidth and memory_bytes must be positive; launch_seconds, io_bandwidth, step_seconds and contraction_half_flops not negative", i, d.Name)
		}
		if len(d.ContractionTile) != 0 && (len(d.ContractionTile) != 2 || d.ContractionTile[0] <= 0 || d.ContractionTile[1] <= 0) {
			return fmt.Errorf("device %d (%s): contraction_tile must be two positive sizes, rows and columns", i, d.Name)
		}
		if d.ContractionNarrowCols < 0 {
			return fmt.Errorf("device %d (%s): contraction_narrow_cols must not be negative", i, d.Name)
		}
		if err := t.validMathSeconds(d); err != nil {
			return fmt.Errorf("device %d (%s): %w", i, d.Name, err)
		}
	}
	for i, l := range t.Links {
		if !positive(l.Bandwidth) || l.Latency < 0 || math.IsInf(l.Latency, 0) || len(l.Devices) < 2 {
			return fmt.Errorf("link %d: bandwidth must be positive, latency not negative, and it must connect at least two devices", i)
		}
		for _, d := range l.Devices {
			if d < 0 || d >= len(t.Devices) {
				return fmt.Errorf("link %d: no device %d (the topology has %d)", i, d, len(t.Devices))
			}
		}
	}
	return nil
}

// maxMathSeconds bounds a math call's cost: a millisecond is no
// measurement of a routine of tens of operations.
const maxMathSeconds = 1e-3

// validMathSeconds checks d's math_seconds: only on a host process
// (where the simulator applies them), in a mode of MathModes, for
// functions of CalibratedMath, each from 0 to maxMathSeconds.
func (t *Topology) validMathSeconds(d TopologyDevice) error {
	if len(d.MathSeconds) > 0 && !t.HostProcess {
		return fmt.Errorf("math_seconds price the host's kernels: they need host_process (tofuc bench --calibrate writes both)")
	}
	for mode, fns := range d.MathSeconds {
		if !slices.ContainsFunc(MathModes, func(m precision.Mode) bool { return m.String() == mode }) {
			return fmt.Errorf("math_seconds: no mode %q (the modes measured: %s)", mode, modeNames(MathModes))
		}
		for fn, sec := range fns {
			if !slices.Contains(CalibratedMath, fn) {
				return fmt.Errorf("math_seconds %s: no function %q (those priced: %s)", mode, fn, strings.Join(CalibratedMath, ", "))
			}
			if !(sec >= 0 && sec <= maxMathSeconds) {
				return fmt.Errorf("math_seconds %s %s: %g s a call, want 0 to %g", mode, fn, sec, maxMathSeconds)
			}
		}
	}
	return nil
}

// modeNames lists modes' names.
func modeNames(modes []precision.Mode) string {
	var names []string
	for _, m := range modes {
		names = append(names, m.String())
	}
	return strings.Join(names, ", ")
}

// Roofline is device i as a roofline profile.
func (t *Topology) Roofline(i int) Device {
	d := t.Devices[i]
	dev := Device{Name: d.Name, PeakFLOPS: d.PeakFLOPS, Bandwidth: d.MemoryBandwidth, Launch: d.LaunchSeconds, HalfFLOPs: d.ContractionHalfFLOPs, NarrowCols: d.ContractionNarrowCols,
		ChainedLaunches: d.ChainedLaunches}
	if len(d.ContractionTile) == 2 {
		dev.TileRows, dev.TileCols = d.ContractionTile[0], d.ContractionTile[1]
	}
	return dev
}

// link is the fastest link between devices a and b (ok false: none).
func (t *Topology) link(a, b int) (Link, bool) {
	var best Link
	found := false
	for _, l := range t.Links {
		if slices.Contains(l.Devices, a) && slices.Contains(l.Devices, b) && (!found || l.Bandwidth > best.Bandwidth) {
			best, found = l, true
		}
	}
	return best, found
}

// Ring is the slowest link between neighbours of a ring through the
// devices of group, in its order, with the longest latency: what an
// all-reduce over the group runs at (AllReduceSeconds).
func (t *Topology) Ring(group []int) (Link, error) {
	return t.slowest(func(yield func(a, b int) bool) {
		for i, a := range group {
			if !yield(a, group[(i+1)%len(group)]) {
				return
			}
		}
	})
}

// Between is the slowest link from any device of a to any of b, with
// the longest latency: what data moving from one group to the other
// runs at.
func (t *Topology) Between(from, to []int) (Link, error) {
	return t.slowest(func(yield func(a, b int) bool) {
		for _, a := range from {
			for _, b := range to {
				if !yield(a, b) {
					return
				}
			}
		}
	})
}

// slowest is the least bandwidth and the longest latency of the links
// that join the pairs.
func (t *Topology) slowest(pairs iter.Seq2[int, int]) (Link, error) {
	slow := Link{Bandwidth: -1}
	for a, b := range pairs {
		l, ok := t.link(a, b)
		if !ok {
			return Link{}, fmt.Errorf("the topology %q has no link that joins devices %d and %d", t.Name, a, b)
		}
		if slow.Bandwidth < 0 || l.Bandwidth < slow.Bandwidth {
			slow.Bandwidth = l.Bandwidth
		}
		slow.Latency = max(slow.Latency, l.Latency)
	}
	return slow, nil
}

// CheckLinked says which of the first n devices no link joins, if any:
// a plan of n devices may move data between any two of them.
func (t *Topology) CheckLinked(n int) error {
	joined := make([][]bool, n)
	for d := range joined {
		joined[d] = make([]bool, n)
	}
	for _, l := range t.Links {
		for _, a := range l.Devices {
			for _, b := range l.Devices {
				if a < n && b < n {
					joined[a][b] = true
				}
			}
		}
	}
	for a := range n {
		for b := a + 1; b < n; b++ {
			if !joined[a][b] {
				return fmt.Errorf("the topology %q has no link that joins devices %d and %d", t.Name, a, b)
			}
		}
	}
	return nil
}

// stepLinks is what the simulation takes of the devices of a plan with
// these factors, the first Π factors of t: device 0's profile (the
// plan's devices are alike, Tofu's symmetry) and, per step, the slowest
// link between any device and the others of its group at that step
// (those whose digits differ from its own at that step alone: a step's
// transfers stay in its groups), which bounds a transfer that gathers
// from all of them. On a topology of machines, the steps of the first
// digits span machines and the last ones stay inside one, unless a
// group straddles two machines (9 devices as 3 × 3 on machines of 8).
func (t *Topology) stepLinks(factors []int) (Device, []Link, error) {
	n := 1
	for _, k := range factors {
		n *= k
	}
	if n > len(t.Devices) {
		return Device{}, nil, fmt.Errorf("the topology %q has %d devices, the plan %d", t.Name, len(t.Devices), n)
	}
	links := make([]Link, len(factors))
	stride := n
	for i, k := range factors {
		stride /= k
		slow := Link{Bandwidth: math.Inf(1)}
		for d := range n {
			digit := d / stride % k
			for m := digit + 1; m < k; m++ { // each pair once
				e := d + (m-digit)*stride
				l, ok := t.link(d, e)
				if !ok {
					return Device{}, nil, fmt.Errorf("the topology %q has no link that joins devices %d and %d", t.Name, d, e)
				}
				slow.Bandwidth = min(slow.Bandwidth, l.Bandwidth)
				slow.Latency = max(slow.Latency, l.Latency)
			}
		}
		links[i] = slow
	}
	return t.Roofline(0), links, nil
}
