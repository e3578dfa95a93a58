package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"tofuc/analysis/autodiff"
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
	if err := runPlan(fs.Arg(0), f, specs, stdout); err != nil {
		return fail(stderr, err)
	}
	return exitOK
}

// runPlan loads a compiled plan and its parameters (everything checked
// first), reads or draws its inputs, runs it once and writes the inputs
// it drew and its outputs: nothing is written unless the run succeeds.
func runPlan(dir string, f runFlags, specs map[string]string, stdout io.Writer) error {
	if dynamic.Is(dir) {
		return runDynamic(dir, f, specs, stdout)
	}
	if f.batch != 0 {
		return errBatch(dir)
	}
	p, prog, params, err := loadPlan(dir, f.params, "", func(p *plan.Plan) (*executor.Program, error) {
		return executor.Open(p, dir, f.backend, executor.Options{Threads: f.threads})
	})
	if err != nil {
		return err
	}
	defer prog.Close()
	return newInputs(p, f, specs).runAndWrite(prog.Run, params, stdout)
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
