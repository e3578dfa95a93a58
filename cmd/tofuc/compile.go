package main

import (
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"tofuc/analysis/check"
	"tofuc/analysis/cost"
	"tofuc/analysis/partition"
	"tofuc/analysis/partition/execution"
	"tofuc/analysis/report"
	"tofuc/codegen"
	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/rewrite/search"
	"tofuc/runtime/exec"
	"tofuc/runtime/npy"
	"tofuc/runtime/tensor"
)

// emitNames are the artefacts `compile --emit` chooses among.
var emitNames = []string{"llvm", "ptx", "host", "simt", "plan", "report"}

type compileFlags struct {
	model, out, emit string
	sets             []string
	devices, jobs    int
	memory           int64
	seed             uint64
	noOptimize       bool
	train            trainFlags
}

func runCompile(args []string, stdout, stderr io.Writer) int {
	fs := flagSet("compile", stderr)
	var f compileFlags
	fs.StringVarP(&f.out, "output", "o", "", "write the plan, the kernels and the report into DIR (required)")
	fs.StringVar(&f.emit, "emit", strings.Join(emitNames, ","), "what to write: "+strings.Join(emitNames, ", ")+" (plan.json is always written)")
	fs.IntVar(&f.devices, "devices", 1, "compile for N devices: the model is partitioned first (tofuc partition)")
	fs.Var((*byteSize)(&f.memory), "memory", "with --devices: the memory per device, e.g. 80GB (0: unlimited)")
	fs.StringVar(&f.model, "model", "", "the model to compile (default: the only one)")
	fs.StringArrayVar(&f.sets, "set", nil, "override a model attribute, NAME=VALUE (repeatable)")
	fs.BoolVar(&f.noOptimize, "no-optimize", false, "skip the verified rewrites (tofuc optimize) of an inference graph")
	fs.IntVar(&f.jobs, "jobs", 0, "llc processes at once (0: all cores)")
	fs.Uint64Var(&f.seed, "seed", 0, "seed of the parameters the model's weights do not give (written to DIR/params.npz)")
	f.train.register(fs)
	if status, done := parseFlags(fs, args, stdout); done {
		return status
	}
	emit, err := f.validate(fs.NArg(), f.train.changed(fs))
	if err != nil {
		return usageError(stderr, "compile", "%v", err)
	}
	set, err := parseSets(f.sets)
	if err != nil {
		return usageError(stderr, "compile", "%v", err)
	}
	compile := func(w io.Writer) error { return compileModel(fs.Arg(0), f, set, emit, w, stderr) }
	if err := cachedCompile(fs.Arg(0), f, stdout, compile); err != nil {
		return fail(stderr, err)
	}
	return exitOK
}

// validate checks the flags and returns the artefacts to write.
func (f *compileFlags) validate(nargs int, trainChanged bool) (codegen.Emit, error) {
	var emit codegen.Emit
	switch {
	case nargs != 1:
		return emit, fmt.Errorf("expected one MODEL file")
	case f.out == "":
		return emit, fmt.Errorf("-o DIR is required")
	case f.devices < 1 || f.devices > partition.MaxDevices:
		return emit, fmt.Errorf("--devices must be 1 to %d", partition.MaxDevices)
	case f.memory < 0 || f.memory > 0 && f.devices == 1:
		return emit, fmt.Errorf("--memory goes with --devices N > 1, and must not be negative")
	case f.jobs < 0:
		return emit, fmt.Errorf("--jobs must not be negative")
	case !f.train.train && trainChanged:
		return emit, fmt.Errorf("--loss, --optimizer and --lr go with --train")
	}
	if err := f.train.validate(); err != nil {
		return emit, err
	}
	for _, e := range strings.Split(f.emit, ",") {
		switch strings.TrimSpace(e) {
		case "llvm":
			emit.LLVM = true
		case "ptx":
			emit.PTX = true
		case "host":
			emit.Host = true
		case "simt":
			emit.SIMT = true
		case "plan", "report":
		default:
			return emit, fmt.Errorf("--emit %q: expected a list of %s", e, strings.Join(emitNames, ", "))
		}
	}
	return emit, nil
}

// compileModel checks, optimises (an inference graph), partitions (with
// --devices) and lowers a model, and writes the plan, the kernels, the
// parameters and the report.
func compileModel(path string, f compileFlags, set map[string]ir.AttrValue, emit codegen.Emit, stdout, stderr io.Writer) error {
	prog, err := check.NewProgram()
	if err != nil {
		return err
	}
	m, weights, err := loadModel(prog, path)
	if err != nil {
		return err
	}
	g, err := m.Model(f.model, set)
	if err != nil {
		return err
	}
	if err := checkMemory("model "+g.Name, interpPeak(g)); err != nil {
		return err
	}
	name := g.Name
	// Not partitioned (Devices 0) until a partition report replaces it.
	rep := &report.Report{Version: report.Version, Model: name, File: path, Train: f.train.train, Sections: []report.Section{}}
	p := newProgress(stderr)
	defer p.done()
	if f.devices > 1 {
		// As tofuc partition: batch_norm_train as its statistics and
		// normalisation (partition.Decompose).
		if g, err = partition.Decompose(g, m); err != nil {
			return err
		}
	}
	if f.train.train {
		if g, _, err = trainingGraph(m, g, &f.train); err != nil {
			return err
		}
	} else if !f.noOptimize {
		if g, err = optimizeForCompile(prog, g, rep, p); err != nil {
			return err
		}
	}
	opts := codegen.Options{Emit: emit, Jobs: f.jobs, Progress: func(done, total int) { p.count("compiling kernel modules", done, total) }}
	var c *codegen.Compiled
	if f.devices == 1 {
		p.show("lowering %d operators", len(g.Nodes))
		c, err = codegen.Compile(g, f.out, opts)
	} else {
		var prep *report.Report
		if c, prep, err = compilePartitioned(g, path, name, f, opts, p); err == nil {
			for _, s := range rep.Sections {
				prep.SetSection(s)
			}
			rep = prep
		}
	}
	if err != nil {
		return err
	}
	p.done()
	params, err := initialParams(g, weights, f.seed)
	if err != nil {
		return err
	}
	if len(params) > 0 {
		if err := npy.WriteNPZ(filepath.Join(f.out, "params.npz"), params); err != nil {
			return err
		}
	}
	rep.SetSection(codegen.KernelsSection(c.Plan, cost.H100))
	if slices.Contains(strings.Split(f.emit, ","), "report") {
		if err := rep.Write(f.out); err != nil {
			return err
		}
	}
	launches := fmt.Sprintf("%d launches", c.Stats.Kernels)
	if gpu := opts.Emit.LLVM || opts.Emit.PTX || opts.Emit.SIMT; gpu && c.Stats.GPULaunches != c.Stats.Kernels {
		launches += fmt.Sprintf(" (%d on a GPU)", c.Stats.GPULaunches)
	}
	fmt.Fprintf(stdout, "%s: %s of %d distinct kernels in %d modules, %d devices (%.1fs)\n",
		name, launches, c.Stats.Distinct, c.Stats.Modules, c.Plan.Devices, c.Stats.Seconds.Seconds())
	fmt.Fprintf(stdout, "plan: %s\n", filepath.Join(f.out, "plan.json"))
	return nil
}

// optimizeForCompile rewrites g with the verified rules and adds the
// optimize section to the report.
func optimizeForCompile(prog *check.Program, g *ir.Graph, rep *report.Report, p *progress) (*ir.Graph, error) {
	rules, errs := loadRules([]string{"std/rules.tdl"})
	if len(errs) > 0 {
		return nil, errs
	}
	show := func(part, parts int) { p.show("optimising: part %d of %d", min(part, parts), parts) }
	out, err := search.New(prog, rules, search.Options{Progress: show}).Optimize(g)
	if err != nil {
		return nil, err
	}
	rep.SetSection(report.Section{Name: "optimize", Title: "Graph optimisation", Lines: optimizeLines(g.Name, out)})
	return out.Graph, nil
}

// compilePartitioned searches the partition plan, reports it, and lowers
// its execution graph.
func compilePartitioned(g *ir.Graph, path, name string, f compileFlags, opts codegen.Options, p *progress) (*codegen.Compiled, *report.Report, error) {
	cg, err := cost.NewGraph(g)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	popt := partition.Options{Memory: f.memory, Progress: func(step, steps int) { p.show("partitioning: step %d of %d", step, steps) }}
	rep, err := partitionReport(cg, path, name, partitionFlags{devices: f.devices, memory: f.memory, train: f.train}, popt)
	if err != nil {
		return nil, nil, err
	}
	chosen, err := report.FromPlan(cg, rep.Plan)
	if err != nil {
		return nil, nil, err
	}
	eg, err := execution.Build(cg, chosen)
	if err != nil {
		return nil, nil, err
	}
	p.show("lowering %d operators on %d devices", len(g.Nodes), f.devices)
	c, err := codegen.CompilePartitioned(eg, g, f.out, opts)
	return c, rep, err
}

// initialParams are the model's weights, and the initial values of the
// parameters they do not give.
func initialParams(g *ir.Graph, weights map[string]*tensor.Tensor, seed uint64) (map[string]*tensor.Tensor, error) {
	out := map[string]*tensor.Tensor{}
	for _, p := range g.Params {
		if t, ok := weights[p.Value.Name]; ok {
			out[p.Value.Name] = t
			continue
		}
		shape, ok := lang.ConstShape(p.Value.Shape)
		if !ok {
			return nil, fmt.Errorf("parameter %s has the symbolic shape %s", p.Value.Name, lang.ShapeString(p.Value.Shape))
		}
		t, err := exec.InitParam(p, shape, seed)
		if err != nil {
			return nil, err
		}
		out[p.Value.Name] = t
	}
	return out, nil
}
