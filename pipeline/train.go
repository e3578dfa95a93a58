package pipeline

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"

	"tofuc/analysis/autodiff"
	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/runtime/exec"
	"tofuc/runtime/tensor"
)

// ErrDiverged is the error of a step whose loss is NaN or infinite.
var ErrDiverged = errors.New("training diverged")

// Loop runs a training graph (autodiff.TrainingGraph) step after step on a backend,
// feeding each step's updated parameters to the next. A compiled backend
// compiles the graph once, at the first step.
type Loop struct {
	Graph *ir.Graph
	// Next maps each trained parameter to the output holding its update
	// (autodiff.TrainingGraph's second result).
	Next    map[string]string
	session *exec.Session
	seed    uint64
}

// NewLoop prepares a training loop on backend b; parameters missing at
// the first step are initialised from seed.
func NewLoop(g *ir.Graph, next map[string]string, b exec.Backend, seed uint64) *Loop {
	return &Loop{Graph: g, Next: next, session: exec.NewSession(g, b, seed), seed: seed}
}

// Close releases what the backend prepared.
func (l *Loop) Close() error { return l.session.Close() }

// Step runs training step step (1-based) on inputs with params and
// returns the loss and the parameters for the next step (those without
// a gradient keep their values); the inputs a step sets (Adam's step
// number, dropout's seed: autodiff.StepValues) are added unless given.
// A loss that is NaN or infinite is an error: training diverged.
func (l *Loop) Step(step int, inputs, params map[string]*tensor.Tensor) (loss float64, next map[string]*tensor.Tensor, err error) {
	res, err := l.session.Run(WithStepValues(l.Graph.Inputs, inputs, step, l.seed), params)
	if err != nil {
		return 0, nil, fmt.Errorf("step %d: %w", step, err)
	}
	loss = res.Outputs[autodiff.LossOutput].Flat(0)
	if math.IsNaN(loss) || math.IsInf(loss, 0) {
		return loss, nil, fmt.Errorf("step %d: the loss is %g: %w (try a smaller --lr)", step, loss, ErrDiverged)
	}
	next = res.Params
	for p, out := range l.Next {
		next[p] = res.Outputs[out]
	}
	return loss, next, nil
}

// WithStepValues is inputs with the values of step added for the graph
// inputs that take them and are not given (StepTensors).
func WithStepValues(graphInputs []*ir.Value, inputs map[string]*tensor.Tensor, step int, seed uint64) map[string]*tensor.Tensor {
	dtypeOf := func(name string) (lang.DType, bool) {
		i := slices.IndexFunc(graphInputs, func(in *ir.Value) bool { return in.Name == name })
		if i < 0 {
			return lang.Invalid, false
		}
		return graphInputs[i].DType, true
	}
	given := func(name string) bool { _, ok := inputs[name]; return ok }
	out := maps.Clone(inputs)
	if out == nil {
		out = map[string]*tensor.Tensor{}
	}
	maps.Copy(out, StepTensors(dtypeOf, given, step, seed))
	return out
}

// StepTensors are the inputs a training loop sets at step (1-based) of a
// run seeded with seed (autodiff.StepValues: Adam's step, dropout's
// seed): those the graph takes, of its dtypes (dtypeOf), that the
// caller did not give.
func StepTensors(dtypeOf func(name string) (lang.DType, bool), given func(name string) bool, step int, seed uint64) map[string]*tensor.Tensor {
	out := map[string]*tensor.Tensor{}
	for name, v := range autodiff.StepValues(step, seed) {
		if dt, takes := dtypeOf(name); takes && !given(name) {
			out[name] = tensor.Scalar(dt, v)
		}
	}
	return out
}
