package pipeline

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"tofuc/analysis/autodiff"
	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/runtime/exec"
	"tofuc/runtime/npy"
	"tofuc/runtime/safefile"
	"tofuc/runtime/tensor"
)

// A Fit trains a model on a dataset for epochs of mini-batches (tofuc
// train, docs/training.md): each epoch visits the training samples in a
// fresh order drawn from the seed, one step per full mini-batch (a last,
// partial one is left out); after each epoch the held-out samples are
// evaluated on the model's evaluation graph; checkpoints hold everything
// a resumed run needs to continue as if never stopped.
type Fit struct {
	// Train is the training graph (autodiff.TrainingGraph) and Next its
	// parameters' next values; TrainBackend runs it.
	Train        *ir.Graph
	Next         map[string]string
	TrainBackend exec.Backend
	// Eval is the model's graph as evaluated on held-out samples (its
	// batch norms on running statistics, no dropout), run by EvalBackend.
	Eval        *ir.Graph
	EvalBackend exec.Backend
	// Loss is the training loss (autodiff.Losses), which the held-out
	// evaluation computes too.
	Loss string
	// Data are the dataset's arrays by graph input name; their first
	// dimension indexes the samples.
	Data map[string]npy.Rows
	FitOptions
}

// FitOptions choose the schedule of a Fit.
type FitOptions struct {
	Epochs int
	// Holdout is the fraction of the samples held out (0 to 0.5).
	Holdout float64
	Seed    uint64
	// Dir receives the checkpoints, the history and the loss curve.
	Dir string
	// CheckpointEvery writes a checkpoint every that many steps (0:
	// at the end of each epoch only).
	CheckpointEvery int
	// StopAfter, when positive, stops after that many steps in all,
	// writing a checkpoint (an interrupted run, for tests and users).
	StopAfter int
	// Progress, when not nil, is told of every step and evaluation.
	Progress func(FitEvent)
	// Recipe says how the run trains (the model, its attributes, the
	// loss, the optimizer and its rate): a checkpoint records it, and
	// resuming under another recipe is refused.
	Recipe string
}

// FitEvent is what a Fit reports as it goes: a step, or the end of an
// epoch (Batch 0).
type FitEvent struct {
	Epoch, Epochs    int
	Batch, Batches   int // within the epoch
	Step             int // since the start
	Loss             float64
	SamplesPerSecond float64
	Holdout          *EpochResult // set after an epoch's evaluation
	Checkpoint       string       // set when one was written
}

// EpochResult is the held-out evaluation after an epoch.
type EpochResult struct {
	Epoch    int     `json:"epoch"`
	Step     int     `json:"step"`
	Loss     float64 `json:"loss"`
	Accuracy float64 `json:"accuracy"` // -1 for a regression loss
}

// History is a Fit's record: the loss of every step and the held-out
// results of every epoch, saved with each checkpoint.
type History struct {
	Losses  []float64     `json:"losses"`
	Holdout []EpochResult `json:"holdout"`
}

// checkpointState is the JSON beside a checkpoint's parameters.
type checkpointState struct {
	Version int     `json:"version"`
	Step    int     `json:"step"` // steps done
	Recipe  string  `json:"recipe"`
	Seed    uint64  `json:"seed"`
	Samples int     `json:"samples"`
	Batch   int     `json:"batch"`
	Holdout float64 `json:"holdout"`
	History History `json:"history"`
}

const checkpointVersion = 1

// split is the dataset's samples divided into training and held-out
// ones, from the seed.
type split struct{ train, held []int }

// Run trains from params (those missing are drawn from the seed) or
// resumes from the checkpoint at resume, and returns the parameters at
// the end (optimizer state and buffers included) and the history.
func (f *Fit) Run(params map[string]*tensor.Tensor, resume string) (map[string]*tensor.Tensor, *History, error) {
	samples, batch, err := f.shapes()
	if err != nil {
		return nil, nil, err
	}
	sp := f.split(samples)
	if len(sp.train) < batch {
		return nil, nil, fmt.Errorf("%d training samples (of %d, %g held out) make no mini-batch of %d", len(sp.train), samples, f.Holdout, batch)
	}
	perEpoch := len(sp.train) / batch
	if f.Epochs < 1 || f.Epochs > math.MaxInt32/perEpoch {
		return nil, nil, fmt.Errorf("%d epochs of %d steps: the steps must number 1 to %d", f.Epochs, perEpoch, math.MaxInt32)
	}
	total := f.Epochs * perEpoch
	if err := f.evalParamsTrained(); err != nil {
		return nil, nil, err
	}
	hist := &History{}
	done := 0
	if resume != "" {
		if params, done, err = f.resume(resume, samples, batch, total, hist); err != nil {
			return nil, nil, err
		}
	}
	loop := NewLoop(f.Train, f.Next, f.TrainBackend, f.Seed)
	defer loop.Close()
	eval := exec.NewSession(f.Eval, f.EvalBackend, f.Seed)
	defer eval.Close()
	for step := done; step < total; {
		epoch := step / perEpoch
		order := f.order(sp.train, epoch)
		start, first := time.Now(), step%perEpoch
		for b := first; b < perEpoch; b++ {
			inputs, err := f.gather(order[b*batch : (b+1)*batch])
			if err != nil {
				return nil, nil, err
			}
			step++
			loss, next, err := loop.Step(step, inputs, params)
			if err != nil {
				return nil, nil, fmt.Errorf("epoch %d: %w", epoch+1, err)
			}
			params = next
			hist.Losses = append(hist.Losses, loss)
			ev := FitEvent{Epoch: epoch + 1, Epochs: f.Epochs, Batch: b + 1, Batches: perEpoch, Step: step, Loss: loss,
				SamplesPerSecond: float64((b+1-first)*batch) / time.Since(start).Seconds()}
			// A stop at an epoch's end waits for its evaluation.
			stop := step == f.StopAfter && b < perEpoch-1
			if f.CheckpointEvery > 0 && step%f.CheckpointEvery == 0 || stop {
				if ev.Checkpoint, err = f.checkpoint(params, hist, step, samples, batch); err != nil {
					return nil, nil, err
				}
			}
			f.report(ev)
			if stop {
				return params, hist, nil
			}
		}
		ev := FitEvent{Epoch: epoch + 1, Epochs: f.Epochs, Step: step}
		if len(sp.held) > 0 {
			res, err := f.evaluate(eval, sp.held, batch, params)
			if err != nil {
				return nil, nil, fmt.Errorf("epoch %d: held-out evaluation: %w", epoch+1, err)
			}
			res.Epoch, res.Step = epoch+1, step
			hist.Holdout = append(hist.Holdout, res)
			ev.Holdout = &res
		}
		if ev.Checkpoint, err = f.checkpoint(params, hist, step, samples, batch); err != nil {
			return nil, nil, err // (again if --checkpoint-every wrote it: now with the evaluation)
		}
		f.report(ev)
		if step == f.StopAfter {
			return params, hist, nil
		}
	}
	return params, hist, nil
}

// resume reads the checkpoint at path and checks that this run can go
// on from it: the same recipe, seed and split, a step within the run,
// every parameter of the training graph (optimizer state and buffers
// included) and no other.
func (f *Fit) resume(path string, samples, batch, total int, hist *History) (map[string]*tensor.Tensor, int, error) {
	params, st, err := readCheckpoint(path)
	if err != nil {
		return nil, 0, err
	}
	switch {
	case st.Recipe != f.Recipe:
		return nil, 0, fmt.Errorf("%s: a checkpoint of another run (%s); this one is %s", path, st.Recipe, f.Recipe)
	case st.Seed != f.Seed || st.Samples != samples || st.Batch != batch || st.Holdout != f.Holdout:
		return nil, 0, fmt.Errorf("%s: a checkpoint of seed %d, %d samples, batch %d, holdout %g; this run has seed %d, %d samples, batch %d, holdout %g",
			path, st.Seed, st.Samples, st.Batch, st.Holdout, f.Seed, samples, batch, f.Holdout)
	case st.Step < 1 || st.Step > total:
		return nil, 0, fmt.Errorf("%s: a checkpoint after step %d; this run has steps 1 to %d", path, st.Step, total)
	case f.StopAfter > 0 && f.StopAfter <= st.Step:
		return nil, 0, fmt.Errorf("%s: a checkpoint after step %d; the run is to stop after step %d", path, st.Step, f.StopAfter)
	case len(st.History.Losses) != st.Step:
		return nil, 0, fmt.Errorf("%s: a history of %d losses for %d steps", statePath(path), len(st.History.Losses), st.Step)
	}
	for _, p := range f.Train.Params {
		t, ok := params[p.Value.Name]
		if !ok {
			return nil, 0, fmt.Errorf("%s: no parameter %s", path, p.Value.Name)
		}
		params[p.Value.Name] = npy.AsDType(t, p.Value.DType)
	}
	if len(params) != len(f.Train.Params) {
		return nil, 0, fmt.Errorf("%s: %d arrays for the training graph's %d parameters", path, len(params), len(f.Train.Params))
	}
	*hist = st.History
	return params, st.Step, nil
}

// evalParamsTrained checks that the evaluation graph's parameters are
// the training graph's, before a step runs.
func (f *Fit) evalParamsTrained() error {
	trained := map[string]*ir.Value{}
	for _, p := range f.Train.Params {
		trained[p.Value.Name] = p.Value
	}
	for _, p := range f.Eval.Params {
		t := trained[p.Value.Name]
		if t == nil || t.DType != p.Value.DType || !lang.ShapeEqual(t.Shape, p.Value.Shape) {
			return fmt.Errorf("the evaluation graph's parameter %s (%s%s) is not one the training graph trains", p.Value.Name, p.Value.DType, lang.ShapeString(p.Value.Shape))
		}
	}
	return nil
}

func (f *Fit) report(ev FitEvent) {
	if f.Progress != nil {
		f.Progress(ev)
	}
}

// shapes checks the dataset against the training graph's inputs and
// returns the number of samples and the mini-batch size.
func (f *Fit) shapes() (samples, batch int, err error) {
	samples = -1
	for _, in := range f.Train.Inputs {
		if autodiff.SetEachStep(in.Name) {
			continue
		}
		r, ok := f.Data[in.Name]
		if !ok {
			return 0, 0, fmt.Errorf("the dataset has no array for input %s (%s%s)", in.Name, in.DType, lang.ShapeString(in.Shape))
		}
		shape, ok := lang.ConstShape(in.Shape)
		if !ok || len(shape) == 0 {
			return 0, 0, fmt.Errorf("input %s%s: a mini-batch input needs a known first dimension (set the batch size with --set)", in.Name, lang.ShapeString(in.Shape))
		}
		got := r.Shape()
		if len(got) != len(shape) || !slices.Equal(got[1:], shape[1:]) {
			return 0, 0, fmt.Errorf("dataset array %s is %s%v: samples of %v for input %s%s", in.Name, r.DType(), got, shape[1:], in.Name, lang.ShapeString(in.Shape))
		}
		if samples >= 0 && got[0] != samples {
			return 0, 0, fmt.Errorf("dataset array %s has %d samples, the others %d", in.Name, got[0], samples)
		}
		if r.DType().IsFloat() && !in.DType.IsFloat() {
			return 0, 0, fmt.Errorf("dataset array %s is %s, input %s is %s: floats are not converted to integers", in.Name, r.DType(), in.Name, in.DType)
		}
		samples, batch = got[0], shape[0]
	}
	for name := range f.Data {
		if !slices.ContainsFunc(f.Train.Inputs, func(v *ir.Value) bool { return v.Name == name }) {
			return 0, 0, fmt.Errorf("the training graph has no input %s (its inputs: %s)", name, inputNames(f.Train))
		}
	}
	if f.Holdout < 0 || f.Holdout > 0.5 {
		return 0, 0, fmt.Errorf("the held-out fraction must be 0 to 0.5, not %g", f.Holdout)
	}
	return samples, batch, nil
}

func inputNames(g *ir.Graph) string {
	var names []string
	for _, in := range g.Inputs {
		names = append(names, in.Name)
	}
	return fmt.Sprint(names)
}

// split holds out a fraction of the samples, drawn once from the seed.
func (f *Fit) split(samples int) split {
	perm := rand.New(rand.NewPCG(f.Seed, 0x5eed)).Perm(samples)
	held := int(math.Round(f.Holdout * float64(samples)))
	train, heldOut := perm[held:], perm[:held]
	sort.Ints(heldOut)
	return split{train: train, held: heldOut}
}

// order is the training samples' order in an epoch.
func (f *Fit) order(train []int, epoch int) []int {
	out := slices.Clone(train)
	r := rand.New(rand.NewPCG(f.Seed, uint64(epoch)+1))
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// gather is the mini-batch of the samples at rows, by input name, in
// the dtypes of the training graph's inputs.
func (f *Fit) gather(rows []int) (map[string]*tensor.Tensor, error) {
	out := map[string]*tensor.Tensor{}
	for name, r := range f.Data {
		t, err := r.Gather(rows)
		if err != nil {
			return nil, fmt.Errorf("dataset array %s: %w", name, err)
		}
		for _, in := range f.Train.Inputs {
			if in.Name == name {
				t, err = castTo(t, in.DType, name)
				if err != nil {
					return nil, err
				}
			}
		}
		out[name] = t
	}
	return out, nil
}

// castTo converts a dataset's array to an input's dtype: within its
// kind (f64 data for an f32 input; i32 labels for i64), or integers to
// floats (u8 images); floats for an integer input are refused (shapes).
func castTo(t *tensor.Tensor, dt lang.DType, name string) (*tensor.Tensor, error) {
	switch {
	case t.DType == dt:
		return t, nil
	case dt.IsFloat() && t.DType.IsFloat():
		return tensor.FromFloats(dt, t.Shape, t.F), nil
	case !dt.IsFloat() && !t.DType.IsFloat():
		return tensor.FromInts(dt, t.Shape, t.I), nil
	case dt.IsFloat():
		vals := make([]float64, len(t.I))
		for i, v := range t.I {
			vals[i] = tensor.IntToFloat(t.DType, v)
		}
		return tensor.FromFloats(dt, t.Shape, vals), nil
	}
	return nil, fmt.Errorf("dataset array %s is %s, input %s is %s", name, t.DType, name, dt)
}

// evaluate runs the evaluation graph on the held-out samples, a
// mini-batch at a time (the last padded with the first samples, whose
// results are left out), and returns their mean loss and accuracy.
func (f *Fit) evaluate(s *exec.Session, held []int, batch int, params map[string]*tensor.Tensor) (EpochResult, error) {
	res := EpochResult{Accuracy: -1}
	if len(held) == 0 {
		return res, nil
	}
	own := map[string]*tensor.Tensor{}
	for _, p := range f.Eval.Params {
		own[p.Value.Name] = params[p.Value.Name]
	}
	var lossSum, correct float64
	for at := 0; at < len(held); at += batch {
		rows := held[at:min(at+batch, len(held))]
		real := len(rows)
		if len(rows) < batch {
			rows = slices.Clone(rows)
		}
		for len(rows) < batch {
			rows = append(rows, held[0])
		}
		inputs, err := f.gather(rows)
		if err != nil {
			return res, err
		}
		model := map[string]*tensor.Tensor{}
		for _, in := range f.Eval.Inputs {
			model[in.Name] = inputs[in.Name]
		}
		out, err := s.Run(model, own)
		if err != nil {
			return res, err
		}
		l, c, err := f.score(out.Outputs[f.Eval.Outputs[0].Name], inputs, real)
		if err != nil {
			return res, err
		}
		lossSum += l
		correct += c
	}
	res.Loss = lossSum / float64(len(held))
	if f.Loss != "mse" {
		res.Accuracy = correct / float64(len(held))
	}
	return res, nil
}

// score sums the loss of the first n samples of a mini-batch's output
// and their accuracy (the fraction of a sample's predictions that are
// right): cross-entropy of logits or the negative log-likelihood of
// log-probabilities against the labels, or the squared error against the
// target (its mean per sample).
func (f *Fit) score(y *tensor.Tensor, inputs map[string]*tensor.Tensor, n int) (loss, correct float64, err error) {
	if f.Loss == "mse" {
		target := inputs[autodiff.TargetInput]
		per := y.Len() / y.Shape[0]
		for i := range n * per {
			d := y.F[i] - target.Flat(i)
			loss += d * d / float64(per)
		}
		return loss, 0, nil
	}
	labels := inputs[autodiff.LabelsInput]
	classes := y.Shape[len(y.Shape)-1]
	rows := y.Len() / classes
	perSample := rows / y.Shape[0]
	right := 0
	for r := range n * perSample {
		row := y.F[r*classes : (r+1)*classes]
		label := int(labels.I[r])
		if label < 0 || label >= classes {
			return 0, 0, fmt.Errorf("label %d outside the %d classes", label, classes)
		}
		best := 0
		for c, v := range row {
			if v > row[best] {
				best = c
			}
		}
		if best == label {
			right++
		}
		if f.Loss == "nll" {
			loss -= row[label]
			continue
		}
		mx := row[best]
		var sum float64
		for _, v := range row {
			sum += math.Exp(v - mx)
		}
		loss += mx + math.Log(sum) - row[label]
	}
	return loss / float64(perSample), float64(right) / float64(max(perSample, 1)), nil
}

// checkpoint writes the parameters and the state after step into
// Dir/checkpoints, and the history and the loss curve into Dir.
func (f *Fit) checkpoint(params map[string]*tensor.Tensor, hist *History, step, samples, batch int) (string, error) {
	dir := filepath.Join(f.Dir, "checkpoints")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, fmt.Sprintf("step-%d.npz", step))
	if err := npy.WriteNPZ(path, params); err != nil {
		return "", err
	}
	st := checkpointState{Version: checkpointVersion, Step: step, Recipe: f.Recipe, Seed: f.Seed, Samples: samples, Batch: batch, Holdout: f.Holdout, History: *hist}
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return "", err
	}
	if err := safefile.WriteFile(statePath(path), b, 0o644); err != nil {
		return "", err
	}
	if err := safefile.WriteFile(filepath.Join(f.Dir, "loss-curve.html"), LossCurveHTML(hist, f.Epochs), 0o644); err != nil {
		return "", err
	}
	return path, nil
}

func statePath(npz string) string { return npz[:len(npz)-len(filepath.Ext(npz))] + ".json" }

// readCheckpoint reads a checkpoint's parameters and state.
func readCheckpoint(path string) (map[string]*tensor.Tensor, *checkpointState, error) {
	b, err := safefile.ReadFile(statePath(path), 1<<30)
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoint: %w (a checkpoint is STEP.npz with STEP.json beside it)", err)
	}
	var st checkpointState
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, nil, fmt.Errorf("checkpoint %s: %w", statePath(path), err)
	}
	if st.Version != checkpointVersion {
		return nil, nil, fmt.Errorf("checkpoint %s: version %d, this tofuc reads %d", statePath(path), st.Version, checkpointVersion)
	}
	params, err := npy.ReadNPZ(path)
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoint: %w", err)
	}
	return params, &st, nil
}
