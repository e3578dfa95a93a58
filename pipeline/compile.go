package pipeline

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"tofuc/analysis/autodiff"
	"tofuc/analysis/check"
	"tofuc/analysis/cost"
	"tofuc/analysis/partition"
	"tofuc/analysis/partition/execution"
	"tofuc/analysis/report"
	"tofuc/analysis/stages"
	"tofuc/codegen"
	"tofuc/codegen/target"
	"tofuc/codegen/toolchain"
	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/lang/precision"
	"tofuc/parser"
	"tofuc/rewrite/search"
	"tofuc/runtime/cpu"
	"tofuc/runtime/exec"
	"tofuc/runtime/npy"
	"tofuc/runtime/plan"
	"tofuc/runtime/safefile"
	"tofuc/runtime/tensor"
)

// Options choose what Compile does; the zero value is `tofuc compile`'s
// defaults on one device.
type Options struct {
	// Devices partitions the model over that many devices (0 or 1:
	// none); Memory is the memory per device the partition search
	// respects (0: unlimited).
	Devices int
	Memory  int64
	// Objective is what the partition search's chosen plan minimises:
	// partition.Time ("" too) or partition.Bytes.
	Objective string
	// Pipeline offers GraphPipe's pipeline plan of the training graph
	// (analysis/stages) beside the partition plan: under the time
	// objective the one of the shorter simulated step is compiled.
	// AlwaysPipeline, with it, compiles GraphPipe's plan whatever its
	// step, and a graph that has none is an error.
	Pipeline, AlwaysPipeline bool
	// Train, when not nil, compiles the model's training graph (loss,
	// backward operators, optimizer updates).
	Train *autodiff.TrainOptions
	// NoOptimize skips the verified rewrites of an inference graph.
	NoOptimize bool
	// Precision is the arithmetic of the compiled kernels
	// (lang/precision; part of the compile cache's key, as every option).
	Precision precision.Mode
	// Emit lists the artefacts to write besides plan.json
	// (ArtefactNames: the targets', and "report" writes the report);
	// nil: all.
	Emit []string
	// Jobs bounds the llc processes at once (0: all cores).
	Jobs int
	// Seed draws the initial values of the parameters the model's
	// weights do not give.
	Seed uint64
	// NoParams draws and writes no initial parameters (params.npz): the
	// plan of a model whose parameters this machine cannot hold, run
	// elsewhere with --params.
	NoParams bool
	// Backends are the vendor libraries offered the contractions beside
	// the generated kernels (ResolveBackends; docs/placement.md), placed
	// by their measured time on this host with Threads threads (0:
	// GOMAXPROCS).
	Backends []string
	Threads  int
	// AllVariants keeps the placement groups in the plan even where
	// placement chose no library (elsewhere the plan is compiled again
	// without them): a plan in which each variant can be put in force,
	// as tests of every library's results do.
	AllVariants bool
	// Progress, when not nil, is told what a long compile is doing.
	Progress Progress
}

// Progress receives what a long compile is doing.
type Progress interface {
	// Show says what the compile does now.
	Show(format string, args ...any)
	// Count says how many of the items of a stage are done.
	Count(what string, done, total int)
}

// quiet is the Progress of a compile told nothing.
type quiet struct{}

func (quiet) Show(string, ...any)    {}
func (quiet) Count(string, int, int) {}

func (o *Options) progress() Progress {
	if o.Progress == nil {
		return quiet{}
	}
	return o.Progress
}

// ArtefactNames are the artefacts Options.Emit chooses among: the
// targets' (codegen/target), the plan (always written) and the report.
func ArtefactNames() []string { return append(target.Artefacts(), "plan", "report") }

// emit is the targets' artefacts opts.Emit names (nil: all of them);
// writeReport says whether to write the report.
func (o *Options) emit() (artefacts []string, writeReport bool, err error) {
	if o.Emit == nil {
		return nil, true, nil
	}
	artefacts = []string{}
	for _, name := range o.Emit {
		switch {
		case name == "report":
			writeReport = true
		case name == "plan":
		case slices.Contains(target.Artefacts(), name):
			artefacts = append(artefacts, name)
		default:
			return nil, false, fmt.Errorf("unknown artefact %q (expected %s)", name, strings.Join(ArtefactNames(), ", "))
		}
	}
	return artefacts, writeReport, nil
}

// Result is a compiled model.
type Result struct {
	Plan *plan.Plan
	Dir  string
	// Graph is the graph compiled: the training graph with Train, the
	// optimised graph without; Next maps each trained parameter to the
	// output holding its update (autodiff.TrainingGraph).
	Graph *ir.Graph
	Next  map[string]string
	// Params are the initial parameters, written to DIR/params.npz.
	Params map[string]*tensor.Tensor
	Report *report.Report
	Stats  codegen.Stats
	// Placement is placement's groups, as timed and chosen; the plan
	// keeps them only where it chose a library for one.
	Placement []plan.PlaceGroup
	// Cached says the compile reused the compile cache's outputs
	// (Graph, Next and Report are then nil).
	Cached bool
}

// Compile compiles m into dir (created if missing) as opts say, through
// the compile cache when m has a Source; the files are written to a
// staging folder and moved into dir once all are (output.go).
func Compile(m *Model, dir string, opts Options) (*Result, error) {
	st, err := safefile.Stage(dir)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	res, err := cached(m, st.Path, opts, func() (*Result, error) { return compile(m, st.Path, dir, opts) })
	if err != nil {
		return nil, err
	}
	if err := commit(st); err != nil {
		return nil, err
	}
	res.Dir = dir
	return res, nil
}

// compile runs the stages (see the package comment), writing into dir;
// a module that fails to compile is kept in final for the person reading
// the error.
func compile(m *Model, dir, final string, opts Options) (*Result, error) {
	emit, writeReport, err := opts.emit()
	if err != nil {
		return nil, err
	}
	p := opts.progress()
	g := m.Graph
	name := g.Name
	// Not partitioned (Devices 0) until a partition report replaces it.
	rep := &report.Report{Version: report.Version, Model: name, File: m.Path, Train: opts.Train != nil, Sections: []report.Section{}}
	if opts.Devices > 1 {
		// As tofuc partition: batch_norm_train as its statistics and
		// normalisation (partition.Decompose).
		if g, err = partition.Decompose(g, m.Module); err != nil {
			return nil, err
		}
	}
	var next map[string]string
	switch {
	case opts.Train != nil:
		train := *opts.Train
		if train.LossScale == 0 {
			train.LossScale = opts.Precision.LossScale()
		}
		if g, next, err = autodiff.TrainingGraph(g, m.Module, train); err != nil {
			return nil, fmt.Errorf("%s: training graph of %s: %w", m.Path, name, err)
		}
	case !opts.NoOptimize:
		if g, err = optimize(m.Module, g, rep, p); err != nil {
			return nil, err
		}
	}
	if err := checkCells(g); err != nil {
		return nil, err
	}
	if !opts.NoParams {
		if err := exec.CheckMemory("the initial parameters of "+name, paramBytes(g)); err != nil {
			return nil, err
		}
	}
	copts := codegen.Options{Emit: emit, Jobs: opts.Jobs, Precision: opts.Precision, FailedDir: final, Progress: func(done, total int) { p.Count("compiling kernel modules", done, total) }}
	copts.Backends = offeredBackends(opts.Backends, emit)
	warnUnofferedGPU(opts.Backends, copts.Backends, opts.Precision)
	var c *codegen.Compiled
	if opts.Devices <= 1 {
		p.Show("lowering %d operators", len(g.Nodes))
		c, err = codegen.Compile(g, dir, copts)
	} else {
		c, rep, err = compilePartitioned(g, m, dir, opts, copts, rep)
	}
	if err != nil {
		return nil, err
	}
	if opts.NoParams && hostGroups(c.Plan) {
		return nil, fmt.Errorf("%s: placement times the libraries' steps on the parameters: compile with --backends none, or without --no-params", name)
	}
	var params map[string]*tensor.Tensor
	if !opts.NoParams {
		if params, err = initialParams(g, m.Weights, opts.Seed); err != nil {
			return nil, err
		}
	}
	c.Plan.Next = next
	if err := writeParams(c.Plan, dir, params); err != nil {
		return nil, err
	}
	var placed []plan.PlaceGroup
	if hostGroups(c.Plan) {
		sec, err := place(c.Plan, dir, params, opts)
		if err != nil {
			return nil, err
		}
		rep.SetSection(sec)
		placed = c.Plan.Placement
		if opts.Devices <= 1 && !opts.AllVariants && !choseLibrary(c.Plan) && !gpuGroups(c.Plan) {
			// Every part generated: the plan without placement groups.
			// Its generated variants were laid out beside the
			// libraries' (other kernels, a larger arena): MobileNetV2
			// ran 5% slower than with --backends none.
			p.Show("placement chose no library: compiling without placement groups")
			copts.Backends = nil
			grouped := c.Plan
			if c, err = codegen.Compile(g, dir, copts); err != nil {
				return nil, err
			}
			removeUnused(dir, grouped, c.Plan)
			c.Plan.Next = next
			if err := writeParams(c.Plan, dir, params); err != nil {
				return nil, err
			}
		}
	}
	rep.SetSection(codegen.KernelsSection(c.Plan, cost.H100))
	if writeReport {
		if err := rep.Write(dir); err != nil {
			return nil, err
		}
	}
	return &Result{Plan: c.Plan, Dir: dir, Graph: g, Next: next, Params: params, Report: rep, Stats: c.Stats, Placement: placed}, nil
}

// checkCells refuses a graph holding a tensor of more cells than a
// plan's buffer may (plan.MaxCells): the model's sizes (a --set value,
// say), not the compiler, are at fault.
func checkCells(g *ir.Graph) error {
	values := append([]*ir.Value(nil), g.Inputs...)
	for _, p := range g.Params {
		values = append(values, p.Value)
	}
	for _, n := range g.Nodes {
		values = append(values, n.Outputs...)
	}
	for _, v := range values {
		shape, ok := lang.ConstShape(v.Shape)
		if !ok {
			continue // refused by the lowering, naming the symbol
		}
		extents := make([]int64, len(shape))
		for i, n := range shape {
			extents[i] = int64(n)
		}
		if _, err := plan.Cells(extents); err != nil {
			return fmt.Errorf("%s of %s%s is too large: a tensor of a plan holds at most %d elements", v.Name, v.DType, lang.ShapeString(v.Shape), plan.MaxCells)
		}
	}
	return nil
}

// writeParams writes the initial parameters to dir/params.npz and
// records the file in the plan (rewriting dir/plan.json).
func writeParams(p *plan.Plan, dir string, params map[string]*tensor.Tensor) error {
	if len(params) == 0 {
		return nil
	}
	if err := npy.WriteNPZ(filepath.Join(dir, "params.npz"), params); err != nil {
		return err
	}
	f, err := plan.NewFile(dir, "params.npz")
	if err != nil {
		return err
	}
	p.ParamsFile = &f
	return p.Write(filepath.Join(dir, "plan.json"))
}

// optimize rewrites g with the verified rules of the standard library
// and adds the optimize section to the report.
func optimize(m *check.Module, g *ir.Graph, rep *report.Report, p Progress) (*ir.Graph, error) {
	rules, errs := LoadRules([]string{"std/rules.tdl"})
	if len(errs) > 0 {
		return nil, errs
	}
	show := func(part, parts int) { p.Show("optimising: part %d of %d", min(part, parts), parts) }
	prog, err := programOf(m)
	if err != nil {
		return nil, err
	}
	out, err := search.New(prog, rules, search.Options{Progress: show}).Optimize(g)
	if err != nil {
		return nil, err
	}
	rep.SetSection(out.Section(g.Name))
	return out.Graph, nil
}

// programOf is the program of module m, or a new one (the standard
// library's) for a graph of no module.
func programOf(m *check.Module) (*check.Program, error) {
	if m != nil {
		return m.Program(), nil
	}
	return check.NewProgram(parser.Parse)
}

// LoadRules loads the rewrite rules of the files at paths (each must
// have some), in a program of their own.
func LoadRules(paths []string) ([]*check.Rule, lang.ErrorList) {
	prog, err := check.NewProgram(parser.Parse)
	var errs lang.ErrorList
	errs.Append(err)
	var rules []*check.Rule
	for _, path := range paths {
		m, err := prog.Load(path)
		if err != nil {
			errs.Append(err)
			continue
		}
		if len(m.File.Rules) == 0 {
			errs.Add(lang.Pos{File: path}, "no rules in this file")
		}
		for _, d := range m.File.Rules {
			r, err := m.Rule(d.Name)
			if err != nil {
				errs.Append(err)
				continue
			}
			rules = append(rules, r)
		}
	}
	return rules, errs
}

// compilePartitioned searches the partition plan, reports it (its
// report replaces rep, keeping rep's sections), and lowers its
// execution graph.
func compilePartitioned(g *ir.Graph, m *Model, dir string, opts Options, copts codegen.Options, rep *report.Report) (*codegen.Compiled, *report.Report, error) {
	p := opts.progress()
	cg, err := cost.NewGraph(g)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", m.Path, err)
	}
	popt := partition.Options{Memory: opts.Memory, Objective: opts.Objective, Seed: partition.DefaultSeed, Progress: func(part, parts int) { p.Show("partitioning: %d of %d", part, parts) }}
	in := PartitionInput{Model: m.Graph.Name, File: m.Path, Train: opts.Train != nil, Devices: opts.Devices, Pipeline: opts.Pipeline, AlwaysPipeline: opts.AlwaysPipeline}
	prep, pipe, err := partitionPlans(cg, in, popt)
	if err != nil {
		return nil, nil, err
	}
	for _, s := range rep.Sections {
		prep.SetSection(s)
	}
	var eg *execution.Graph
	if prep.Pipelines != nil && prep.Pipelines.Chosen {
		p.Show("pipeline: %d stages", len(pipe.plan.Stages))
		eg, err = pipe.graph(cg, opts.Devices)
	} else {
		eg, err = partitionGraph(cg, prep)
	}
	if err != nil {
		return nil, nil, err
	}
	p.Show("lowering %d operators on %d devices", len(g.Nodes), opts.Devices)
	c, err := codegen.CompilePartitioned(eg, g, dir, copts)
	return c, prep, err
}

// PartitionInput is what Partition reports on.
type PartitionInput struct {
	Model, File string
	Train       bool
	Devices     int
	// TradeOff adds the memory trade-off table (several more searches).
	TradeOff bool
	// Strategy, when not empty, names a plan (a report.json, edited) to
	// price beside the optimum.
	Strategy string
	// Pipeline adds the pipeline plans of a training graph, GraphPipe's
	// and the sequential pipeline's (analysis/stages); AlwaysPipeline,
	// with it, chooses GraphPipe's whatever its step.
	Pipeline, AlwaysPipeline bool
}

// partitionGraph is the execution graph of the partition plan reported.
func partitionGraph(g *cost.Graph, r *report.Report) (*execution.Graph, error) {
	chosen, err := report.FromPlan(g, r.Plan)
	if err != nil {
		return nil, err
	}
	return execution.Build(g, chosen)
}

// Partition searches the partition plan of g over in.Devices, runs the
// baselines, simulates the plans, chooses the best within the memory
// limit (partition.Run) and reports it, pricing in.Strategy too; with
// in.Pipeline, GraphPipe's pipeline plan is chosen where it is faster
// (report.Pipelines).
func Partition(g *cost.Graph, in PartitionInput, opt partition.Options) (*report.Report, error) {
	r, _, err := partitionPlans(g, in, opt)
	return r, err
}

// partitionPlans is Partition, also returning GraphPipe's plan (nil
// without in.Pipeline or where there is none).
func partitionPlans(g *cost.Graph, in PartitionInput, opt partition.Options) (*report.Report, *pipelinePlan, error) {
	out, err := partition.Run(g, in.Devices, opt, in.TradeOff)
	if err != nil {
		return nil, nil, err
	}
	ri := &report.Input{Model: in.Model, File: in.File, Train: in.Train, Graph: g, Coarse: partition.Coarsen(g),
		Outcome: out, MemoryLimit: opt.Memory}
	if in.Strategy != "" {
		if ri.Checked, err = checkStrategy(g, in.Strategy, in.Devices); err != nil {
			return nil, nil, fmt.Errorf("--strategy %s: %w", in.Strategy, err)
		}
		ri.CheckedFile = in.Strategy
	}
	r := report.Partition(ri)
	if !in.Pipeline {
		return r, nil, nil
	}
	var pipe *pipelinePlan
	r.Pipelines, pipe = pipelinePlans(g, in.Devices, out.Topology, opt.Memory)
	faster := pipe != nil && out.Objective == partition.Time && pipe.plan.Seconds < r.StepSeconds
	r.Pipelines.Asked = pipe != nil && in.AlwaysPipeline && !faster
	r.Pipelines.Chosen = faster || r.Pipelines.Asked
	if in.AlwaysPipeline && pipe == nil {
		return r, nil, fmt.Errorf("--pipeline=always: the model has no pipeline plan: %s", r.Pipelines.Error)
	}
	return r, pipe, nil
}

// pipelinePlan is GraphPipe's plan and the layers it was searched on.
type pipelinePlan struct {
	layers *stages.Layers
	plan   *stages.Plan
}

// graph is the plan's execution graph over devices, its units in the
// order of the plan's schedule.
func (pp *pipelinePlan) graph(g *cost.Graph, devices int) (*execution.Graph, error) {
	parts, err := pp.plan.Parts(g, pp.layers)
	if err != nil {
		return nil, err
	}
	eg, err := execution.BuildStaged(g, parts, devices)
	if err != nil {
		return nil, err
	}
	if eg.Sequence, err = pp.plan.Order(eg, pp.layers); err != nil {
		return nil, err
	}
	return eg, nil
}

// pipelinePlans are GraphPipe's pipeline plan of training graph g and
// the sequential pipeline's, on the devices of t, and GraphPipe's for
// compiling; where there are none, the report says why (the partition
// plan stands without them).
func pipelinePlans(g *cost.Graph, devices int, t *cost.Topology, memory int64) (*report.Pipelines, *pipelinePlan) {
	ls, err := stages.NewLayers(g, t.Roofline(0))
	if err != nil {
		return &report.Pipelines{Error: err.Error()}, nil
	}
	opt := stages.Options{Topology: t, Devices: devices, Memory: memory}
	var plans []*stages.Plan
	for _, method := range []string{stages.GraphPipe, stages.Sequential} {
		p, err := stages.Search(ls, method, opt)
		if err != nil {
			return &report.Pipelines{Layers: len(ls.Layers), Batch: ls.Batch, Error: err.Error()}, nil
		}
		plans = append(plans, p)
	}
	return report.NewPipelines(ls, plans...), &pipelinePlan{ls, plans[0]}
}

// checkStrategy prices the plan in path, which must be one for devices.
func checkStrategy(g *cost.Graph, path string, devices int) (*partition.Result, error) {
	rp, err := report.ReadPlan(path)
	if err != nil {
		return nil, err
	}
	p, err := report.FromPlan(g, rp)
	if err != nil {
		return nil, err
	}
	if p.Devices() != devices {
		return nil, fmt.Errorf("the plan is for %d devices (steps %v), not the %d of --devices", p.Devices(), p.Factors, devices)
	}
	c, err := g.Evaluate(p)
	if err != nil {
		return nil, err
	}
	return &partition.Result{Plan: p, Cost: c, Exact: true}, nil
}

// paramBytes is the memory g's parameters take as tensors
// (tensor.ElementBytes an element), as initialParams holds them.
func paramBytes(g *ir.Graph) int64 {
	vals := make([]*ir.Value, len(g.Params))
	for i, p := range g.Params {
		vals[i] = p.Value
	}
	return exec.ValuesBytes(vals)
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

// offeredBackends are the backends of list that the plan's
// contractions are offered to: the host's libraries where the host
// module is emitted (placed by timing the host's kernels), the GPU's
// where the PTX is (chosen where the plan runs: runtime/cuda).
func offeredBackends(list, emit []string) []string {
	var out []string
	for _, b := range list {
		module := cpu.Module
		if plan.IsGPUBackend(b) {
			module = "ptx"
		}
		if emit == nil || slices.Contains(emit, module) {
			out = append(out, b)
		}
	}
	return out
}

// warnUnofferedGPU says which GPU libraries of asked get no step: those
// the PTX is not built for (not in offered), all of them in a mode they
// do not compute.
func warnUnofferedGPU(asked, offered []string, mode precision.Mode) {
	for _, b := range asked {
		switch {
		case !plan.IsGPUBackend(b):
		case !slices.Contains(offered, b):
			toolchain.Warn("--backends %s: no %s step: the PTX is not built (--emit)", b, b)
		case !codegen.GPULibrariesCompute(mode):
			toolchain.Warn("--backends %s: no %s step: the GPU's libraries compute f32 and tf32, not %s", b, b, mode)
		}
	}
}

// hostGroups reports whether a placement group of p has a host
// library's candidate, which placement times here.
func hostGroups(p *plan.Plan) bool {
	return slices.ContainsFunc(p.Placement, func(pg plan.PlaceGroup) bool { return len(pg.HostCandidates()) > 1 })
}

// gpuGroups reports whether a placement group of p has a GPU library's
// candidate: the plan keeps its groups for the GPU.
func gpuGroups(p *plan.Plan) bool {
	return slices.ContainsFunc(p.Placement, func(pg plan.PlaceGroup) bool {
		return slices.ContainsFunc(pg.Candidates, plan.IsGPUBackend)
	})
}

// choseLibrary reports whether placement put any part of p on a library.
func choseLibrary(p *plan.Plan) bool {
	for _, pg := range p.Placement {
		if pg.Chosen != plan.Generated {
			return true
		}
	}
	return false
}

// removeUnused removes from dir the files of old's modules that p does
// not use (a plan compiled again in the same folder).
func removeUnused(dir string, old, p *plan.Plan) {
	used := map[string]bool{}
	for _, m := range p.Modules {
		for _, f := range append(slices.Clone(m.Files), m.IR...) {
			used[f.Path] = true
		}
	}
	for _, m := range old.Modules {
		for _, f := range append(slices.Clone(m.Files), m.IR...) {
			if !used[f.Path] {
				os.Remove(filepath.Join(dir, f.Path))
			}
		}
	}
}
