package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"time"

	"tofuc/analysis/autodiff"
	"tofuc/analysis/cost"
	"tofuc/codegen/toolchain"
	"tofuc/internal/cliargs"
	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/runtime/cpu"
	"tofuc/runtime/dynamic"
	"tofuc/runtime/executor"
	"tofuc/runtime/mpi"
	"tofuc/runtime/plan"
	"tofuc/runtime/planio"
	"tofuc/runtime/simt"
	"tofuc/runtime/tensor"
)

type runFlags struct {
	backend, params, out string
	ins                  []string
	random               bool
	seed                 uint64
	threads              int
	batch                int64
	// timeout bounds a rank's wait for another (run under mpirun).
	timeout time.Duration
	// ranks is --nproc-per-node: ranks to start on this machine.
	ranks int
	// runs is --runs: timed runs after a warm-up (0: one run, untimed);
	// topology --topology: a topology to simulate the plan's step on.
	runs     int
	topology string
}

func runRun(args []string, stdout, stderr io.Writer) int {
	fs := flagSet("run", stderr)
	var f runFlags
	fs.StringVar(&f.backend, "backend", "cpu", "the runtime: cpu (host kernels) or simt (GPU kernels, emulated)")
	fs.StringArrayVar(&f.ins, "in", nil, "an input, NAME=PATH.npy (repeatable)")
	fs.BoolVar(&f.random, "random-inputs", false, "draw inputs not given with --in from the seed")
	fs.Uint64Var(&f.seed, "seed", 0, "seed of random inputs")
	fs.StringVar(&f.params, "params", "", "parameters, one .npz (default: DIR/params.npz, written by compile)")
	fs.StringVar(&f.out, "out", "", "directory for the outputs (created if missing)")
	fs.IntVar(&f.threads, "threads", 0, "host threads (0: all cores; as ranks, their share of the cores)")
	fs.IntVar(&f.ranks, "nproc-per-node", 0, "start this many ranks on this machine through mpirun, one a device of the plan (docs/distributed.md)")
	fs.DurationVar(&f.timeout, "timeout", 5*time.Minute, "as ranks: how long a rank waits for another before it fails, naming the rank that holds it")
	fs.IntVar(&f.runs, "runs", 0, "after the run, time this many runs of the plan's steps and print their median (the outputs written are the first, untimed run's)")
	fs.StringVar(&f.topology, "topology", "", "with --runs on the cpu backend: also simulate the plan's step on a topology FILE of this process's devices (tofuc bench --calibrate --devices N writes one)")
	fs.Int64Var(&f.batch, "batch", 0, "of a plan compiled with --dynamic: the batch size of the random inputs (default: that of the inputs given, else the largest size compiled)")
	if status, done := parseFlags(fs, args, stdout); done {
		return status
	}
	switch {
	case fs.NArg() != 1:
		return usageError(stderr, "run", "expected one DIR (what tofuc compile -o wrote)")
	case f.out == "":
		return usageError(stderr, "run", "--out DIR is required")
	case f.backend != cpu.Kind.Name && f.backend != simt.Kind.Name:
		return usageError(stderr, "run", "unknown backend %q (expected %s or %s)", f.backend, cpu.Kind.Name, simt.Kind.Name)
	case checkThreads(f.threads) != nil:
		return usageError(stderr, "run", "%v", checkThreads(f.threads))
	case f.batch < 0 || f.batch > maxBatch || fs.Changed("batch") && f.batch == 0:
		return usageError(stderr, "run", "--batch must be 1 to %d", maxBatch)
	case f.timeout <= 0:
		return usageError(stderr, "run", "--timeout must be positive")
	case f.ranks < 0 || fs.Changed("nproc-per-node") && f.ranks == 0:
		return usageError(stderr, "run", "--nproc-per-node must be at least 1")
	case f.runs < 0:
		return usageError(stderr, "run", "--runs must not be negative")
	case f.topology != "" && f.runs == 0:
		return usageError(stderr, "run", "--topology goes with --runs (it compares the simulated step with the measured one)")
	case f.topology != "" && f.backend != cpu.Kind.Name:
		return usageError(stderr, "run", "--topology goes with the cpu backend: %s runs GPU kernels under an emulator, whose times say nothing of a GPU's", f.backend)
	case f.runs > 0 && (f.ranks > 0 || mpi.Launched()):
		return usageError(stderr, "run", "--runs times a plan run in one process; ranks are not timed")
	case f.ranks > 0 && mpi.Launched():
		return usageError(stderr, "run", "--nproc-per-node starts the ranks itself: run it without mpirun")
	}
	specs, err := planio.Specs(f.ins)
	if err != nil {
		return usageError(stderr, "run", "%v", err)
	}
	if f.ranks > 0 {
		if err := startableRanks(fs.Arg(0), f.ranks); err != nil {
			return fail(stderr, err)
		}
		return fail(stderr, mpi.Start(f.ranks, append([]string{"run"}, cliargs.Without(args, "nproc-per-node")...)))
	}
	if mpi.Launched() {
		return runRank(fs.Arg(0), f, specs, stdout, stderr)
	}
	if n := os.Getenv("WORLD_SIZE"); n != "" && n != "1" {
		toolchain.Warn("$WORLD_SIZE is %s (torchrun's environment), but host ranks start under mpirun or with --nproc-per-node (docs/distributed.md): this process runs the whole plan", n)
	}
	if err := runPlan(fs.Arg(0), f, specs, stdout, stderr); err != nil {
		return fail(stderr, err)
	}
	return exitOK
}

// runPlan loads a compiled plan and its parameters (everything checked
// first), reads or draws its inputs, runs it once and writes the inputs
// it drew and its outputs: nothing is written unless the run succeeds.
func runPlan(dir string, f runFlags, specs map[string]string, stdout, stderr io.Writer) error {
	if dynamic.Is(dir) {
		if f.runs > 0 {
			return fmt.Errorf("--runs times a plan of fixed shapes; %s was compiled with --dynamic (time one batch size with tofuc bench)", dir)
		}
		return runDynamic(dir, f, specs, stdout)
	}
	if f.batch != 0 {
		return errBatch(dir)
	}
	p, prog, params, err := loadPlan(dir, f.params, "", openPlan(dir, f, false))
	if err != nil {
		return err
	}
	defer prog.Close()
	if f.runs == 0 {
		return newInputs(p, f, specs).runAndWrite(prog.Run, params, stdout)
	}
	return runTimed(dir, p, prog, f, specs, params, stdout, stderr)
}

// openPlan opens a plan compiled into dir as f asks, its devices one
// step at a time where oneAtATime (executor.Options.OneAtATime).
func openPlan(dir string, f runFlags, oneAtATime bool) func(*plan.Plan) (*executor.Program, error) {
	return func(p *plan.Plan) (*executor.Program, error) {
		return executor.Open(p, dir, f.backend, executor.Options{Threads: f.threads, OneAtATime: oneAtATime})
	}
}

// runTimed runs plan p (prog) once and writes its inputs and outputs,
// then times f.runs runs of its steps (executor.Program.Bench); with
// --topology, it times them again with the devices one step at a time,
// each launch alone, and prints the step simulated both on the
// topology's roofline and with those times (printRunTimes).
func runTimed(dir string, p *plan.Plan, prog *executor.Program, f runFlags, specs map[string]string, params map[string]*tensor.Tensor, stdout, stderr io.Writer) error {
	topo, err := loadRunTopology(f.topology, p)
	if err != nil {
		return err
	}
	var together, alone *executor.Timing
	progress := newProgress(stderr)
	runThenTime := func(inputs, params map[string]*tensor.Tensor) (map[string]*tensor.Tensor, error) {
		progress.Show("running the plan once")
		out, err := prog.Run(inputs, params)
		if err == nil {
			progress.Show("timing %d runs of the steps, twice (the second with each launch timed)", f.runs)
			together, err = prog.Bench(inputs, params, f.runs)
		}
		if err == nil && topo != nil {
			progress.Show("timing them again with the devices one step at a time")
			alone, err = timeAlone(dir, p, f, inputs, params)
		}
		progress.done()
		return out, err
	}
	if err := newInputs(p, f, specs).runAndWrite(runThenTime, params, stdout); err != nil {
		return err
	}
	return printRunTimes(stdout, p, runTimes{together, alone}, topo)
}

// timeAlone times f.runs runs of the steps of plan p, compiled into
// dir, with its devices one step at a time.
func timeAlone(dir string, p *plan.Plan, f runFlags, inputs, params map[string]*tensor.Tensor) (*executor.Timing, error) {
	var prog *executor.Program
	q, err := planio.Read(dir, func(q *plan.Plan) (err error) {
		prog, err = openPlan(dir, f, true)(q)
		return err
	})
	if prog != nil {
		defer prog.Close()
	}
	switch {
	case err != nil:
		return nil, err
	case q.Seal != p.Seal:
		return nil, fmt.Errorf("%s: the plan changed while it was timed", dir)
	}
	return prog.Bench(inputs, params, f.runs)
}

// loadRunTopology is --topology's topology (nil: none given), checked,
// before anything runs, to describe plan p's devices on this host.
func loadRunTopology(nameOrPath string, p *plan.Plan) (*cost.Topology, error) {
	if nameOrPath == "" {
		return nil, nil
	}
	t, err := cost.LoadTopology(nameOrPath)
	switch {
	case err != nil:
		return nil, fmt.Errorf("--topology: %w", err)
	case !t.HostProcess:
		return nil, fmt.Errorf("--topology: %q does not describe the devices of one host process (no host_process): the cpu backend's devices share this process's threads; tofuc bench --calibrate --devices %d writes such a file", t.Name, p.Devices)
	case len(t.Devices) < p.Devices:
		return nil, fmt.Errorf("--topology: %q has %d devices, the plan %d (tofuc bench --calibrate --devices %d writes one of %d)", t.Name, len(t.Devices), p.Devices, p.Devices, p.Devices)
	}
	if err := t.CheckLinked(p.Devices); err != nil {
		return nil, fmt.Errorf("--topology: %w", err)
	}
	return t, nil
}

// runTimes are a plan's steps timed with its devices at once (together)
// and, given a topology, one step at a time (alone; else nil).
type runTimes struct{ together, alone *executor.Timing }

// slowestLaunches is how many launches printRunTimes lists.
const slowestLaunches = 10

// printRunTimes prints the plan's timed steps and, given a topology, the
// step simulated on its roofline and with each launch as timed alone;
// then the slowest launches, each as timed and as simulated.
func printRunTimes(w io.Writer, p *plan.Plan, t runTimes, topo *cost.Topology) error {
	median := t.together.Plan.Median
	fmt.Fprintf(w, "step: median %.3f ms, min %.3f ms over %d runs of the steps on %s (inputs and parameters on them already)\n",
		median*1e3, t.together.Plan.Min*1e3, t.together.Runs, devicesOf(p))
	alone := map[plan.StepRef]float64{}
	if topo != nil {
		sim, err := cost.SimulatePlan(p, topo)
		if err != nil {
			return fmt.Errorf("simulating the plan on %s: %w", topo.Name, err)
		}
		fmt.Fprintf(w, "simulated on %s: %.3f ms (%+.1f%% of the median; compute %.3f ms, transfers %.3f ms)\n",
			topo.Name, sim.Seconds*1e3, 100*(sim.Seconds/median-1), sim.Compute*1e3, sim.Transfer*1e3)
		for _, k := range t.alone.Kernels {
			alone[plan.StepRef{Device: k.Device, Step: k.Step}] = k.Time.Median
		}
		// The steps SimulatePlanTimed takes as measured: the rest it prices.
		maps.DeleteFunc(alone, func(r plan.StepRef, _ float64) bool { return !cost.TimedAlone(&p.Steps[r.Device][r.Step]) })
		if sim, err = cost.SimulatePlanTimed(p, topo, alone); err != nil {
			return err
		}
		fmt.Fprintf(w, "simulated with each launch as timed alone (the devices one step at a time: median %.3f ms): %.3f ms (%+.1f%% of the median)\n",
			t.alone.Plan.Median*1e3, sim.Seconds*1e3, 100*(sim.Seconds/median-1))
	}
	ks := slices.Clone(t.together.Kernels)
	slices.SortStableFunc(ks, func(a, b executor.KernelTiming) int { return cmp.Compare(b.Time.Median, a.Time.Median) })
	if topo == nil {
		fmt.Fprintf(w, "%10s %6s %5s  %s\n", "median ms", "device", "step", "launch")
	} else {
		fmt.Fprintf(w, "%10s %10s %10s %6s %5s  %s\n", "median ms", "alone", "roofline", "device", "step", "launch")
	}
	for i, k := range ks {
		if i == slowestLaunches {
			fmt.Fprintf(w, "  ... %d more\n", len(ks)-i)
			break
		}
		if topo == nil {
			fmt.Fprintf(w, "%10.3f %6d %5d  %s %s\n", k.Time.Median*1e3, k.Device, k.Step, k.Kernel, k.Label)
			continue
		}
		timedAlone, roofline := "-", "-"
		if s, ok := alone[plan.StepRef{Device: k.Device, Step: k.Step}]; ok {
			timedAlone = fmt.Sprintf("%.3f", s*1e3)
		}
		if s := &p.Steps[k.Device][k.Step]; s.Op == plan.Launch && s.Place == nil {
			roofline = fmt.Sprintf("%.3f", cost.KernelSeconds(&p.Kernels[s.Kernel], p.Precision, topo, k.Device)*1e3)
		}
		fmt.Fprintf(w, "%10.3f %10s %10s %6d %5d  %s %s\n", k.Time.Median*1e3, timedAlone, roofline, k.Device, k.Step, k.Kernel, k.Label)
	}
	return nil
}

// devicesOf is "1 device" or "N devices", plan p's.
func devicesOf(p *plan.Plan) string {
	if p.Devices == 1 {
		return "1 device"
	}
	return fmt.Sprintf("%d devices", p.Devices)
}

// loadPlan reads the plan compiled into dir, loads it (open) and reads
// its parameters (those at paramsPath, else the plan's), under the
// folder's lock; what loading it noted is said, each note after prefix.
func loadPlan(dir, paramsPath, prefix string, open func(*plan.Plan) (*executor.Program, error)) (*plan.Plan, *executor.Program, map[string]*tensor.Tensor, error) {
	var prog *executor.Program
	var params map[string]*tensor.Tensor
	p, err := planio.Read(dir, func(p *plan.Plan) (err error) {
		if prog, err = open(p); err != nil {
			return err
		}
		for _, n := range prog.Notes {
			toolchain.Warn("%s%s", prefix, n)
		}
		params, err = planio.Params(p, dir, paramsPath)
		return err
	})
	if err != nil && prog != nil {
		prog.Close()
	}
	return p, prog, params, err
}

// startableRanks refuses to start n ranks for the plan in dir unless
// they can run it.
func startableRanks(dir string, n int) error {
	if err := dynamic.RefuseRanks(dir); err != nil {
		return err
	}
	return executor.CheckRanksIn(dir, n)
}

// runRank runs the plan as one rank of the processes an MPI launcher
// started, one a logical device (docs/distributed.md): rank 0 writes the
// outputs, once every rank's part is done. A failing rank exits without
// ending MPI, so that the launcher stops the others, which name it.
func runRank(dir string, f runFlags, specs map[string]string, stdout, stderr io.Writer) int {
	world, err := mpi.Init(f.timeout)
	if err != nil {
		return fail(stderr, err)
	}
	world.ExitOnStop(stderr)
	if err := runAsRank(world, dir, f, specs, stdout, stderr); err != nil {
		status := fail(stderr, fmt.Errorf("rank %d of %d: %w", world.Rank(), world.Size(), err))
		if errors.Is(err, executor.ErrRanksDiffer) {
			world.Close() // every rank fails alike: each says why before the launcher stops them
		}
		return status
	}
	if err := world.Close(); err != nil {
		return fail(stderr, err)
	}
	return exitOK
}

// runAsRank is runPlan as rank world.Rank().
func runAsRank(world *mpi.World, dir string, f runFlags, specs map[string]string, stdout, stderr io.Writer) error {
	if err := dynamic.RefuseRanks(dir); err != nil {
		return err
	}
	if f.batch != 0 {
		return errBatch(dir)
	}
	threads := f.threads
	if threads == 0 {
		threads = mpi.LocalThreads()
	}
	p, prog, params, err := loadPlan(dir, f.params, fmt.Sprintf("rank %d: ", world.Rank()), func(p *plan.Plan) (*executor.Program, error) {
		return executor.OpenRank(p, dir, f.backend, executor.Options{Threads: threads}, world)
	})
	if err != nil {
		return err
	}
	defer prog.Close()
	host, _ := os.Hostname()
	fmt.Fprintf(stderr, "rank %d of %d on %s: device %d of %s loaded (%s)\n", world.Rank(), world.Size(), host, world.Rank(), p.Model, world.Version)
	in := newInputs(p, f, specs)
	if world.Rank() == 0 {
		return in.runAndWrite(prog.Run, params, stdout)
	}
	if err := in.read(); err != nil {
		return err
	}
	_, err = prog.Run(in.values, params)
	return err
}

// errBatch refuses --batch for a plan of one batch size in dir.
func errBatch(dir string) error {
	return fmt.Errorf("--batch goes with a plan compiled with --dynamic; %s was compiled for one batch size", dir)
}

// runInputs are a run's inputs: read from --in, or drawn from the seed.
type runInputs struct {
	plan   *plan.Plan
	flags  runFlags
	specs  map[string]string
	values map[string]*tensor.Tensor
	drawn  map[string]*tensor.Tensor
}

func newInputs(p *plan.Plan, f runFlags, specs map[string]string) *runInputs {
	return &runInputs{plan: p, flags: f, specs: specs, drawn: map[string]*tensor.Tensor{}}
}

// read reads the plan's inputs, drawing the missing ones with
// --random-inputs.
func (in *runInputs) read() error {
	p, f := in.plan, in.flags
	draw := func(b plan.Binding) (*tensor.Tensor, error) {
		if !f.random {
			return nil, fmt.Errorf("input %s (%s%v) is missing: give it with --in %s=PATH.npy, or use --random-inputs", b.Name, b.DType, b.Shape, b.Name)
		}
		t, err := randomPlanInput(b, f.seed)
		if len(p.Next) > 0 && b.Name == autodiff.StepInput && len(b.Shape) == 0 {
			t = tensor.Scalar(lang.ParseDType(b.DType), 1) // Adam's step number: the first
		}
		in.drawn[b.Name] = t
		return t, err
	}
	var err error
	in.values, err = planio.Inputs(p, in.specs, draw)
	return err
}

// runAndWrite reads or draws the inputs, runs them with params and
// writes the inputs drawn, the outputs and, for a training plan, the
// parameters for the next step, all or nothing.
func (in *runInputs) runAndWrite(run func(inputs, params map[string]*tensor.Tensor) (map[string]*tensor.Tensor, error), params map[string]*tensor.Tensor, stdout io.Writer) error {
	if err := in.read(); err != nil {
		return err
	}
	outputs, err := run(in.values, params)
	if err != nil {
		return err
	}
	var out planio.Folder
	out.Read(readFiles(in.specs, in.flags.params)...)
	for _, b := range in.plan.Inputs {
		if t, ok := in.drawn[b.Name]; ok {
			addDrawn(&out, b.Name, t)
		}
	}
	out.Outputs(outputs)
	out.NextParams(in.plan, params, outputs)
	return out.Write(in.flags.out, stdout)
}

// randomPlanInput draws a plan input as eval's --random-inputs does.
func randomPlanInput(b plan.Binding, seed uint64) (*tensor.Tensor, error) {
	shape := make([]lang.Dim, len(b.Shape))
	for i, n := range b.Shape {
		shape[i] = lang.Const(n)
	}
	return randomInput(&ir.Value{Name: b.Name, DType: lang.ParseDType(b.DType), Shape: shape}, seed, b.Classes)
}
