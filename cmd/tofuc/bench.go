package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"
	"tofuc/pipeline"

	"tofuc/analysis/cost"
	"tofuc/codegen/peak"
	"tofuc/lang/precision"
	"tofuc/runtime/exec"
	"tofuc/runtime/npy"
	"tofuc/runtime/plan"
	"tofuc/runtime/planio"
	"tofuc/runtime/tensor"
)

type benchFlags struct {
	model, backend, params  string
	topology                string
	sets, ins               []string
	runs, threads           int
	seed                    uint64
	asJSON, peak, calibrate bool
	// The compiled backends compile as tofuc compile does with these,
	// into keep when it is given.
	devices    int
	memory     int64
	objective  string
	noOptimize bool
	precision  precision.Mode
	backends   []string
	keep       string
}

// benchResult is what `tofuc bench --json` prints (docs/cli.md).
type benchResult struct {
	Model   string        `json:"model"`
	Backend string        `json:"backend"`
	Threads int           `json:"threads"`
	Runs    int           `json:"runs"`
	Median  float64       `json:"median_seconds"`
	Min     float64       `json:"min_seconds"`
	Kernels []benchKernel `json:"kernels"`
	// Simulated is the step simulated on --topology's device 0 (the
	// partition search's model of one device), with the topology's name.
	Simulated *float64 `json:"simulated_seconds,omitempty"`
	Topology  string   `json:"topology,omitempty"`
}

// benchKernel is one kernel's (or, on the interpreter, one node's) time
// in the median run.
type benchKernel struct {
	Name     string  `json:"name"`
	Label    string  `json:"label"`
	Launches int     `json:"launches"`
	Seconds  float64 `json:"seconds"`
}

func runBench(args []string, stdout, stderr io.Writer) int {
	fs := flagSet("bench", stderr)
	var f benchFlags
	fs.StringVar(&f.backend, "backend", "cpu", strings.Join(pipeline.BackendNames, ", "))
	fs.IntVar(&f.runs, "runs", 10, "timed runs, after one warm-up run")
	fs.IntVar(&f.threads, "threads", 0, "host threads (0: all cores)")
	fs.BoolVar(&f.asJSON, "json", false, "print the result as JSON")
	fs.StringVar(&f.model, "model", "", "the model (default: the only one)")
	fs.StringArrayVar(&f.sets, "set", nil, "override a model attribute, NAME=VALUE (repeatable)")
	fs.StringArrayVar(&f.ins, "in", nil, "an input, NAME=PATH.npy (repeatable; others are drawn from the seed)")
	fs.StringVar(&f.params, "params", "", "parameters, one .npz (missing ones are initialised from the seed)")
	fs.Uint64Var(&f.seed, "seed", 0, "seed of random inputs and parameters")
	fs.BoolVar(&f.peak, "peak", false, "measure the host's peak f32 FLOP rate on --threads threads instead (no MODEL)")
	fs.BoolVar(&f.calibrate, "calibrate", false, "measure this host with the cpu backend on --threads threads and print a topology describing it, for --topology (no MODEL)")
	fs.StringVar(&f.topology, "topology", "", "also simulate the step on device 0 of a topology ("+strings.Join(cost.TopologyNames(), ", ")+", or a FILE)")
	fs.IntVar(&f.devices, "devices", 1, "compiled backends: compile for N devices, as tofuc compile --devices; with --calibrate: describe N devices of this process")
	fs.Var((*byteSize)(&f.memory), "memory", "compiled backends, with --devices: the memory per device, as tofuc compile --memory")
	registerObjective(fs, &f.objective)
	fs.BoolVar(&f.noOptimize, "no-optimize", false, "compiled backends: skip the verified rewrites, as tofuc compile --no-optimize")
	registerPrecision(fs, &f.precision, "compiled backends: ")
	registerBackends(fs, &f.backends, "compiled backends: ")
	fs.StringVar(&f.keep, "keep", "", "compiled backends: keep the plan timed in DIR (what tofuc compile -o DIR writes, for tofuc run)")
	if status, done := parseFlags(fs, args, stdout); done {
		return status
	}
	modelFlags := false
	for _, name := range []string{"backend", "json", "model", "set", "in", "params", "topology", "memory", "objective", "no-optimize", "precision", "keep"} {
		modelFlags = modelFlags || fs.Changed(name)
	}
	switch {
	case f.runs < 1:
		return usageError(stderr, "bench", "--runs must be at least 1")
	case checkThreads(f.threads) != nil:
		return usageError(stderr, "bench", "%v", checkThreads(f.threads))
	case f.peak && f.calibrate:
		return usageError(stderr, "bench", "--peak and --calibrate are two different measurements: give one")
	case f.devices < 1 || f.devices > plan.MaxDevices:
		return usageError(stderr, "bench", "--devices must be 1 to %d", plan.MaxDevices)
	case f.peak && fs.NArg() > 0:
		return usageError(stderr, "bench", "--peak takes no MODEL")
	case f.peak && fs.Changed("devices"):
		return usageError(stderr, "bench", "--peak takes no --devices")
	case f.peak:
		return runPeak(f, stdout, stderr)
	case f.calibrate && (fs.NArg() > 0 || modelFlags):
		return usageError(stderr, "bench", "--calibrate takes no MODEL and only --threads, --runs, --seed and --devices (it prints a topology in JSON)")
	case f.calibrate:
		return runCalibrate(f, stdout, stderr)
	case fs.NArg() != 1:
		return usageError(stderr, "bench", "expected one MODEL file")
	}
	opts, err := compileOptions(f.devices, f.memory, f.objective, f.noOptimize, f.precision, f.backends, &trainFlags{}, false)
	if err != nil {
		return usageError(stderr, "bench", "%v", err)
	}
	if !slices.Contains(pipeline.BackendNames, f.backend) {
		return usageError(stderr, "bench", "unknown backend %q (expected %s)", f.backend, strings.Join(pipeline.BackendNames, ", "))
	}
	specs, err := planio.Specs(f.ins)
	if err != nil {
		return usageError(stderr, "bench", "%v", err)
	}
	var topo *cost.Topology
	if f.topology != "" {
		if topo, err = cost.LoadTopology(f.topology); err != nil {
			return usageError(stderr, "bench", "--topology: %v", err)
		}
	}
	res, err := bench(fs.Arg(0), f, opts, specs, stderr)
	if err != nil {
		return fail(stderr, err)
	}
	if topo != nil {
		if err := simulateBench(fs.Arg(0), f, topo, res); err != nil {
			return fail(stderr, err)
		}
	}
	if f.asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(res)
		return exitOK
	}
	printBench(stdout, res)
	return exitOK
}

// runPeak prints the host's measured peak (codegen/peak).
func runPeak(f benchFlags, stdout, stderr io.Writer) int {
	r, err := peak.Measure(f.threads, 200*time.Millisecond)
	if err != nil {
		return fail(stderr, err)
	}
	if f.asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(map[string]any{"peak_flops": r.FLOPS, "threads": r.Threads, "lanes": r.Lanes})
		return exitOK
	}
	fmt.Fprintln(stdout, "peak", r)
	return exitOK
}

// bench runs the model once to warm up (and compile, as opts say), then
// f.runs times, and keeps the kernels' times of the median run.
func bench(path string, f benchFlags, opts pipeline.Options, specs map[string]string, stderr io.Writer) (*benchResult, error) {
	m, params, err := benchModel(path, f)
	if err != nil {
		return nil, err
	}
	g := m.Graph
	b, err := pipeline.NewBackend(f.backend, m, opts, f.threads)
	if err != nil {
		return nil, err
	}
	if cb, ok := b.(*pipeline.Backend); ok {
		cb.Keep = f.keep
	} else if f.keep != "" {
		return nil, fmt.Errorf("--keep goes with a compiled backend; the interpreter compiles no plan")
	}
	inputs, err := readInputs(specs)
	if err != nil {
		return nil, err
	}
	for _, in := range g.Inputs {
		if inputs[in.Name] == nil {
			if inputs[in.Name], err = randomInput(in, f.seed, g.LabelClasses(in)); err != nil {
				return nil, err
			}
		}
		inputs[in.Name] = npy.AsDType(inputs[in.Name], in.DType)
	}
	timer := &nodeTimer{}
	if ib, ok := b.(exec.Interp); ok {
		ib.Progress = timer.tick
		b = ib
	}
	s := exec.NewSession(g, b, f.seed)
	defer s.Close()
	p := newProgress(stderr)
	p.Show("warming up (the compiled backends compile here)")
	warm, err := s.Run(inputs, params)
	p.done()
	if err != nil {
		return nil, err
	}
	if prog, ok := s.Program().(*pipeline.Program); ok {
		prog.Timing = true
	}
	res := &benchResult{Model: g.Name, Backend: f.backend, Threads: f.threads, Runs: f.runs}
	type run struct {
		seconds float64
		kernels []benchKernel
	}
	var runs []run
	for i := range f.runs {
		p.Count("timed runs", i, f.runs)
		timer.reset()
		start := time.Now()
		if _, err := s.Run(inputs, warm.Params); err != nil {
			return nil, err
		}
		r := run{seconds: time.Since(start).Seconds()}
		timer.stop()
		if prog, ok := s.Program().(*pipeline.Program); ok {
			r.kernels = kernelTimes(prog)
		} else {
			r.kernels = timer.nodes
		}
		runs = append(runs, r)
	}
	p.done()
	sort.Slice(runs, func(i, j int) bool { return runs[i].seconds < runs[j].seconds })
	res.Min, res.Median, res.Kernels = runs[0].seconds, runs[len(runs)/2].seconds, runs[len(runs)/2].kernels
	return res, nil
}

// simulateBench adds the step simulated on the topology's device 0.
func simulateBench(path string, f benchFlags, t *cost.Topology, res *benchResult) error {
	m, _, err := benchModel(path, f)
	if err != nil {
		return err
	}
	sim, err := cost.SimulateOne(m.Graph, t)
	if err != nil {
		return err
	}
	res.Simulated, res.Topology = &sim.Seconds, t.Name
	return nil
}

// benchModel loads the model with its weights and --params.
func benchModel(path string, f benchFlags) (*pipeline.Model, map[string]*tensor.Tensor, error) {
	set, err := pipeline.ParseSets(f.sets)
	if err != nil {
		return nil, nil, err
	}
	m, err := pipeline.Load(path, f.model, set)
	if err != nil {
		return nil, nil, err
	}
	g := m.Graph
	if err := checkMemory(g, f.backend); err != nil {
		return nil, nil, err
	}
	params := maps.Clone(m.Weights)
	if params == nil {
		params = map[string]*tensor.Tensor{}
	}
	if f.params != "" {
		given, err := npy.ReadNPZ(f.params)
		if err != nil {
			return nil, nil, fmt.Errorf("--params: %w", err)
		}
		for k, v := range given {
			params[k] = v
		}
	}
	return m, params, matchParams(g, params)
}

// kernelTimes sums the launch times of each kernel of a compiled run
// (and of each library call, under its step's label).
func kernelTimes(prog *pipeline.Program) []benchKernel {
	byName := map[string]*benchKernel{}
	var order []string
	for _, st := range prog.StepTimes() {
		name, label := "library", st.Label
		if st.Kernel >= 0 {
			name, label = prog.Plan.Kernels[st.Kernel].Name, prog.Plan.Kernels[st.Kernel].Label
		}
		k, ok := byName[name+label]
		if !ok {
			k = &benchKernel{Name: name, Label: label}
			byName[name+label] = k
			order = append(order, name+label)
		}
		k.Launches++
		k.Seconds += st.Seconds
	}
	out := make([]benchKernel, len(order))
	for i, key := range order {
		out[i] = *byName[key]
	}
	return out
}

// nodeTimer times the interpreter's nodes through its progress calls.
type nodeTimer struct {
	nodes []benchKernel
	last  time.Time
}

func (t *nodeTimer) reset() { t.nodes = nil }

func (t *nodeTimer) tick(i, n int, name string) {
	t.stop()
	t.nodes = append(t.nodes, benchKernel{Name: name, Label: name, Launches: 1})
	t.last = time.Now()
}

func (t *nodeTimer) stop() {
	if len(t.nodes) > 0 && t.nodes[len(t.nodes)-1].Seconds == 0 {
		t.nodes[len(t.nodes)-1].Seconds = time.Since(t.last).Seconds()
	}
}

func printBench(w io.Writer, r *benchResult) {
	// In milliseconds, as tofuc-run prints them: a small model's run
	// took "0.0000 s" in seconds.
	fmt.Fprintf(w, "%s on %s: median %.3f ms, min %.3f ms over %d runs\n", r.Model, r.Backend, r.Median*1e3, r.Min*1e3, r.Runs)
	if r.Simulated != nil {
		fmt.Fprintf(w, "simulated on %s: %.4g s (%+.1f%% of the median)\n", r.Topology, *r.Simulated, 100*(*r.Simulated/r.Median-1))
	}
	ks := append([]benchKernel(nil), r.Kernels...)
	sort.SliceStable(ks, func(i, j int) bool { return ks[i].Seconds > ks[j].Seconds })
	total := 0.0
	for _, k := range ks {
		total += k.Seconds
	}
	fmt.Fprintf(w, "%10s %6s %8s  %s\n", "ms", "share", "launches", "kernel")
	for i, k := range ks {
		if i == 20 {
			fmt.Fprintf(w, "  ... %d more\n", len(ks)-i)
			break
		}
		fmt.Fprintf(w, "%10.3f %5.1f%% %8d  %s %s\n", k.Seconds*1e3, 100*k.Seconds/max(total, 1e-12), k.Launches, k.Name, k.Label)
	}
}
