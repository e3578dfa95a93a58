package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	"tofuc/analysis/cost"
	"tofuc/codegen/blocking"
	"tofuc/lang/ir"
	"tofuc/lang/precision"
	"tofuc/pipeline"
)

// calibrateRounds is how many times each reference model is timed.
const calibrateRounds = 3

// runCalibrate measures this host with the cpu backend on --threads
// threads and prints a topology of one device describing it, for
// --topology (docs/partition.md, "Simulated step time"), each model
// timed in calibrateRounds rounds of --runs runs:
//   - memory_bandwidth: the large add's bytes over its kernel's time;
//   - launch_seconds: what the tiny add's kernel takes beyond its
//     roofline time (an element-wise kernel's fixed cost), or all of it
//     where that roofline exceeds it;
//   - step_seconds: the smaller of the tiny models' runs beyond their
//     kernels (the runtime's fixed cost per step);
//   - peak_flops and contraction_half_flops: Hockney's r∞ and f½
//     fitted to the reference contractions' kernels beyond their
//     launch (cost.FitHalfPerformance), each reference's time and the
//     model's written to stderr;
//   - io_bandwidth: the copy model's input over the rest of its run
//     beyond its kernel and the fixed cost;
//   - math_seconds: what a call of each costly math function but pow
//     costs beyond one operation, in the exact and f32 modes, from a
//     model with an output per function that calls it four times an
//     element (cost.CalibrationMathSource).
//
// With --devices N the topology has N such devices, of one process
// (hostTopology), for the plans tofuc run times (--runs, --topology).
func runCalibrate(f benchFlags, stdout, stderr io.Writer) int {
	d, err := calibrate(f, stderr)
	if err != nil {
		return fail(stderr, err)
	}
	t := hostTopology(d, f.devices)
	if err := t.Validate(); err != nil {
		return fail(stderr, fmt.Errorf("the measurements give no valid topology: %w", err))
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	enc.Encode(t)
	return exitOK
}

// hostTopology is n host devices of one process, each measured as d,
// sharing its threads (cost.Topology.HostProcess): a copy between two
// reads and writes host memory, at half its bandwidth, and pays a
// launch's fixed cost.
func hostTopology(d cost.TopologyDevice, n int) cost.Topology {
	t := cost.Topology{Name: fmt.Sprintf("this host, measured by tofuc bench --calibrate (%s/%s)", runtime.GOOS, runtime.GOARCH), Links: []cost.Link{}, HostProcess: true}
	link := cost.Link{Bandwidth: d.MemoryBandwidth / 2, Latency: d.LaunchSeconds}
	for i := range n {
		t.Devices = append(t.Devices, d)
		link.Devices = append(link.Devices, i)
	}
	if n > 1 {
		t.Name += fmt.Sprintf(", %d devices sharing its threads", n)
		t.Links = append(t.Links, link)
	}
	return t
}

func calibrate(f benchFlags, stderr io.Writer) (cost.TopologyDevice, error) {
	// The host runtime runs a chained pair of kernels as one launch.
	d := cost.TopologyDevice{Name: fmt.Sprintf("host cores (cpu backend, %d threads)", threadsOf(f.threads)), ChainedLaunches: true}
	dir, err := os.MkdirTemp("", "tofuc-calibrate-")
	if err != nil {
		return d, err
	}
	defer os.RemoveAll(dir)
	mr, nr, narrow := blocking.HostTile()
	c := cost.Calibration{Rounds: calibrateRounds, Tile: []int64{mr, nr}, NarrowCols: narrow, Log: stderr}
	paths, graphs, err := writeModels(dir, "m", cost.CalibrationSources())
	if err != nil {
		return d, err
	}
	mathPaths, mathGraphs, err := writeModels(dir, "math", []string{cost.CalibrationMathSource()})
	if err != nil {
		return d, err
	}
	c.Graphs, c.MathGraph = graphs, mathGraphs[0]
	// Unoptimised: the kernels timed are those of the reference
	// contractions as written, which a rewrite could turn into others.
	timeModel := func(path string, mode precision.Mode) (*benchResult, error) {
		return bench(path, benchFlags{backend: "cpu", runs: f.runs, threads: f.threads, seed: f.seed}, pipeline.Options{NoOptimize: true, Precision: mode}, nil, stderr)
	}
	c.Time = func(i int) (cost.Timing, error) {
		res, err := timeModel(paths[i], precision.Default)
		if err != nil {
			return cost.Timing{}, err
		}
		return cost.Timing{Median: res.Median, Kernels: kernelSeconds(res)}, nil
	}
	c.TimeMath = func(mode precision.Mode) (map[string]float64, error) {
		res, err := timeModel(mathPaths[0], mode)
		if err != nil {
			return nil, err
		}
		return kernelSecondsByOutput(res), nil
	}
	if err := cost.Calibrate(&d, c); err != nil {
		return d, err
	}
	var info syscall.Sysinfo_t
	if err := syscall.Sysinfo(&info); err != nil {
		return d, err
	}
	d.MemoryBytes = int64(info.Totalram) * int64(info.Unit)
	return d, nil
}

// writeModels writes each source to a file of dir, prefix and its index,
// and checks it.
func writeModels(dir, prefix string, sources []string) (paths []string, graphs []*ir.Graph, err error) {
	for i, src := range sources {
		path := filepath.Join(dir, fmt.Sprintf("%s%d.tdl", prefix, i))
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			return nil, nil, err
		}
		m, _, err := benchModel(path, benchFlags{})
		if err != nil {
			return nil, nil, err
		}
		paths, graphs = append(paths, path), append(graphs, m.Graph)
	}
	return paths, graphs, nil
}

// kernelSeconds is the time of a bench's median run spent in kernels.
func kernelSeconds(r *benchResult) float64 {
	s := 0.0
	for _, k := range r.Kernels {
		s += k.Seconds
	}
	return s
}

// kernelSecondsByOutput is the time of a bench's median run spent in
// the kernels of each output of its model, which a kernel's label names
// first ("y (exp+add)", "y.t (…)" for one of its intermediates).
func kernelSecondsByOutput(r *benchResult) map[string]float64 {
	out := map[string]float64{}
	for _, k := range r.Kernels {
		name, _, _ := strings.Cut(k.Label, " ")
		name, _, _ = strings.Cut(name, ".")
		out[name] += k.Seconds
	}
	return out
}

// threadsOf is the number of threads --threads n means.
func threadsOf(n int) int {
	if n > 0 {
		return n
	}
	return runtime.GOMAXPROCS(0)
}
