package main

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/pflag"

	"tofuc/analysis/autodiff"
	"tofuc/analysis/check"
	"tofuc/lang/ir"
	"tofuc/lang/precision"
	"tofuc/pipeline"
)

// trainFlags are the flags of commands that can work on a model's
// training graph.
type trainFlags struct {
	train          bool
	loss, optimize string
	lr             float64
	lossScale      float64
	schedule       string
	clipNorm       float64
}

func (f *trainFlags) register(fs *pflag.FlagSet) {
	fs.BoolVar(&f.train, "train", false, "work on the model's training graph (forward, loss, backward, update)")
	fs.StringVar(&f.loss, "loss", "cross_entropy", "the training loss on the model's first output: "+strings.Join(autodiff.Losses, ", "))
	fs.StringVar(&f.optimize, "optimizer", "sgd", "the optimizer: "+strings.Join(autodiff.Optimizers, ", "))
	fs.Float64Var(&f.lr, "lr", 0, "the learning rate (0: the optimizer's default)")
	fs.Float64Var(&f.lossScale, "loss-scale", 0, "static loss scale, a power of two (0: the precision's default, 1024 in f16, else 1)")
	fs.StringVar(&f.schedule, "lr-schedule", "", "the learning rate's schedule: a decay (none, step, exponential, linear, cosine) and settings, e.g. cosine,warmup=100,total=5000,final=0.05 (docs/training.md)")
	fs.Float64Var(&f.clipNorm, "clip-norm", 0, "clip the gradients to this global norm (0: no clipping)")
}

// changed reports whether a training flag was given (an error without
// --train, rather than being ignored).
func (f *trainFlags) changed(fs *pflag.FlagSet) bool {
	return fs.Changed("loss") || fs.Changed("optimizer") || fs.Changed("lr") || fs.Changed("steps") || fs.Changed("loss-scale") ||
		fs.Changed("lr-schedule") || fs.Changed("clip-norm")
}

// choices are the training choices the flags give (nil without --train).
func (f *trainFlags) choices() *pipeline.TrainChoices {
	if !f.train {
		return nil
	}
	return f.given()
}

// given are the training choices the flags give, with --train or not.
func (f *trainFlags) given() *pipeline.TrainChoices {
	return &pipeline.TrainChoices{Loss: f.loss, Optimizer: f.optimize, LR: f.lr, LossScale: f.lossScale, Schedule: f.schedule, ClipNorm: f.clipNorm}
}

// validate rejects unknown losses and optimizers and bad schedules
// (usage errors).
func (f *trainFlags) validate() error { return f.given().Validate() }

// trainingGraph builds the training graph of a model of m, to be
// computed in mode p.
func trainingGraph(m *check.Module, g *ir.Graph, f *trainFlags, p precision.Mode) (*ir.Graph, map[string]string, error) {
	opts := f.given().Options(p)
	tg, next, err := autodiff.TrainingGraph(g, m, opts)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: training graph of %s: %w", m.Path, g.Name, err)
	}
	return tg, next, nil
}

// summarise prints a graph's operator counts by role.
func summarise(w io.Writer, path string, g *ir.Graph) {
	roles := map[string]int{}
	for _, n := range g.Nodes {
		r := n.Role
		if r == "" {
			r = "forward"
		}
		roles[r]++
	}
	var parts []string
	for _, r := range []string{"forward", "loss", "backward", "gradient sum", "update"} {
		if roles[r] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", roles[r], r))
		}
	}
	instances := map[*ir.Instance]bool{}
	for _, n := range g.Nodes {
		instances[n.Inst] = true
	}
	fmt.Fprintf(w, "%s: %s: %s (%s), %s, %s, %s, %s\n", path, g.Name, count(len(g.Nodes), "operator"), strings.Join(parts, ", "),
		count(len(instances), "distinct instance"), count(len(g.Params), "parameter"), count(len(g.Inputs), "input"), count(len(g.Outputs), "output"))
}

// modelNames lists the models of a module to summarise or train: the one
// named, or all.
func modelNames(m *check.Module, only string) []string {
	if only != "" {
		return []string{only}
	}
	var out []string
	for _, md := range m.File.Models {
		out = append(out, md.Name)
	}
	sort.Strings(out)
	return out
}
