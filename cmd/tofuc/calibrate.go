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
//   - launch_seconds: the larger of what the tiny models' kernels take
//     beyond their roofline time, per launch;
//   - step_seconds: the smaller of the tiny models' runs beyond their
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
	measure := func(src string) (*measured, error) {
		n++
		path := filepath.Join(dir, fmt.Sprintf("m%d.tdl", n))
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			return nil, err
		}
		g, _, err := benchGraph(path, benchFlags{})
		if err != nil {
			return nil, err
		}
		m := &measured{}
		if m.est, err = cost.Roofline(g, cost.Device{PeakFLOPS: 1, Bandwidth: 1}); err != nil {
			return nil, err
		}
		for _, in := range g.Inputs {
			m.inputBytes += cost.ValueBytes(in)
		}
		// Three rounds, the one of the median kernel time: on a shared
		// machine one round can be off by half.
		var rounds []*benchResult
		for range calibrateRounds {
			res, err := bench(path, benchFlags{runs: f.runs, threads: f.threads, seed: f.seed}, b, nil, stderr)
			if err != nil {
				return nil, err
			}
			rounds = append(rounds, res)
		}
		slices.SortFunc(rounds, func(x, y *benchResult) int { return cmp.Compare(kernelSeconds(x), kernelSeconds(y)) })
		m.benchResult = rounds[len(rounds)/2]
		return m, nil
	}
	logRate := 0.0
	for _, src := range calibrateContractions {
		m, err := measure(src)
		if err != nil {
			return d, err
		}
		logRate += math.Log(float64(m.est.FLOPs) / kernelSeconds(m.benchResult))
	}
	d.PeakFLOPS = math.Exp(logRate / float64(len(calibrateContractions)))
	add, err := measure(calibrateAdd)
	if err != nil {
		return d, err
	}
	d.MemoryBandwidth = float64(add.est.Bytes) / kernelSeconds(add.benchResult)
	var launch, step []float64
	for _, src := range calibrateTiny {
		m, err := measure(src)
		if err != nil {
			return d, err
		}
		roofline := max(float64(m.est.FLOPs)/d.PeakFLOPS, float64(m.est.Bytes)/d.MemoryBandwidth)
		launch = append(launch, max(0, kernelSeconds(m.benchResult)-roofline)/float64(max(1, m.est.Launches)))
		step = append(step, max(0, m.Median-kernelSeconds(m.benchResult)))
	}
	// A launch costs what the dearer tiny kernel took beyond its
	// roofline (contractions, the dearer to start, are most of a
	// model's launches); a step what the cheaper tiny run took beyond
	// its kernels (the one with the least to copy).
	d.LaunchSeconds, d.StepSeconds = slices.Max(launch), slices.Min(step)
	cp, err := measure(calibrateCopy)
	if err != nil {
		return d, err
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
// roofline sizes and the bytes of its inputs.
type measured struct {
	*benchResult
	est        *cost.Estimate
	inputBytes int64
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
