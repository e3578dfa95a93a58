package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"syscall"

	"tofuc/analysis/cost"
	"tofuc/codegen/backend"
	"tofuc/codegen/blocking"
)

// The reference models of `tofuc bench --calibrate`: typical layers of
// CNNs and MLPs, none a layer of the models the simulation is checked
// against (docs/partition.md).
var (
	// Contractions of 0.5 to 300 MFLOP with their epilogues, of shapes
	// as varied as the layers of CNNs and MLPs: 3×3 and 1×1
	// convolutions over large and small images, deep and shallow;
	// linear layers of many and of few rows, deep and shallow, wide and
	// narrow; and the tiny matmul below. Their times fit the
	// half-performance model (cost.FitHalfPerformance).
	calibrateContractions = []string{`model conv3(x: f32[1, 96, 40, 40]) {
    w = param f32[96, 96, 3, 3] init he()
    y = relu(conv2d<pads = [1, 1, 1, 1]>(x, w))
    return y
}`, `model conv1(x: f32[1, 192, 20, 20]) {
    w = param f32[384, 192, 1, 1] init he()
    y = relu(conv2d(x, w))
    return y
}`, `model thin3(x: f32[1, 24, 96, 96]) {
    w = param f32[32, 24, 3, 3] init he()
    y = relu(conv2d<pads = [1, 1, 1, 1]>(x, w))
    return y
}`, `model deep3(x: f32[1, 384, 6, 6]) {
    w = param f32[768, 384, 3, 3] init he()
    y = relu(conv2d<pads = [1, 1, 1, 1]>(x, w))
    return y
}`, `model shallow1(x: f32[1, 48, 36, 36]) {
    w = param f32[160, 48, 1, 1] init he()
    y = relu(conv2d(x, w))
    return y
}`, `model linear(x: f32[256, 768]) {
    w = param f32[768, 768] init glorot()
    b = param f32[768] init zeros()
    y = relu(linear(x, w, b))
    return y
}`, `model small(x: f32[64, 512]) {
    w = param f32[512, 256] init glorot()
    b = param f32[256] init zeros()
    y = relu(linear(x, w, b))
    return y
}`, `model fewrows(x: f32[16, 1024]) {
    w = param f32[1024, 1024] init glorot()
    b = param f32[1024] init zeros()
    y = relu(linear(x, w, b))
    return y
}`, `model manyrows(x: f32[1000, 64]) {
    w = param f32[64, 64] init glorot()
    b = param f32[64] init zeros()
    y = relu(linear(x, w, b))
    return y
}`, `model deep(x: f32[48, 2000]) {
    w = param f32[2000, 100] init glorot()
    b = param f32[100] init zeros()
    y = relu(linear(x, w, b))
    return y
}`, `model narrow(x: f32[300, 50]) {
    w = param f32[50, 40] init glorot()
    b = param f32[40] init zeros()
    y = relu(linear(x, w, b))
    return y
}`, `model tiny(x: f32[96, 160]) {
    w = param f32[160, 24] init glorot()
    b = param f32[24] init zeros()
    y = relu(linear(x, w, b))
    return y
}`}
	// An add of 64 MiB tensors: its kernel gives the memory bandwidth.
	calibrateAdd = `model add(a: f32[4096, 4096], b: f32[4096, 4096]) {
    c = a + b
    return c
}`
	// Kernels too small for their work to count: their runs give a
	// step's fixed cost beyond its kernels, the add's kernel the fixed
	// cost of a kernel, and the matmul's kernel is the smallest of the
	// reference contractions.
	calibrateTinyAdd = `model tinyadd(a: f32[256], b: f32[256]) {
    c = a + b
    return c
}`
	calibrateTinyMatmul = `model tinymatmul(a: f32[64, 64], b: f32[64, 64]) {
    c = relu(matmul(a, b))
    return c
}`
	// A sum of a 4 MiB input (a batch of images or of token vectors):
	// the rest of its run, beyond the fixed cost, copies the input in.
	calibrateCopy = `model copy(a: f32[1024, 1024]) {
    s = reduce_sum<axes = [0, 1]>(a)
    return s
}`
)

// calibrateRounds is how many times each reference model is timed.
const calibrateRounds = 3

// runCalibrate measures this host with the cpu backend on --threads
// threads and prints a topology of one device describing it, for
// --topology (docs/partition.md, "Simulated step time"), each model
// timed in calibrateRounds rounds of --runs runs:
//   - memory_bandwidth: the large add's bytes over its kernel's time;
//   - launch_seconds: what the tiny add's kernel takes beyond its
//     roofline time (an element-wise kernel's fixed cost);
//   - step_seconds: the smaller of the tiny models' runs beyond their
//     kernels (the runtime's fixed cost per step);
//   - peak_flops and contraction_half_flops: Hockney's r∞ and f½
//     fitted to the reference contractions' kernels beyond their
//     launch (cost.FitHalfPerformance), each reference's time and the
//     model's written to stderr;
//   - io_bandwidth: the copy model's input over the rest of its run
//     beyond its kernel and the fixed cost.
func runCalibrate(f benchFlags, stdout, stderr io.Writer) int {
	d, err := calibrate(f, stderr)
	if err != nil {
		return fail(stderr, err)
	}
	t := cost.Topology{Name: fmt.Sprintf("this host, measured by tofuc bench --calibrate (%s/%s)", runtime.GOOS, runtime.GOARCH), Devices: []cost.TopologyDevice{d}, Links: []cost.Link{}}
	if err := t.Validate(); err != nil {
		return fail(stderr, fmt.Errorf("the measurements give no valid topology: %v", err))
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	enc.Encode(t)
	return exitOK
}

func calibrate(f benchFlags, stderr io.Writer) (cost.TopologyDevice, error) {
	// The host runtime runs a chained pair of kernels as one launch.
	d := cost.TopologyDevice{Name: fmt.Sprintf("host cores (cpu backend, %d threads)", threadsOf(f.threads)), ChainedLaunches: true}
	dir, err := os.MkdirTemp("", "tofuc-calibrate-")
	if err != nil {
		return d, err
	}
	defer os.RemoveAll(dir)
	b, err := backend.ByName("cpu", f.threads)
	if err != nil {
		return d, err
	}
	// Every model is timed in calibrateRounds rounds, each round
	// timing all of them in turn, and the round of its median kernel
	// time kept: on a shared machine one round can be off by half, and
	// the machine's speed drifts, so that each model's median is drawn
	// from the whole calibration, not from one stretch of it.
	srcs := append([]string{calibrateAdd, calibrateTinyAdd, calibrateTinyMatmul, calibrateCopy}, calibrateContractions...)
	ms := make([]*measured, len(srcs))
	for i, src := range srcs {
		path := filepath.Join(dir, fmt.Sprintf("m%d.tdl", i))
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			return d, err
		}
		g, _, err := benchGraph(path, benchFlags{})
		if err != nil {
			return d, err
		}
		m := &measured{path: path}
		if m.est, err = cost.Roofline(g, cost.Device{PeakFLOPS: 1, Bandwidth: 1}); err != nil {
			return d, err
		}
		for _, in := range g.Inputs {
			m.inputBytes += cost.ValueBytes(in)
		}
		ms[i] = m
	}
	rounds := make([][]*benchResult, len(srcs))
	for range calibrateRounds {
		for i, m := range ms {
			res, err := bench(m.path, benchFlags{runs: f.runs, threads: f.threads, seed: f.seed}, b, nil, stderr)
			if err != nil {
				return d, err
			}
			rounds[i] = append(rounds[i], res)
		}
	}
	for i, m := range ms {
		slices.SortFunc(rounds[i], func(x, y *benchResult) int { return cmp.Compare(kernelSeconds(x), kernelSeconds(y)) })
		m.benchResult = rounds[i][len(rounds[i])/2]
	}
	add, tinyAdd, tinyMatmul, cp := ms[0], ms[1], ms[2], ms[3]
	d.MemoryBandwidth = float64(add.est.Bytes) / kernelSeconds(add.benchResult)
	// The add's FLOPs are no more than its bytes: its roofline is its
	// memory time.
	d.LaunchSeconds = max(0, kernelSeconds(tinyAdd.benchResult)-float64(tinyAdd.est.Bytes)/d.MemoryBandwidth) / float64(max(1, tinyAdd.est.Launches))
	// A step costs what the cheaper tiny run took beyond its kernels
	// (the one with the least to copy).
	d.StepSeconds = min(max(0, tinyAdd.Median-kernelSeconds(tinyAdd.benchResult)), max(0, tinyMatmul.Median-kernelSeconds(tinyMatmul.benchResult)))
	refs := append([]*measured{tinyMatmul}, ms[4:]...)
	// Each reference is one contraction kernel (its epilogue fused):
	// its compute is its kernel's time beyond the launch, for its FLOPs
	// padded to the host micro-kernel's tiles.
	d.ContractionTile, d.ContractionNarrowCols = hostContractionTile()
	var flops, seconds []float64
	padding := make([]int64, len(refs))
	for i, m := range refs {
		if len(m.est.Kernels) != 1 || m.est.Kernels[0].Contraction == nil {
			return d, fmt.Errorf("the reference contraction %s is not one contraction kernel", m.Model)
		}
		padding[i] = m.est.Kernels[0].Contraction.Padding(d.ContractionTile[0], d.ContractionTile[1], d.ContractionNarrowCols)
		flops = append(flops, float64(m.est.FLOPs+padding[i]))
		seconds = append(seconds, computeSeconds(m, d.LaunchSeconds))
	}
	if d.PeakFLOPS, d.ContractionHalfFLOPs, err = cost.FitHalfPerformance(flops, seconds); err != nil {
		return d, err
	}
	dev := cost.Device{PeakFLOPS: d.PeakFLOPS, HalfFLOPs: d.ContractionHalfFLOPs}
	for i, m := range refs {
		fmt.Fprintf(stderr, "calibrate: %-10s %8.2f MFLOP (%7.2f padded) in %8.3f ms (%6.1f GFLOP/s), model %8.3f ms\n",
			m.Model, float64(m.est.FLOPs)/1e6, flops[i]/1e6, seconds[i]*1e3, float64(m.est.FLOPs)/seconds[i]/1e9, dev.ComputeSeconds(m.est.FLOPs, padding[i], 1)*1e3)
	}
	if rest := cp.Median - kernelSeconds(cp.benchResult) - d.StepSeconds; rest > 0 {
		d.IOBandwidth = float64(cp.inputBytes) / rest
	} // else 0: not modelled (the copy lost in the noise)
	var info syscall.Sysinfo_t
	if err := syscall.Sysinfo(&info); err != nil {
		return d, err
	}
	d.MemoryBytes = int64(info.Totalram) * int64(info.Unit)
	return d, nil
}

// measured is a reference model's bench (its median round), its
// file, its roofline sizes and the bytes of its inputs.
type measured struct {
	*benchResult
	path       string
	est        *cost.Estimate
	inputBytes int64
}

// hostContractionTile is the rows and columns of the host GEMM's
// micro-kernel, and the most columns of its narrow kernel (blocking.HostTile).
func hostContractionTile() (tile []int64, narrowCols int64) {
	mr, nr, narrowCols := blocking.HostTile()
	return []int64{mr, nr}, narrowCols
}

// computeSeconds is a reference contraction's kernel time beyond its
// launch, at least a hundredth of the kernel's time (a kernel lost in
// the noise of the launch counts as that).
func computeSeconds(m *measured, launch float64) float64 {
	k := kernelSeconds(m.benchResult)
	return max(k/100, k-launch*float64(max(1, m.est.Launches)))
}

// kernelSeconds is the time of a bench's median run spent in kernels.
func kernelSeconds(r *benchResult) float64 {
	s := 0.0
	for _, k := range r.Kernels {
		s += k.Seconds
	}
	return math.Max(s, 1e-12)
}

// threadsOf is the number of threads --threads n means.
func threadsOf(n int) int {
	if n > 0 {
		return n
	}
	return runtime.GOMAXPROCS(0)
}
