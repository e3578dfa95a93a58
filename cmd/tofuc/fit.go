package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"tofuc/lang/ir"
	"tofuc/lang/precision"
	"tofuc/pipeline"
	"tofuc/runtime/npy"
	"tofuc/runtime/planio"
	"tofuc/runtime/tensor"
)

type fitFlags struct {
	model, out, params, resume string
	sets, data                 []string
	epochs, every, stopAfter   int
	holdout                    float64
	seed                       uint64
	train                      trainFlags
	backend                    string
	threads                    int
	precision                  precision.Mode
}

func runTrain(args []string, stdout, stderr io.Writer) int {
	fs := flagSet("train", stderr)
	var f fitFlags
	fs.StringArrayVar(&f.data, "data", nil, "the dataset: NAME=PATH.npy for an input (memory-mapped; the first dimension indexes the samples), or PATH.npz holding one array per input (repeatable)")
	fs.StringVar(&f.out, "out", "", "directory for the parameters, checkpoints, history and loss curve (required)")
	fs.IntVar(&f.epochs, "epochs", 1, "passes over the training samples")
	fs.Float64Var(&f.holdout, "holdout", 0.1, "fraction of the samples held out and evaluated after each epoch (0 to 0.5)")
	fs.IntVar(&f.every, "checkpoint-every", 0, "also write a checkpoint every N steps (0: at the end of each epoch only)")
	fs.IntVar(&f.stopAfter, "stop-after", 0, "stop after N steps in all, with a checkpoint (0: run every epoch)")
	fs.StringVar(&f.resume, "resume", "", "continue from a checkpoint (OUT/checkpoints/step-N.npz)")
	fs.StringVar(&f.params, "params", "", "initial parameters, one .npz (missing ones are initialised from the seed)")
	fs.StringVar(&f.model, "model", "", "the model to train (default: the only one)")
	fs.StringArrayVar(&f.sets, "set", nil, "override a model attribute, NAME=VALUE (repeatable; batch is the mini-batch size)")
	fs.Uint64Var(&f.seed, "seed", 0, "seed of the parameters, the held-out split, each epoch's order and dropout's masks")
	fs.StringVar(&f.backend, "backend", "cpu", "how to run it: cpu (compiled host kernels), interp (the reference interpreter) or simt (compiled GPU kernels, emulated)")
	fs.IntVar(&f.threads, "threads", 0, "host threads (0: all cores)")
	registerPrecision(fs, &f.precision, "")
	f.train.register(fs)
	if status, done := parseFlags(fs, args, stdout); done {
		return status
	}
	f.train.train = true
	switch {
	case fs.NArg() != 1:
		return usageError(stderr, "train", "expected one MODEL file")
	case f.out == "":
		return usageError(stderr, "train", "--out DIR is required")
	case len(f.data) == 0:
		return usageError(stderr, "train", "--data is required: NAME=PATH.npy for each input, or PATH.npz")
	case f.epochs < 1:
		return usageError(stderr, "train", "--epochs must be at least 1")
	case f.every < 0 || f.stopAfter < 0:
		return usageError(stderr, "train", "--checkpoint-every and --stop-after must not be negative")
	case f.holdout < 0 || f.holdout > 0.5:
		return usageError(stderr, "train", "--holdout must be 0 to 0.5")
	case !slices.Contains(pipeline.BackendNames, f.backend):
		return usageError(stderr, "train", "unknown backend %q (expected %s)", f.backend, strings.Join(pipeline.BackendNames, ", "))
	case checkThreads(f.threads) != nil:
		return usageError(stderr, "train", "%v", checkThreads(f.threads))
	case f.train.validate() != nil:
		return usageError(stderr, "train", "%v", f.train.validate())
	case f.resume != "" && f.params != "":
		return usageError(stderr, "train", "--params and --resume: a resumed run's parameters are its checkpoint's")
	}
	if _, err := pipeline.ParseSets(f.sets); err != nil {
		return usageError(stderr, "train", "%v", err)
	}
	if err := fitModel(fs.Arg(0), f, stdout, stderr); err != nil {
		return fail(stderr, err)
	}
	return exitOK
}

// fitModel trains the model as tofuc train does: the training graph of
// the model with train = true, evaluated with train = false, where the
// model has a train attribute the user did not set.
func fitModel(path string, f fitFlags, stdout, stderr io.Writer) error {
	data, closeData, err := readDataset(f.data)
	if err != nil {
		return err
	}
	defer closeData()
	trainModel, evalModel, err := loadFitModels(path, f)
	if err != nil {
		return err
	}
	tg, next, err := trainingGraph(trainModel.Module, trainModel.Graph, &f.train, f.precision)
	if err != nil {
		return err
	}
	opts, err := compileOptions(1, 0, "", false, f.precision, nil, &f.train, false)
	if err != nil {
		return err
	}
	trainB, err := pipeline.NewBackend(f.backend, trainModel, opts, f.threads)
	if err != nil {
		return err
	}
	opts.Train = nil
	evalB, err := pipeline.NewBackend(f.backend, evalModel, opts, f.threads)
	if err != nil {
		return err
	}
	params, err := initialParams(trainModel, f.params)
	if err != nil {
		return err
	}
	fit := &pipeline.Fit{Train: tg, Next: next, TrainBackend: trainB, Eval: evalModel.Graph, EvalBackend: evalB, Loss: f.train.loss, Data: data,
		FitOptions: pipeline.FitOptions{Epochs: f.epochs, Holdout: f.holdout, Seed: f.seed, Dir: f.out, CheckpointEvery: f.every, StopAfter: f.stopAfter,
			Recipe: f.recipe(trainModel.Graph.Name)}}
	bar := newFitProgress(stdout, stderr)
	fit.Progress = bar.event
	final, hist, err := fit.Run(params, f.resume)
	bar.end()
	if err != nil {
		return err
	}
	return writeFit(f.out, trainModel.Graph, final, hist, stdout)
}

// recipe says how the run trains, for its checkpoints: what a resumed
// run must repeat (docs/training.md).
func (f *fitFlags) recipe(model string) string {
	sets := slices.Clone(f.sets)
	slices.Sort(sets)
	return fmt.Sprintf("model %s; set [%s]; loss %s; optimizer %s; lr %g; lr schedule %q; clip norm %g; loss scale %g; precision %s",
		model, strings.Join(sets, " "), f.train.loss, f.train.optimize, f.train.lr, f.train.schedule, f.train.clipNorm, f.train.lossScale, f.precision)
}

// loadFitModels loads the model to train and the one to evaluate.
func loadFitModels(path string, f fitFlags) (train, eval *pipeline.Model, err error) {
	set, _ := pipeline.ParseSets(f.sets)
	if train, err = pipeline.Load(path, f.model, set); err != nil {
		return nil, nil, err
	}
	_, given := set["train"]
	if given || !hasAttr(train, "train") {
		return train, train, nil
	}
	trainSet, evalSet := withTrain(set, true), withTrain(set, false)
	if train, err = pipeline.Load(path, f.model, trainSet); err != nil {
		return nil, nil, err
	}
	eval, err = pipeline.Load(path, f.model, evalSet)
	return train, eval, err
}

// withTrain is set with the train attribute.
func withTrain(set map[string]ir.AttrValue, train bool) map[string]ir.AttrValue {
	out := map[string]ir.AttrValue{"train": {Kind: ir.AttrBool, Bool: train}}
	for k, v := range set {
		out[k] = v
	}
	return out
}

// hasAttr says whether the model declares a boolean attribute name.
func hasAttr(m *pipeline.Model, name string) bool {
	for _, md := range m.Module.File.Models {
		if md.Name != m.Graph.Name {
			continue
		}
		for _, a := range md.Attrs {
			if a.Name == name {
				return true
			}
		}
	}
	return false
}

// initialParams are the model's weights and the parameters of an .npz.
func initialParams(m *pipeline.Model, path string) (map[string]*tensor.Tensor, error) {
	params := map[string]*tensor.Tensor{}
	for name, t := range m.Weights {
		params[name] = t
	}
	if path == "" {
		return params, nil
	}
	given, err := npy.ReadNPZ(path)
	if err != nil {
		return nil, fmt.Errorf("--params: %w", err)
	}
	if err := matchParams(m.Graph, given); err != nil {
		return nil, fmt.Errorf("--params: %w", err)
	}
	for name, t := range given {
		params[name] = t
	}
	return params, nil
}

// readDataset opens the --data arrays by input name.
func readDataset(specs []string) (map[string]npy.Rows, func(), error) {
	data := map[string]npy.Rows{}
	var mapped []*npy.Mapped
	closeAll := func() {
		for _, m := range mapped {
			m.Close()
		}
	}
	add := func(name string, r npy.Rows) error {
		if _, dup := data[name]; dup {
			return fmt.Errorf("--data: input %s given twice", name)
		}
		data[name] = r
		return nil
	}
	for _, s := range specs {
		name, path, named := strings.Cut(s, "=")
		var err error
		switch {
		case named:
			var m *npy.Mapped
			if m, err = npy.Map(path); err == nil {
				mapped = append(mapped, m)
				err = add(name, m)
			}
		case filepath.Ext(s) == ".npz":
			var arrays map[string]*tensor.Tensor
			if arrays, err = npy.ReadNPZ(s); err == nil {
				for n, t := range arrays {
					if err = add(n, npy.InMemory{T: t}); err != nil {
						break
					}
				}
			}
		default:
			err = fmt.Errorf("expected NAME=PATH.npy or PATH.npz")
		}
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("--data %s: %w", s, err)
		}
	}
	return data, closeAll, nil
}

// writeFit writes the final parameters (the model's, by their names, and
// the optimizer's state apart) and the history.
func writeFit(dir string, model *ir.Graph, params map[string]*tensor.Tensor, hist *pipeline.History, stdout io.Writer) error {
	var out planio.Folder
	state := optimizerState(model, params)
	out.Tensors("params.npz", count(len(params), "parameter"), params)
	if len(state) > 0 {
		out.Tensors("optimizer.npz", count(len(state), "optimizer state tensor"), state)
	}
	b, err := json.MarshalIndent(hist, "", "  ")
	if err != nil {
		return err
	}
	out.Add("history.json", "the loss of every step and the held-out results", func(w io.Writer) error { _, err := w.Write(b); return err })
	if err := out.Write(dir, stdout); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "loss curve: %s\n", filepath.Join(dir, "loss-curve.html"))
	return nil
}

// fitProgress shows a Fit's progress: a bar on a terminal, a line per
// epoch and checkpoint otherwise.
type fitProgress struct {
	out, bar io.Writer // bar: nil off a terminal
}

func newFitProgress(stdout, stderr io.Writer) *fitProgress {
	p := &fitProgress{out: stdout}
	if f, ok := stderr.(*os.File); ok && isTerminal(f) {
		p.bar = stderr
	}
	return p
}

func (p *fitProgress) event(ev pipeline.FitEvent) {
	switch {
	case ev.Batch == 0: // an epoch's end
		p.clear()
		line := fmt.Sprintf("epoch %d/%d: step %d", ev.Epoch, ev.Epochs, ev.Step)
		if r := ev.Holdout; r != nil {
			line += fmt.Sprintf(", held-out loss %.4g", r.Loss)
			if r.Accuracy >= 0 {
				line += fmt.Sprintf(", accuracy %.2f%%", 100*r.Accuracy)
			}
		}
		fmt.Fprintln(p.out, line)
	case ev.Checkpoint != "":
		p.clear()
		fmt.Fprintf(p.out, "step %d: loss %.4g, checkpoint %s\n", ev.Step, ev.Loss, ev.Checkpoint)
	case p.bar != nil:
		const width = 30
		filled := width * ev.Batch / max(ev.Batches, 1)
		fmt.Fprintf(p.bar, "\r\033[Kepoch %d/%d [%s%s] %d/%d loss %.4g, %.0f samples/s", ev.Epoch, ev.Epochs,
			strings.Repeat("=", filled), strings.Repeat(" ", width-filled), ev.Batch, ev.Batches, ev.Loss, ev.SamplesPerSecond)
	}
}

func (p *fitProgress) clear() {
	if p.bar != nil {
		fmt.Fprint(p.bar, "\r\033[K")
	}
}

func (p *fitProgress) end() { p.clear() }
