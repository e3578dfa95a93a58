package cost

import (
	"math"
	"testing"

	"tofuc/lang/precision"
	"tofuc/runtime/plan"
)

// hostDevice is a host device of the contraction model: 100 GFLOP/s
// at the limit, f½ 1 MFLOP, tiles of 8 × 32, narrow up to 4 columns.
var hostDevice = TopologyDevice{Name: "host", PeakFLOPS: 100e9, MemoryBandwidth: 20e9, MemoryBytes: 1 << 30,
	LaunchSeconds: 1e-6, StepSeconds: 5e-6, ContractionHalfFLOPs: 1e6, ContractionTile: []int64{8, 32}, ContractionNarrowCols: 4, ChainedLaunches: true}

// twoLaunches is a plan of two devices, each launching kernel k once,
// independently, and of those kernels.
func twoLaunches(kernels ...plan.Kernel) *plan.Plan {
	p := &plan.Plan{Devices: 2, Kernels: kernels, Steps: make([][]plan.Step, 2)}
	for d := range 2 {
		for k := range kernels {
			p.Steps[d] = append(p.Steps[d], plan.Step{Op: plan.Launch, Kernel: k})
		}
	}
	return p
}

// TestSimulatePlanHostProcess: on a topology of one host process, the
// devices' independent launches take their sum (they share the threads;
// without HostProcess they overlap), the host's kernels are priced (a
// GPU-only one is not, a host-only chain is) and a packed product pays
// its padding to whole tiles and f½ once per launch, and its serial
// bytes (ContractionShape.SerialBytes) besides.
func TestSimulatePlanHostProcess(t *testing.T) {
	// 64 × 30 outputs of depth 100: columns padded to 32, rows whole.
	gemm := plan.Kernel{Kind: "contraction", Grid: 1, HostRange: 1, FLOPs: 2 * 64 * 30 * 100, Bytes: 4 * (64*100 + 30*100 + 64*30),
		GEMMs: []plan.GEMM{{Batch: 1, Rows: 64, Cols: 30, Depth: 100}}}
	gpuOnly := plan.Kernel{Kind: "elementwise", Grid: 1, GPUOnly: true, FLOPs: 1e9, Bytes: 1e9}
	chain := plan.Kernel{Kind: "contraction", HostRange: 1, HostOnly: true, FLOPs: 2 * 2 * 8 * 4 * 10,
		GEMMs: []plan.GEMM{{Batch: 1, Rows: 8, Cols: 4, Depth: 10}, {Batch: 1, Rows: 8, Cols: 4, Depth: 10}}}
	p := twoLaunches(gemm, gpuOnly, chain)
	host := &Topology{Name: "host", Devices: []TopologyDevice{hostDevice, hostDevice}, HostProcess: true}

	// The longer of compute and bytes, then the serial bytes: both
	// factors packed (4 bytes a float) and the outputs written (8
	// bytes each); the chain's two GEMMs each.
	gemmSeconds := (float64(gemm.FLOPs) + 2*100*64*2 + 1e6) / 100e9
	gemmSeconds = max(gemmSeconds, float64(gemm.Bytes)/20e9) + float64(4*100*(64+30)+8*64*30)/20e9 + 1e-6
	chainSeconds := (float64(chain.FLOPs)+1e6)/100e9 + float64(2*(4*10*(8+4)+8*8*4))/20e9 + 1e-6 // narrow: no padding; f½ once
	for i, want := range []float64{gemmSeconds, 0, chainSeconds} {
		if got := KernelSeconds(&p.Kernels[i], p.Precision, host, 0); math.Abs(got-want) > 1e-15 {
			t.Errorf("kernel %d: %g s on the host, want %g", i, got, want)
		}
	}
	sim, err := SimulatePlan(p, host)
	if err != nil {
		t.Fatal(err)
	}
	if want := 2*(gemmSeconds+chainSeconds) + 5e-6; math.Abs(sim.Seconds-want) > 1e-15 || math.Abs(sim.Compute-want+5e-6) > 1e-15 {
		t.Errorf("sharing the threads: step %g s, compute %g s; want %g s, the two devices' launches one after the other and step_seconds", sim.Seconds, sim.Compute, want)
	}

	apart := &Topology{Name: "apart", Devices: host.Devices}
	if sim, err = SimulatePlan(p, apart); err != nil {
		t.Fatal(err)
	}
	gpu := apart.Roofline(0)
	want := max(gpu.ComputeSeconds(gemm.FLOPs, 0, 0), float64(gemm.Bytes)/gpu.Bandwidth) + 1e-6 +
		max(gpu.ComputeSeconds(gpuOnly.FLOPs, 0, 0), float64(gpuOnly.Bytes)/gpu.Bandwidth) + 1e-6
	if math.Abs(sim.Seconds-want) > 1e-12 {
		t.Errorf("devices of their own (GPU pricing: the GPU-only kernel, not the chain): step %g s, want %g", sim.Seconds, want)
	}
}

// TestSimulatePlanHostCopies: a copy from another device of a host
// process takes the link between them, one after the launches.
func TestSimulatePlanHostCopies(t *testing.T) {
	k := plan.Kernel{Kind: "elementwise", Grid: 1, HostRange: 1, FLOPs: 1000, Bytes: 4e6}
	p := &plan.Plan{Devices: 2, Kernels: []plan.Kernel{k}, Steps: make([][]plan.Step, 2),
		Buffers: []plan.Buffer{{ID: 0, Device: 0, DType: "f32", Shape: []int64{1 << 20}, Bytes: 4 << 20}, {ID: 1, Device: 1, DType: "f32", Shape: []int64{1 << 20}, Bytes: 4 << 20}}}
	p.Steps[0] = []plan.Step{{Op: plan.Launch, Kernel: 0}}
	p.Steps[1] = []plan.Step{
		{Op: plan.Copy, From: 0, To: 1, Src: []plan.Dim{{Hi: 1 << 20}}, After: []plan.StepRef{{Device: 0, Step: 0}}},
		{Op: plan.Launch, Kernel: 0},
	}
	link := Link{Devices: []int{0, 1}, Bandwidth: 10e9, Latency: 1e-6}
	host := &Topology{Name: "host", Devices: []TopologyDevice{hostDevice, hostDevice}, Links: []Link{link}, HostProcess: true}
	sim, err := SimulatePlan(p, host)
	if err != nil {
		t.Fatal(err)
	}
	launch := KernelSeconds(&k, precision.Exact, host, 0)
	copySeconds := float64(4<<20)/10e9 + 1e-6
	if want := 2*launch + copySeconds + 5e-6; math.Abs(sim.Seconds-want) > 1e-15 {
		t.Errorf("step %g s, want %g (two launches and a copy)", sim.Seconds, want)
	}
}

// TestSimulatePlanTimed: launches take their measured seconds, an
// all-reduce and a copy stay priced over the links whatever was
// measured for them, and a placement group's step that was not measured
// (its variant did not run) takes none.
func TestSimulatePlanTimed(t *testing.T) {
	k := plan.Kernel{Kind: "elementwise", Grid: 1, HostRange: 1, FLOPs: 1000, Bytes: 4000, Reducer: "sum"}
	p := &plan.Plan{Devices: 2, Kernels: []plan.Kernel{k}, Steps: make([][]plan.Step, 2)}
	for d := range 2 {
		p.Buffers = append(p.Buffers, plan.Buffer{ID: d, Device: d, DType: "f32", Shape: []int64{1 << 20}, Bytes: 4 << 20})
	}
	for d := range 2 {
		p.Steps[d] = []plan.Step{
			{Op: plan.Launch, Kernel: 0},
			{Op: plan.AllReduce, Kernel: 0, Reducer: "sum", Parts: []int{0, 1}, Group: []int{0, 1}, To: d},
			{Op: plan.Launch, Kernel: 0, Place: &plan.Placed{Group: 0, Variants: []string{plan.Generated}}},
		}
	}
	link := Link{Devices: []int{0, 1}, Bandwidth: 10e9, Latency: 1e-6}
	host := &Topology{Name: "host", Devices: []TopologyDevice{hostDevice, hostDevice}, Links: []Link{link}, HostProcess: true}
	measured := map[plan.StepRef]float64{}
	for d := range 2 {
		measured[plan.StepRef{Device: d, Step: 0}] = 1e-3
		measured[plan.StepRef{Device: d, Step: 1}] = 5 // an all-reduce's kernel: not what the simulation charges
	}
	sim, err := SimulatePlanTimed(p, host, measured)
	if err != nil {
		t.Fatal(err)
	}
	allReduce := AllReduceSeconds(4<<20, 2, link)
	if want := 2*1e-3 + 2*allReduce + 5e-6; math.Abs(sim.Seconds-want) > 1e-12 {
		t.Errorf("step %g s, want %g: two launches as measured, the all-reduce priced on each device, the unmeasured placed steps none", sim.Seconds, want)
	}
}

// TestKernelSecondsMathCalls: on a host process whose device has
// measured math costs, a launch's costly calls add to its compute at
// the costs of its plan's mode (the f32 costs for every mode but
// exact; a function without a cost adds nothing), and can make a
// memory-bound kernel compute-bound; without costs, or on a GPU
// topology, the roofline is as before. A kernel whose host form computes
// less (HostFLOPs) is priced at that on the host, not on a GPU. Costs
// that are no measurement, of a mode or function not measured, or on a
// topology that does not apply them, are refused. Negative or infinite costs are
// refused.
func TestKernelSecondsMathCalls(t *testing.T) {
	k := plan.Kernel{Kind: "elementwise", Grid: 1, HostRange: 1, FLOPs: 3e6, Bytes: 8e6,
		MathCalls: map[string]int64{"erf": 1e6, "exp": 2e6}}
	dev := hostDevice
	plain := &Topology{Name: "host", Devices: []TopologyDevice{dev}, HostProcess: true}
	memory := 8e6/20e9 + 1e-6 // the bytes at the bandwidth, and the launch
	if got := KernelSeconds(&k, precision.Exact, plain, 0); math.Abs(got-memory) > 1e-15 {
		t.Errorf("no math costs: %g s, want the memory-bound %g", got, memory)
	}
	dev.MathSeconds = map[string]map[string]float64{
		"exact": {"erf": 4e-9, "exp": 1e-9},
		"f32":   {"erf": 1e-9},
	}
	host := &Topology{Name: "host", Devices: []TopologyDevice{dev}, HostProcess: true}
	exact := 3e6/100e9 + 1e6*4e-9 + 2e6*1e-9 + 1e-6
	f32 := max(3e6/100e9+1e6*1e-9, 8e6/20e9) + 1e-6
	for _, c := range []struct {
		mode precision.Mode
		want float64
	}{{precision.Exact, exact}, {precision.F32, f32}, {precision.BF16, f32}} {
		if got := KernelSeconds(&k, c.mode, host, 0); math.Abs(got-c.want) > 1e-15 {
			t.Errorf("%s: %g s, want %g", c.mode, got, c.want)
		}
	}
	gpu := &Topology{Name: "gpu", Devices: host.Devices}
	if got, want := KernelSeconds(&k, precision.Exact, gpu, 0), max(3e6/100e9, 8e6/20e9)+1e-6; math.Abs(got-want) > 1e-15 {
		t.Errorf("on a GPU topology: %g s, want the roofline without math costs %g", got, want)
	}
	scatter := plan.Kernel{Kind: "reduction", Grid: 1, HostRange: 1, FLOPs: 1e10, HostFLOPs: 1e6, Bytes: 8}
	if got, want := KernelSeconds(&scatter, precision.F32, plain, 0), 1e6/100e9+1e-6; math.Abs(got-want) > 1e-15 {
		t.Errorf("a host form computing less: %g s on the host, want its host FLOPs' %g", got, want)
	}
	if got, want := KernelSeconds(&scatter, precision.F32, gpu, 0), 1e10/100e9+1e-6; math.Abs(got-want) > 1e-15 {
		t.Errorf("the same on a GPU: %g s, want every FLOP's %g", got, want)
	}
	for _, bad := range []map[string]map[string]float64{
		{"exact": {"exp": -1e-9}},
		{"exact": {"exp": math.Inf(1)}},
		{"exact": {"exp": math.NaN()}},
		{"exact": {"exp": 1e308}},
		{"bf16": {"exp": 1e-9}},   // no mode measured
		{"exact": {"expf": 1e-9}}, // no such function
		{"f32": {"pow": 1e-9}},    // not priced
	} {
		d := hostDevice
		d.MathSeconds = bad
		if err := (&Topology{Devices: []TopologyDevice{d}, HostProcess: true}).Validate(); err == nil {
			t.Errorf("math_seconds %v accepted", bad)
		}
	}
	if err := (&Topology{Devices: host.Devices}).Validate(); err == nil {
		t.Error("math_seconds accepted on a topology that is not a host process, where nothing applies them")
	}
	if err := host.Validate(); err != nil {
		t.Error(err)
	}
}
