package cost

import (
	"fmt"
	"sync"

	"tofuc/analysis/schedule"
	"tofuc/lang"
	"tofuc/lang/ir"
)

// Device is a profile for the roofline estimate of a graph on one GPU.
type Device struct {
	Name      string
	PeakFLOPS float64 // floating-point operations per second (f32, no tensor cores)
	Bandwidth float64 // device-memory bytes per second
	Launch    float64 // seconds of overhead per kernel launch
	// HalfFLOPs and TileRows, TileCols model the rate of a contraction
	// kernel (one that IsContraction), where positive: a contraction
	// computes its FLOPs padded to whole micro-tiles (ContractionShape)
	// and its half-performance size besides (Hockney's f½), all at
	// PeakFLOPS, so that one of f padded FLOPs runs at
	// PeakFLOPS·f/(f + HalfFLOPs) and PeakFLOPS is the rate of an
	// unboundedly large one. Other kernels compute at PeakFLOPS. 0:
	// every kernel at PeakFLOPS (the GPU profiles).
	HalfFLOPs          float64
	TileRows, TileCols int64
	// NarrowCols is the most columns of a contraction that the device
	// computes without padding them (ContractionShape.Padding).
	NarrowCols int64
	// ChainedLaunches says that the device runs a chained pair of
	// kernels (schedule.Kernel.Before) as one launch whose passed rows
	// stay in cache, as the host runtime does; a GPU runs the two as
	// launches of their own.
	ChainedLaunches bool
}

// Seconds is the time on d of a kernel of compute seconds
// (ComputeSeconds) that reads and writes bytes of memory: the longer of
// the two; on a device of the contraction model (HalfFLOPs positive,
// the host), serial bytes besides, its contractions' traffic between
// their multiplications (ContractionShape.SerialBytes).
func (d Device) Seconds(compute float64, bytes, serial int64) float64 {
	t := max(compute, float64(bytes)/d.Bandwidth)
	if d.HalfFLOPs > 0 {
		t += float64(serial) / d.Bandwidth
	}
	return t
}

// ComputeSeconds is the compute time on d of a kernel of flops FLOPs,
// of which contractions are contraction kernels, whose FLOPs padded to
// whole micro-tiles are flops plus padding (ContractionShape.Padding):
// the padded FLOPs at the peak, and each contraction's half-performance
// size at the peak besides. A kernel of a schedule is at most one
// contraction; an instance may launch several.
func (d Device) ComputeSeconds(flops, padding int64, contractions int) float64 {
	return (float64(flops) + float64(padding) + float64(contractions)*d.HalfFLOPs) / d.PeakFLOPS
}

// H100 is the default profile: an H100 SXM's f32 CUDA-core peak, its HBM3
// bandwidth, and a typical kernel launch overhead.
var H100 = Device{Name: "H100 SXM", PeakFLOPS: 67e12, Bandwidth: 3.35e12, Launch: 3e-6}

// KernelEstimate is one kernel of a graph: a node and the element-wise
// nodes fused into it.
type KernelEstimate struct {
	Nodes []string // the node that launches it first, then those fused into it
	FLOPs int64
	Bytes int64 // read from and written to device memory
	Time  float64
	// Contraction is the shape of a contraction kernel (nil: not one),
	// and Padding the FLOPs its micro-tiles add on the device.
	Contraction *ContractionShape
	Padding     int64
}

// Estimate is the roofline cost of running a graph as a sequence of
// kernels: each kernel takes the longer of its compute and its memory
// time, plus the launch overhead.
type Estimate struct {
	Device   Device
	FLOPs    int64
	Bytes    int64
	Launches int
	Time     float64 // seconds
	Kernels  []KernelEstimate
	// Precomputed counts the nodes computed from parameters and constants
	// alone, and Views the nodes whose outputs are contiguous ranges of an
	// input: neither runs a kernel (see Roofline).
	Precomputed int
	Views       int
}

// Roofline estimates g on d, for inference, as the kernels of its
// schedule (analysis/schedule): views launch nothing and move no bytes,
// precomputed kernels run once when the weights are loaded and cost
// nothing per run, and a fused kernel reads its inputs and writes its
// outputs once, its intermediates staying in registers. Each kernel takes
// the longer of its compute and its memory time plus the launch overhead.
// Shapes must be concrete.
func Roofline(g *ir.Graph, d Device) (*Estimate, error) {
	return RooflineOf(schedule.Build(g), d)
}

// RooflineOf estimates the kernels of schedule s on d (see Roofline).
func RooflineOf(s *schedule.Schedule, d Device) (*Estimate, error) {
	return rooflineOf(s, d, nil)
}

// Estimator prices graphs as Roofline does, remembering what it reads
// from each Def it meets (its FLOPs, a contraction's shape), so that
// pricing many graphs that share their instances (a rewrite search's)
// reads each Def once. Its methods may be called concurrently; the
// instances of the graphs it prices must not change.
type Estimator struct {
	device Device
	memo   *defMemo
}

// NewEstimator returns an Estimator for device d.
func NewEstimator(d Device) *Estimator { return &Estimator{device: d, memo: &defMemo{}} }

// Roofline is Roofline(g, d) for the Estimator's device d.
func (e *Estimator) Roofline(g *ir.Graph) (*Estimate, error) {
	build := schedule.Build
	if !e.device.ChainedLaunches {
		build = schedule.BuildUnchained // its estimate ignores chains
	}
	return rooflineOf(build(g), e.device, e.memo)
}

// defMemo remembers DefFLOPs and contractionOf per Def; a nil one
// remembers nothing.
type defMemo struct{ flops, contractions sync.Map }

type flopsResult struct {
	n   int64
	err error
}

type contractionResult struct {
	c  contraction
	ok bool
}

func (m *defMemo) defFLOPs(d *ir.Def) (int64, error) {
	if m == nil {
		return DefFLOPs(d)
	}
	r := remember(&m.flops, d, func() flopsResult { n, err := DefFLOPs(d); return flopsResult{n, err} })
	return r.n, r.err
}

func (m *defMemo) isContraction(d *ir.Def) bool {
	_, ok := m.contraction(d)
	return ok
}

func (m *defMemo) contraction(d *ir.Def) (contraction, bool) {
	if m == nil {
		return contractionOf(d)
	}
	r := remember(&m.contractions, d, func() contractionResult { c, ok := contractionOf(d); return contractionResult{c, ok} })
	return r.c, r.ok
}

// remember is the value stored for d in memo, computed and stored the
// first time.
func remember[V any](memo *sync.Map, d *ir.Def, compute func() V) V {
	if r, ok := memo.Load(d); ok {
		return r.(V)
	}
	v := compute()
	memo.Store(d, v)
	return v
}

func rooflineOf(s *schedule.Schedule, d Device, memo *defMemo) (*Estimate, error) {
	est := &Estimate{Device: d, Views: len(s.Views)}
	weights := weightValues(s.Graph)
	for k, kern := range s.Kernels {
		if kern.Precomputed {
			est.Precomputed++
			continue
		}
		ke, err := estimateKernel(s, k, d, weights, memo)
		if err != nil {
			return nil, err
		}
		est.Kernels = append(est.Kernels, ke)
		est.FLOPs, err = checkedAdd(est.FLOPs, ke.FLOPs)
		if err == nil {
			est.Bytes, err = checkedAdd(est.Bytes, ke.Bytes)
		}
		if err != nil {
			return nil, fmt.Errorf("the model: %w", err)
		}
		est.Time += ke.Time
		if !kern.Chained || !d.ChainedLaunches {
			est.Launches++
		}
	}
	return est, nil
}

// EstimateKernel prices kernel k of s: the FLOPs of the Def it computes
// (with those of the node's recomputed locals on the node's first kernel)
// and of the nodes fused into it, the bytes of every buffer it reads once
// and of the buffer it writes (on a device of ChainedLaunches, not the
// rows a chained launch passes from its first kernel to its second, nor
// a launch overhead for the first).
// A contraction's compute is
// Device.ComputeSeconds of its shape (ContractionOf, the factor computed
// from the weights the row side).
func EstimateKernel(s *schedule.Schedule, k int, d Device) (KernelEstimate, error) {
	return estimateKernel(s, k, d, weightValues(s.Graph), nil)
}

func estimateKernel(s *schedule.Schedule, k int, d Device, weights map[*ir.Value]bool, memo *defMemo) (KernelEstimate, error) {
	var ke KernelEstimate
	kern := s.Kernels[k]
	root := kern.Root()
	f, err := memo.defFLOPs(kern.Def)
	if err == nil && schedule.Launches(root.Inst)[0] == kern.Def {
		for _, l := range root.Inst.Locals {
			if s.Recomputed(root, l) {
				lf, lerr := memo.defFLOPs(l)
				if err = lerr; err == nil {
					f, err = checkedAdd(f, lf)
				}
			}
		}
	}
	if err != nil {
		return ke, fmt.Errorf("node %s: %s: %w", root.Name, root.Inst.Op, err)
	}
	ke.FLOPs = f
	ke.Nodes = append(ke.Nodes, root.Name)
	for _, n := range kern.Nodes[1:] {
		f, err := fusedFLOPs(s, n, memo)
		if err == nil {
			ke.FLOPs, err = checkedAdd(ke.FLOPs, f)
		}
		if err != nil {
			return ke, fmt.Errorf("node %s: %w", n.Name, err)
		}
		ke.Nodes = append(ke.Nodes, n.Name)
	}
	before, chained := kern.Before, kern.Chained
	if !d.ChainedLaunches {
		before, chained = nil, false
	}
	for _, o := range append(s.Reads(k), s.Write(k)) {
		if before != nil && o.Value == before.Out() || chained && o == s.Write(k) {
			continue // a chained launch's rows stay in its tasks' caches
		}
		if ke.Bytes, err = checkedAdd(ke.Bytes, operandBytes(o)); err != nil {
			return ke, fmt.Errorf("node %s: %w", root.Name, err)
		}
	}
	contractions := 0
	var serial int64
	if f, ok := memo.contraction(kern.Def); ok {
		c := f.shape(tensorWeight(root, weights))
		contractions = 1
		ke.Contraction = &c
		ke.Padding = c.Padding(d.TileRows, d.TileCols, d.NarrowCols)
		serial = c.SerialBytes()
	}
	launch := d.Launch
	switch {
	case chained:
		// In the launch of the kernel chained after it, which pays the
		// launch and, once for the pair, a contraction's fixed cost
		// beyond it (f½, fitted per launch).
		launch, contractions = 0, 0
	case before != nil && memo.isContraction(before.Def):
		contractions = 1
	}
	ke.Time = d.Seconds(d.ComputeSeconds(ke.FLOPs, ke.Padding, contractions), ke.Bytes, serial) + launch
	return ke, nil
}

func operandBytes(o schedule.Operand) int64 {
	if o.Value != nil {
		return ValueBytes(o.Value)
	}
	return tensorBytes(o.Local.Tensor.DType, o.Local.Tensor.Shape)
}

// ValueBytes is the bytes of a value of concrete shape.
func ValueBytes(v *ir.Value) int64 { return tensorBytes(v.DType, v.Shape) }

func tensorBytes(dt lang.DType, shape []lang.Dim) int64 {
	n := int64(max(1, dt.Size()))
	for _, d := range shape {
		c, _ := d.IsConst()
		n *= c
	}
	return n
}

// fusedFLOPs are the FLOPs of a node fused into a kernel: its output and
// the locals recomputed there (those precomputed with the weights run
// once, not per launch).
func fusedFLOPs(s *schedule.Schedule, n *ir.Node, memo *defMemo) (int64, error) {
	total := int64(0)
	for _, d := range n.Inst.Outputs {
		f, err := memo.defFLOPs(d)
		if err == nil {
			total, err = checkedAdd(total, f)
		}
		if err != nil {
			return 0, err
		}
	}
	for _, l := range n.Inst.Locals {
		if !s.Recomputed(n, l) {
			continue
		}
		f, err := memo.defFLOPs(l)
		if err == nil {
			total, err = checkedAdd(total, f)
		}
		if err != nil {
			return 0, err
		}
	}
	return total, nil
}
