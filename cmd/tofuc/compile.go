package main

import (
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/lang/precision"
	"tofuc/pipeline"

	"github.com/spf13/pflag"
)

type compileFlags struct {
	model, out, emit string
	sets             []string
	devices, jobs    int
	memory           int64
	objective        string
	seed             uint64
	noParams         bool
	noOptimize       bool
	precision        precision.Mode
	backends         []string
	train            trainFlags
	dynamic          string
	// pipeline is --pipeline: "" (off), "faster" or "always".
	pipeline string
}

func runCompile(args []string, stdout, stderr io.Writer) int {
	fs := flagSet("compile", stderr)
	var f compileFlags
	fs.StringVarP(&f.out, "output", "o", "", "write the plan, the kernels and the report into DIR (required)")
	fs.StringVar(&f.emit, "emit", strings.Join(pipeline.ArtefactNames(), ","), "what to write: "+strings.Join(pipeline.ArtefactNames(), ", ")+" (plan.json is always written)")
	fs.IntVar(&f.devices, "devices", 1, "compile for N devices: the model is partitioned first (tofuc partition)")
	fs.Var((*byteSize)(&f.memory), "memory", "with --devices: the memory per device, e.g. 80GB (0: unlimited)")
	registerObjective(fs, &f.objective)
	fs.StringVar(&f.pipeline, "pipeline", "", "with --train and --devices: offer GraphPipe's pipeline plan beside the partition plan, and compile it where its simulated step is shorter (tofuc partition --pipeline; also --pipeline=faster); --pipeline=always compiles it whatever its step")
	fs.Lookup("pipeline").NoOptDefVal = pipelineFaster
	fs.StringVar(&f.model, "model", "", "the model to compile (default: the only one)")
	fs.StringArrayVar(&f.sets, "set", nil, "override a model attribute, NAME=VALUE (repeatable)")
	fs.BoolVar(&f.noOptimize, "no-optimize", false, "skip the verified rewrites (tofuc optimize) of an inference graph")
	registerPrecision(fs, &f.precision, "")
	registerBackends(fs, &f.backends, "")
	fs.IntVar(&f.jobs, "jobs", 0, "llc processes at once (0: all cores)")
	fs.Uint64Var(&f.seed, "seed", 0, "seed of the parameters the model's weights do not give (written to DIR/params.npz)")
	fs.BoolVar(&f.noParams, "no-params", false, "write no DIR/params.npz (runs give --params): the plan of a model whose parameters this machine cannot hold")
	fs.StringVar(&f.dynamic, "dynamic", "", "compile for any batch size: NAME is the batch attribute or input extent, compiled at the sizes NAME=N,N,... or NAME=LO..HI (default 1, 2, 4, ..., 256) and run in chunks of them (docs/cli.md)")
	f.train.register(fs)
	if status, done := parseFlags(fs, args, stdout); done {
		return status
	}
	if fs.Changed("pipeline") && f.pipeline == "" {
		f.pipeline = "(empty)"
	}
	opts, err := f.validate(fs.NArg(), f.train.changed(fs))
	if err != nil {
		return usageError(stderr, "compile", "%v", err)
	}
	set, err := pipeline.ParseSets(f.sets)
	if err != nil {
		return usageError(stderr, "compile", "%v", err)
	}
	if f.dynamic != "" {
		dyn, err := pipeline.ParseDynamic(f.dynamic)
		if err != nil {
			return usageError(stderr, "compile", "%v", err)
		}
		err = compileDynamic(fs.Arg(0), f.model, set, *dyn, opts, f.out, stdout, stderr)
		if err != nil {
			return fail(stderr, err)
		}
		return exitOK
	}
	if err := compileModel(fs.Arg(0), f.model, set, opts, f.out, stdout, stderr); err != nil {
		return fail(stderr, err)
	}
	return exitOK
}

// The values of compile's --pipeline.
const (
	pipelineFaster = "faster"
	pipelineAlways = "always"
)

// validate checks the flags and returns the compile's options.
func (f *compileFlags) validate(nargs int, trainChanged bool) (pipeline.Options, error) {
	switch {
	case nargs != 1:
		return pipeline.Options{}, fmt.Errorf("expected one MODEL file")
	case f.out == "":
		return pipeline.Options{}, fmt.Errorf("-o DIR is required")
	case f.jobs < 0:
		return pipeline.Options{}, fmt.Errorf("--jobs must not be negative")
	}
	opts, err := compileOptions(f.devices, f.memory, f.objective, f.noOptimize, f.precision, f.backends, &f.train, trainChanged)
	if err != nil {
		return opts, err
	}
	switch {
	case f.pipeline != "" && f.pipeline != pipelineFaster && f.pipeline != pipelineAlways:
		return opts, fmt.Errorf("--pipeline=%s: expected --pipeline (compiled where faster) or --pipeline=always", f.pipeline)
	case f.pipeline != "" && (opts.Train == nil || opts.Devices < 2):
		return opts, fmt.Errorf("--pipeline goes with --train and --devices N > 1 (a pipeline runs a training step's micro-batches on several devices)")
	}
	opts.Jobs, opts.Seed, opts.NoParams = f.jobs, f.seed, f.noParams
	opts.Pipeline, opts.AlwaysPipeline = f.pipeline != "", f.pipeline == pipelineAlways
	for _, e := range strings.Split(f.emit, ",") {
		e = strings.TrimSpace(e)
		if !slices.Contains(pipeline.ArtefactNames(), e) {
			return opts, fmt.Errorf("--emit %q: expected a list of %s", e, strings.Join(pipeline.ArtefactNames(), ", "))
		}
		opts.Emit = append(opts.Emit, e)
	}
	return opts, nil
}

// registerObjective adds --objective, what the plan of --devices
// minimises, as tofuc partition's.
func registerObjective(fs *pflag.FlagSet, objective *string) {
	fs.StringVar(objective, "objective", "", "with --devices: what the plan minimises, time (the simulated step; the default) or bytes (communicated per step), as tofuc partition --objective")
}

// compileOptions are the pipeline's options for the flags compile shares
// with the compiled backends of eval and bench (pipeline.Choices), so
// that the same flags build the same plan.
func compileOptions(devices int, memory int64, objective string, noOptimize bool, prec precision.Mode, backends []string, train *trainFlags, trainChanged bool) (pipeline.Options, error) {
	if !train.train && trainChanged {
		return pipeline.Options{}, fmt.Errorf("--loss, --optimizer, --lr, --loss-scale, --lr-schedule and --clip-norm go with --train")
	}
	c := pipeline.Choices{Devices: devices, Memory: memory, Objective: objective, NoOptimize: noOptimize, Precision: prec, Backends: backends, Train: train.choices()}
	return c.Options()
}

func compileModel(path, name string, set map[string]ir.AttrValue, opts pipeline.Options, dir string, stdout, stderr io.Writer) error {
	start := time.Now()
	m, err := pipeline.Load(path, name, set)
	if err != nil {
		return err
	}
	p := newProgress(stderr)
	opts.Progress = p
	res, err := pipeline.Compile(m, dir, opts)
	p.done()
	if err != nil {
		return err
	}
	st := res.Stats
	launches := fmt.Sprintf("%d launches", st.Kernels)
	if gpu := slices.ContainsFunc(opts.Emit, func(e string) bool { return e == "llvm" || e == "ptx" || e == "simt" }) || opts.Emit == nil; gpu && st.GPULaunches != st.Kernels {
		launches += fmt.Sprintf(" (%d on a GPU)", st.GPULaunches)
	}
	fmt.Fprintf(stdout, "%s: %s of %d distinct kernels in %d modules, %d devices (%.1fs)\n",
		m.Graph.Name, launches, st.Distinct, st.Modules, res.Plan.Devices, time.Since(start).Seconds())
	arena := slices.Max(res.Plan.ArenaBytes)
	fmt.Fprintf(stdout, "memory: %s per device (the largest arena of its buffers)\n", lang.FormatBytes(arena))
	if opts.Memory > 0 && arena > opts.Memory {
		fmt.Fprintf(stderr, "tofuc: warning: the compiled plan's largest arena, %s, is over --memory %s: the plan search's memory model counts less than the compiled buffers take; give a smaller --memory (docs/cli.md, compile)\n",
			lang.FormatBytes(arena), lang.FormatBytes(opts.Memory))
	}
	if res.Plan.Precision != precision.Exact {
		fmt.Fprintf(stdout, "precision: %s (docs/precision.md)\n", res.Plan.Precision)
	}
	fmt.Fprintf(stdout, "plan: %s\n", filepath.Join(dir, "plan.json"))
	if res.Cached {
		fmt.Fprintf(stdout, "(unchanged since the last compile: its outputs reused from the compile cache)\n")
	}
	return nil
}

// compileDynamic compiles a plan of a dynamic batch and says what each
// size compiled.
func compileDynamic(path, name string, set map[string]ir.AttrValue, d pipeline.Dynamic, opts pipeline.Options, dir string, stdout, stderr io.Writer) error {
	start := time.Now()
	p := newProgress(stderr)
	opts.Progress = p
	res, err := pipeline.CompileDynamic(path, name, set, d, dir, opts)
	p.done()
	if err != nil {
		return err
	}
	m := res.Manifest
	fmt.Fprintf(stdout, "%s: a dynamic %s, %d sizes compiled (%.1fs)\n", m.Model, m.Symbol, len(res.Sizes), time.Since(start).Seconds())
	for i, r := range res.Results {
		cached := ""
		if r.Cached {
			cached = " (from the compile cache)"
		}
		fmt.Fprintf(stdout, "  %s = %d: %d launches, %s%s\n", m.Symbol, res.Sizes[i], r.Stats.Kernels, lang.FormatBytes(slices.Max(r.Plan.ArenaBytes)), cached)
	}
	for _, a := range m.Inputs {
		if a.Batched() {
			fmt.Fprintf(stdout, "input %s: batch along dimension %d (%d per sample)\n", a.Name, a.Dim, a.Factor)
		}
	}
	fmt.Fprintf(stdout, "plan: %s (a batch runs in chunks of %s; docs/cli.md)\n", filepath.Join(dir, "dynamic.json"), sizesList(res.Sizes))
	return nil
}

func sizesList(sizes []int64) string {
	var parts []string
	for _, n := range sizes {
		parts = append(parts, fmt.Sprint(n))
	}
	return strings.Join(parts, ", ")
}
