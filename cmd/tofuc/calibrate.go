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
)

// The reference models of `tofuc bench --calibrate`: typical layers of
// CNNs and MLPs, none a layer of the models the simulation is checked
// against (docs/partition.md).
var (
	// Contractions of 17 to 500 MFLOP with their epilogues: a 3×3 and a
	// 1×1 convolution and a large and a small linear layer, their
	// weights packed once.
	calibrateContractions = []string{`model conv3(x: f32[1, 96, 40, 40]) {
    w = param f32[96, 96, 3, 3] init he()
    y = relu(conv2d<pads = [1, 1, 1, 1]>(x, w))
    return y
}`, `model conv1(x: f32[1, 192, 20, 20]) {
    w = param f32[384, 192, 1, 1] init he()
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
}`}
	// An add of 64 MiB tensors: its kernel gives the memory bandwidth.
	calibrateAdd = `model add(a: f32[4096, 4096], b: f32[4096, 4096]) {
    c = a + b
    return c
}`
	// Kernels too small for their work to count: their runs give a
	// step's fixed cost beyond its kernels, their kernels the fixed
	// cost of a kernel.
	calibrateTiny = []string{`model tinymatmul(a: f32[64, 64], b: f32[64, 64]) {
    c = relu(matmul(a, b))
    return c
}`, `model tinyadd(a: f32[256], b: f32[256]) {
    c = a + b
    return c
}`}
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
//   - peak_flops: the geometric mean of the reference contractions'
//     rates (their FLOPs over their kernels' time);
//   - memory_bandwidth: the large add's bytes over its kernel's time;
//   - launch_seconds: the median of what the tiny models' kernels take
//     beyond their roofline time;
//   - step_seconds: the median of the tiny models' runs beyond their
//     kernels (the runtime's fixed cost per step);
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
	d := cost.TopologyDevice{Name: fmt.Sprintf("host cores (cpu backend, %d threads)", threadsOf(f.threads))}
	dir, err := os.MkdirTemp("", "tofuc-calibrate-")
	if err != nil {
		return d, err
	}
	defer os.RemoveAll(dir)
	b, err := backend.ByName("cpu", f.threads)
	if err != nil {
		return d, err
	}
	n := 0
	measure := func(src string) (*benchResult, *cost.Estimate, error) {
		n++
		path := filepath.Join(dir, fmt.Sprintf("m%d.tdl", n))
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			return nil, nil, err
		}
		g, _, err := benchGraph(path, benchFlags{})
		if err != nil {
			return nil, nil, err
		}
		est, err := cost.Roofline(g, cost.Device{PeakFLOPS: 1, Bandwidth: 1})
		if err != nil {
			return nil, nil, err
		}
		// Three rounds, the one of the median kernel time: on a shared
		// machine one round can be off by half.
		var rounds []*benchResult
		for range calibrateRounds {
			res, err := bench(path, benchFlags{runs: f.runs, threads: f.threads, seed: f.seed}, b, nil, stderr)
			if err != nil {
				return nil, nil, err
			}
			rounds = append(rounds, res)
		}
		slices.SortFunc(rounds, func(x, y *benchResult) int { return cmp.Compare(kernelSeconds(x), kernelSeconds(y)) })
		return rounds[len(rounds)/2], est, nil
	}
	logRate := 0.0
	for _, src := range calibrateContractions {
		res, est, err := measure(src)
		if err != nil {
			return d, err
		}
		logRate += math.Log(float64(est.FLOPs) / kernelSeconds(res))
	}
	d.PeakFLOPS = math.Exp(logRate / float64(len(calibrateContractions)))
	add, est, err := measure(calibrateAdd)
	if err != nil {
		return d, err
	}
	d.MemoryBandwidth = float64(est.Bytes) / kernelSeconds(add)
	var launch, step []float64
	for _, src := range calibrateTiny {
		res, est, err := measure(src)
		if err != nil {
			return d, err
		}
		roofline := max(float64(est.FLOPs)/d.PeakFLOPS, float64(est.Bytes)/d.MemoryBandwidth)
		launch = append(launch, max(0, kernelSeconds(res)-roofline)/float64(max(1, est.Launches)))
		step = append(step, max(0, res.Median-kernelSeconds(res)))
	}
	d.LaunchSeconds, d.StepSeconds = median(launch), median(step)
	cp, _, err := measure(calibrateCopy)
	if err != nil {
		return d, err
	}
	d.IOBandwidth = 1024 * 1024 * 4 / max(cp.Median-kernelSeconds(cp)-d.StepSeconds, 1e-9)
	var info syscall.Sysinfo_t
	if err := syscall.Sysinfo(&info); err != nil {
		return d, err
	}
	d.MemoryBytes = int64(info.Totalram) * int64(info.Unit)
	return d, nil
}

func median(xs []float64) float64 {
	slices.Sort(xs)
	return xs[len(xs)/2]
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
