package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"tofuc/codegen/toolchain"
	"tofuc/lang"
	"tofuc/parser"
	"tofuc/pipeline"

	"tofuc/analysis/check"
	"tofuc/analysis/cost"
	"tofuc/analysis/partition"
	"tofuc/lang/ir"
	"tofuc/lang/precision"
)

// partitionFlags are the flags of `tofuc partition`.
type partitionFlags struct {
	model, reportDir, strategy, factors string
	topology, objective                 string
	devices                             int
	memory                              int64
	seed                                uint64
	sets                                []string
	train                               trainFlags
	// tradeOff adds the memory trade-off table (several more searches).
	tradeOff bool
	// pipeline adds the pipeline plans.
	pipeline bool
}

func runPartition(args []string, stdout, stderr io.Writer) int {
	fs := flagSet("partition", stderr)
	var f partitionFlags
	fs.IntVar(&f.devices, "devices", 0, "the number of devices N (required)")
	fs.StringVar(&f.reportDir, "report", "", "write report.txt, report.json and report.html into DIR (created if missing)")
	fs.BoolVar(&f.tradeOff, "memory-tradeoff", false, "with --report: add the memory trade-off table (five more searches, most of the command's time)")
	fs.Var((*byteSize)(&f.memory), "memory", "the memory per device, e.g. 80GB or 16GiB (bytes without a unit; 0: unlimited)")
	fs.BoolVar(&f.pipeline, "pipeline", false, "with --train: add pipeline plans (GraphPipe's stage graph and a sequential pipeline), simulated on the same topology")
	fs.StringVar(&f.strategy, "strategy", "", "price the plan in FILE (a report.json, edited) beside the optimum")
	fs.StringVar(&f.factors, "factors", "", "the workers per recursion step, e.g. 4,2 (default: N's prime factors, largest first)")
	fs.StringVar(&f.model, "model", "", "the model (default: the only one)")
	fs.StringArrayVar(&f.sets, "set", nil, "override a model attribute, NAME=VALUE (repeatable)")
	fs.StringVar(&f.topology, "topology", "", "the machine plans are simulated on: "+strings.Join(cost.TopologyNames(), ", ")+", or a topology FILE (JSON) (default: h100-nvlink up to 8 devices, h100-2x8-ib up to 16, h100-4x8-ib up to 32)")
	fs.StringVar(&f.objective, "objective", partition.Time, "what the plan minimises: time (the simulated step) or bytes (communicated per step)")
	fs.Uint64Var(&f.seed, "seed", partition.DefaultSeed, "the seed of the time objective's MCMC refinement")
	f.train.register(fs)
	if status, done := parseFlags(fs, args, stdout); done {
		return status
	}
	factors, err := f.validate(fs.NArg(), fs.Changed)
	if err != nil {
		return usageError(stderr, "partition", "%v", err)
	}
	set, err := pipeline.ParseSets(f.sets)
	if err != nil {
		return usageError(stderr, "partition", "%v", err)
	}
	g, name, err := partitionGraph(fs.Arg(0), f, set)
	if err != nil {
		return fail(stderr, err)
	}
	given := f.topology != ""
	if !given {
		f.topology = partition.DefaultTopology(f.devices)
	}
	topo, err := cost.LoadTopology(f.topology)
	if err != nil {
		return usageError(stderr, "partition", "--topology: %v", err)
	}
	switch {
	case len(topo.Devices) < f.devices && !given:
		return usageError(stderr, "partition", "no built-in topology has %d devices (the largest, %s, has %d): give --topology FILE", f.devices, f.topology, len(topo.Devices))
	case len(topo.Devices) < f.devices:
		return usageError(stderr, "partition", "--topology: %s has %d devices, fewer than --devices %d", topo.Name, len(topo.Devices), f.devices)
	}
	if err := topo.CheckLinked(f.devices); err != nil {
		return usageError(stderr, "partition", "--topology: %v", err)
	}
	if topo.HostProcess && f.devices > 1 {
		toolchain.Warn("--topology %s: its devices share one process's threads (host_process), which the search does not model: it simulates them running at once (tofuc run --runs --topology simulates a compiled plan's sharing)", topo.Name)
	}
	opt := partition.Options{Factors: factors, Memory: f.memory, Objective: f.objective, Topology: topo, Seed: f.seed}
	p := newProgress(stderr)
	opt.Progress = func(part, parts int) { p.Show("searching: %d of %d", part, parts) }
	r, err := pipeline.Partition(g, pipeline.PartitionInput{Model: name, File: fs.Arg(0), Train: f.train.train, Devices: f.devices, TradeOff: f.tradeOff, Strategy: f.strategy, Pipeline: f.pipeline}, opt)
	p.done()
	if err != nil {
		return fail(stderr, err)
	}
	r.Summary(stdout)
	if f.reportDir != "" {
		if err := r.Write(f.reportDir); err != nil {
			return fail(stderr, err)
		}
		fmt.Fprintf(stdout, "report: %s/report.{txt,json,html}\n", strings.TrimRight(f.reportDir, "/"))
	}
	if r.OverLimitBytes > 0 {
		fmt.Fprintf(stderr, "tofuc partition: no plan fits in %s per device; the best is %s over\n", lang.FormatBytes(f.memory), lang.FormatBytes(r.OverLimitBytes))
		return exitUser
	}
	return exitOK
}

// validate checks the flags; it returns the factors (nil: default).
func (f *partitionFlags) validate(nargs int, changed func(string) bool) ([]int, error) {
	switch {
	case nargs != 1:
		return nil, fmt.Errorf("expected one MODEL file")
	case f.devices < 2 || f.devices > partition.MaxDevices:
		return nil, fmt.Errorf("--devices must be 2 to %d", partition.MaxDevices)
	case f.memory < 0:
		return nil, fmt.Errorf("--memory must not be negative")
	case f.pipeline && !f.train.train:
		return nil, fmt.Errorf("--pipeline goes with --train (a pipeline runs a training step's micro-batches)")
	case f.tradeOff && f.reportDir == "":
		return nil, fmt.Errorf("--memory-tradeoff goes with --report (the table is the report's)")
	case !f.train.train && (changed("loss") || changed("optimizer") || changed("lr") || changed("loss-scale")):
		return nil, fmt.Errorf("--loss, --optimizer, --lr, --loss-scale, --lr-schedule and --clip-norm go with --train")
	case f.objective != partition.Bytes && f.objective != partition.Time:
		return nil, fmt.Errorf("--objective must be %s or %s", partition.Time, partition.Bytes)
	case changed("seed") && f.objective != partition.Time:
		return nil, fmt.Errorf("--seed goes with --objective time (the MCMC refinement)")
	}
	if err := f.train.validate(); err != nil {
		return nil, err
	}
	if f.factors == "" {
		return nil, nil
	}
	var factors []int
	for _, s := range strings.Split(f.factors, ",") {
		k, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("--factors %q: expected integers separated by commas", f.factors)
		}
		factors = append(factors, k)
	}
	return factors, partition.CheckFactors(factors, f.devices)
}

// partitionGraph loads the model's graph (its training graph with
// --train), its decomposed operators run decomposed
// (partition.Decompose), prepared for pricing.
func partitionGraph(path string, f partitionFlags, set map[string]ir.AttrValue) (*cost.Graph, string, error) {
	prog, err := check.NewProgram(parser.Parse)
	if err != nil {
		return nil, "", err
	}
	m, _, err := pipeline.LoadFile(prog, path)
	if err != nil {
		return nil, "", err
	}
	g, err := m.Model(f.model, set)
	if err != nil {
		return nil, "", err
	}
	name := g.Name
	// batch_norm_train runs as its statistics and normalisation, so that
	// the batch can be split (partition.Decompositions).
	if g, err = partition.Decompose(g, m); err != nil {
		return nil, "", err
	}
	if f.train.train {
		if g, _, err = trainingGraph(m, g, &f.train, precision.Exact); err != nil {
			return nil, "", err
		}
	}
	cg, err := cost.NewGraph(g)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", path, err)
	}
	return cg, name, nil
}
