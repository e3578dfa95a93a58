// Command tofuc-run runs a plan that `tofuc compile` wrote on NVIDIA GPUs:
// in one process, or as one rank a GPU under mpirun (docs/distributed.md).
// It is built without cgo (CGO_ENABLED=0: no Z3, no C compiler, no CUDA
// headers) and loads the CUDA driver at run time, so that one static
// binary built anywhere runs on a GPU machine. docs/gpu.md says how.
//
//	tofuc-run DIR --in NAME=PATH.npy ... [--params PATH.npz] --out DIR2 [--bench [--runs N] [--json FILE]]
package main

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"tofuc/internal/cliargs"
	"tofuc/runtime/bootstrap"
	"tofuc/runtime/cuda"
	"tofuc/runtime/dynamic"
	"tofuc/runtime/executor"
	"tofuc/runtime/mpi"
	"tofuc/runtime/plan"
	"tofuc/runtime/planio"
	"tofuc/runtime/tensor"
)

// Exit statuses, as tofuc's (docs/cli.md).
const (
	exitOK    = 0
	exitUser  = 1
	exitUsage = 2
)

const usage = "tofuc-run DIR --in NAME=PATH.npy ... [--params PATH.npz] --out DIR2 [--bench [--runs N] [--json FILE] [--copy-bytes N]] [--nproc-per-node N] [--timeout D]"

type flags struct {
	ins             []string
	params, out     string
	bench           bool
	runs            int
	json            string
	copyBytes       int64
	benchFlagsGiven bool
	// timeout bounds a rank's wait for another (run as ranks).
	timeout time.Duration
	// ranks is --nproc-per-node: ranks to start on this machine.
	ranks      int
	ranksGiven bool
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("tofuc-run", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.SortFlags = false
	fs.Usage = func() {}
	var f flags
	fs.StringArrayVar(&f.ins, "in", nil, "an input, NAME=PATH.npy (repeatable; every input of the plan)")
	fs.StringVar(&f.params, "params", "", "parameters, one .npz (default: DIR/params.npz, written by tofuc compile)")
	fs.StringVar(&f.out, "out", "", "directory for the outputs, NAME.npy (created if missing)")
	fs.BoolVar(&f.bench, "bench", false, "after the run, time the plan and each kernel (CUDA events) and print a table")
	fs.IntVar(&f.runs, "runs", 20, "with --bench: timed runs of the plan, then as many of the kernels")
	fs.StringVar(&f.json, "json", "", "with --bench: write the timings as JSON to FILE (default: DIR2/bench.json)")
	fs.IntVar(&f.ranks, "nproc-per-node", 0, "start this many ranks on this machine, one a device of the plan and a GPU (docs/distributed.md)")
	fs.DurationVar(&f.timeout, "timeout", 5*time.Minute, "as ranks: how long a rank waits for another before it fails, naming the rank that holds it")
	fs.Int64Var(&f.copyBytes, "copy-bytes", 256<<20, "with --bench: bytes of the device-to-device copy whose bandwidth is measured (0: none)")
	err := fs.Parse(args)
	if errors.Is(err, pflag.ErrHelp) {
		fmt.Fprintf(stdout, "tofuc-run: run a compiled plan on NVIDIA GPUs\n\nUsage: %s\n\nFlags:\n%s", usage, fs.FlagUsages())
		return exitOK
	}
	if err == nil {
		f.benchFlagsGiven = fs.Changed("runs") || fs.Changed("json") || fs.Changed("copy-bytes")
		f.ranksGiven = fs.Changed("nproc-per-node")
		err = f.validate(fs.NArg())
	}
	if err != nil {
		fmt.Fprintf(stderr, "tofuc-run: %v\nUsage: %s\n", err, usage)
		return exitUsage
	}
	if _, asRank, _ := bootstrap.FromEnv(); f.ranks > 0 && (asRank || mpi.Launched()) {
		fmt.Fprintf(stderr, "tofuc-run: --nproc-per-node starts the ranks itself: run it without a launcher\nUsage: %s\n", usage)
		return exitUsage
	}
	if f.ranks > 0 {
		err := dynamic.RefuseRanks(fs.Arg(0))
		if err == nil {
			err = executor.CheckRanksIn(fs.Arg(0), f.ranks)
		}
		if err != nil {
			fmt.Fprintf(stderr, "tofuc-run: %v\n", err)
			return exitUser
		}
		if err := bootstrap.StartLocal(f.ranks, cliargs.Without(args, "nproc-per-node"), stdout, stderr); err != nil {
			fmt.Fprintf(stderr, "tofuc-run: %v\n", err)
			return exitUser
		}
		return exitOK
	}
	if mpi.Launched() {
		return runRankOnMPI(fs.Arg(0), f, stdout, stderr)
	}
	if env, ok, err := bootstrap.FromEnv(); ok {
		if err != nil {
			fmt.Fprintf(stderr, "tofuc-run: %v\n", err)
			return exitUsage
		}
		return runRankOnEnv(env, fs.Arg(0), f, stdout, stderr)
	}
	if err := runPlan(fs.Arg(0), f, stdout); err != nil {
		fmt.Fprintf(stderr, "tofuc-run: %v\n", err)
		return exitUser
	}
	return exitOK
}

func (f *flags) validate(nargs int) error {
	switch {
	case nargs != 1:
		return fmt.Errorf("expected one DIR (what tofuc compile -o wrote)")
	case f.out == "":
		return fmt.Errorf("--out DIR2 is required")
	case f.benchFlagsGiven && !f.bench:
		return fmt.Errorf("--runs, --json and --copy-bytes go with --bench")
	case f.runs < 1:
		return fmt.Errorf("--runs must be at least 1")
	case f.copyBytes < 0:
		return fmt.Errorf("--copy-bytes must not be negative")
	case f.timeout <= 0:
		return fmt.Errorf("--timeout must be positive")
	case f.ranks < 0 || f.ranksGiven && f.ranks == 0:
		return fmt.Errorf("--nproc-per-node must be at least 1")
	}
	_, err := planio.Specs(f.ins)
	return err
}

// openDevices opens the plan's logical devices on the CUDA driver and
// describes the driver; tests replace it.
var openDevices = func(p *plan.Plan, dir string) ([]executor.Device, string, error) {
	d, err := cuda.Load()
	if err != nil {
		return nil, "", err
	}
	devs, err := d.Open(p, dir)
	return devs, d.Describe(), err
}

// runPlan loads the plan, its inputs and parameters, runs it and writes
// the outputs; with --bench it then times it.
func runPlan(dir string, f flags, stdout io.Writer) error {
	specs, err := planio.Specs(f.ins)
	if err != nil {
		return err
	}
	if dynamic.Is(dir) {
		return runDynamic(dir, f, specs, stdout)
	}
	var params, inputs map[string]*tensor.Tensor
	var devs []executor.Device
	var driver string
	p, err := planio.Read(dir, func(p *plan.Plan) (err error) {
		// The host's share of the run (the arenas are on the GPUs),
		// before anything is read: then the inputs and parameters,
		// checked against the plan, before a GPU is touched.
		if err := executor.CheckHostMemory(p, nil); err != nil {
			return err
		}
		if params, err = planio.Params(p, dir, f.params); err != nil {
			return err
		}
		if inputs, err = planio.Inputs(p, specs, nil); err != nil {
			return err
		}
		devs, driver, err = openDevices(p, dir)
		return err
	})
	if err != nil {
		return err
	}
	prog, err := executor.Load(p, devs)
	if err != nil {
		return err
	}
	defer prog.Close()
	fmt.Fprintf(stdout, "%s: %d logical devices on %s\n", p.Model, p.Devices, gpuNames(devs))
	printNotes(stdout, prog.Notes)
	outputs, err := prog.Run(inputs, params)
	if err != nil {
		return err
	}
	placed := prog.Placement()
	if len(placed) > 0 {
		fmt.Fprintf(stdout, "placement, timed on the GPU: %s\n", placementSummary(placed))
	}
	out := outputFolder(specs, f.params, outputs)
	out.NextParams(p, params, outputs)
	if err := out.Write(f.out, stdout); err != nil {
		return err
	}
	if !f.bench {
		return nil
	}
	return bench(prog, devs[0], driver, inputs, params, placed, f, stdout)
}

// printNotes prints what loading the plan said: a library its steps
// need, missing here, or refusing a step.
func printNotes(w io.Writer, notes []string) {
	for _, n := range notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}

// placementSummary counts the groups each variant runs.
func placementSummary(placed []executor.GroupChoice) string {
	count := map[string]int{}
	for _, c := range placed {
		count[c.Chosen]++
	}
	names := slices.Sorted(maps.Keys(count))
	parts := make([]string, len(names))
	for i, name := range names {
		parts[i] = fmt.Sprintf("%d on %s", count[name], name)
	}
	return fmt.Sprintf("%d parts, %s", len(placed), strings.Join(parts, ", "))
}

// gpuNames lists the distinct GPUs behind the devices.
func gpuNames(devs []executor.Device) string {
	var names []string
	seen := map[string]bool{}
	for _, d := range devs {
		if n := d.Name(); !seen[n] {
			seen[n] = true
			names = append(names, n)
		}
	}
	return strings.Join(names, ", ")
}

// runDynamic runs a plan compiled with --dynamic at the batch of its
// inputs (runtime/dynamic), each size's plan loaded on the GPUs the
// first time a chunk needs it.
func runDynamic(dir string, f flags, specs map[string]string, stdout io.Writer) error {
	if f.bench {
		return fmt.Errorf("--bench times one plan: give the folder of one size of the dynamic plan (%s/NAME-N)", dir)
	}
	var gpus string
	r, err := dynamic.Open(dir, func(p *plan.Plan, dir string) (*executor.Program, error) {
		if err := executor.CheckHostMemory(p, nil); err != nil {
			return nil, err
		}
		devs, _, err := openDevices(p, dir)
		if err != nil {
			return nil, err
		}
		gpus = gpuNames(devs)
		return executor.Load(p, devs)
	})
	if err != nil {
		return err
	}
	defer r.Close()
	params, err := r.Params(f.params)
	if err != nil {
		return err
	}
	n, ok, err := r.FileBatch(specs)
	if err == nil && !ok {
		err = errors.New("no batch input given: give every input with --in")
	}
	if err != nil {
		return err
	}
	inputs, err := planio.Inputs(r.At(n), specs, nil)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: a batch of %d (a dynamic %s) on %s\n", r.Manifest.Model, n, r.Manifest.Symbol, gpus)
	printNotes(stdout, r.Notes)
	outputs, err := r.Run(inputs, params)
	if err != nil {
		return err
	}
	return outputFolder(specs, f.params, outputs).Write(f.out, stdout)
}

// outputFolder is a run's outputs, with the files it read (left in
// place if they are in the output folder).
func outputFolder(specs map[string]string, params string, outputs map[string]*tensor.Tensor) *planio.Folder {
	var out planio.Folder
	for _, path := range specs {
		out.Read(path)
	}
	out.Read(params)
	out.Outputs(outputs)
	return &out
}
