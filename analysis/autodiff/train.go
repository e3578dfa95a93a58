package autodiff

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"tofuc/analysis/check"
	"tofuc/lang"
	"tofuc/lang/ir"
)

// TrainOptions choose the loss and the optimizer of a training graph.
type TrainOptions struct {
	Loss      string  // "cross_entropy" (default), "nll" or "mse"
	Optimizer string  // "sgd" (default), "momentum" or "adam"
	LR        float64 // the learning rate; 0 keeps the optimizer's default
	// LossScale, a power of two (0: 1), seeds the loss's gradient with
	// LossScale instead of 1, and multiplies every parameter's gradient
	// by 1/LossScale before its update: static loss scaling, which keeps
	// small gradients inside f16's range where the backward pass's
	// contractions round their factors to f16 (precision.Mode.LossScale).
	// Both steps are exact in binary arithmetic short of overflow, so
	// the update is the unscaled one.
	LossScale float64
	// Schedule, when its Decay or Warmup is set, multiplies the learning
	// rate at each step by the schedule's factor (lr_schedule of the
	// step input): each parameter moves by the factor times the
	// optimizer's step.
	Schedule Schedule
	// ClipNorm, when positive, scales the gradients together so that
	// their global norm (of every trained parameter's, unscaled) is at
	// most ClipNorm, before the optimizer.
	ClipNorm float64
}

// Schedule is a learning-rate schedule: lr_schedule's attributes.
type Schedule struct {
	Decay         string // "" or "none", "step", "exponential", "linear", "cosine"
	Warmup, Total int64
	Every         int64
	Gamma, Final  float64
}

// Decays lists the schedule's decays.
var Decays = []string{"none", "step", "exponential", "linear", "cosine"}

// Active says whether the schedule changes the learning rate.
func (s Schedule) Active() bool { return s.Decay != "" && s.Decay != "none" || s.Warmup > 0 }

// Validate rejects a schedule lr_schedule cannot follow.
func (s Schedule) Validate() error {
	switch {
	case s.Decay != "" && !slices.Contains(Decays, s.Decay):
		return fmt.Errorf("unknown learning-rate decay %q (expected %s)", s.Decay, strings.Join(Decays, ", "))
	case s.Warmup < 0 || s.Total < 0 || s.Every < 0:
		return fmt.Errorf("a learning-rate schedule's steps must not be negative")
	case (s.Decay == "linear" || s.Decay == "cosine") && s.Total <= s.Warmup:
		return fmt.Errorf("a %s decay needs its total steps (%d) beyond the warm-up (%d)", s.Decay, s.Total, s.Warmup)
	case (s.Decay == "step" || s.Decay == "exponential") && !(float32(s.Gamma) > 0 && s.Gamma <= 1):
		return fmt.Errorf("a %s decay's gamma must be in (0, 1] (and not 0 in f32), found %g", s.Decay, s.Gamma)
	case s.Decay == "step" && s.Every < 1:
		return fmt.Errorf("a step decay needs every >= 1 step")
	case !(s.Final >= 0 && s.Final <= 1):
		return fmt.Errorf("a schedule's final factor must be in [0, 1], found %g", s.Final)
	}
	return nil
}

// attrs are lr_schedule's attributes for the schedule.
func (s Schedule) attrs() map[string]ir.AttrValue {
	decay := s.Decay
	if decay == "" {
		decay = "none"
	}
	ints := func(n int64) ir.AttrValue { return ir.AttrValue{Kind: ir.AttrInt, Int: n} }
	floats := func(f float64) ir.AttrValue { return ir.AttrValue{Kind: ir.AttrFloat, Float: f} }
	return map[string]ir.AttrValue{"decay": {Kind: ir.AttrString, Str: decay}, "warmup": ints(s.Warmup),
		"total": ints(max(s.Total, 1)), "every": ints(max(s.Every, 1)), "gamma": floats(s.Gamma), "final": floats(s.Final)}
}

// Losses and Optimizers list the accepted names.
var (
	Losses     = []string{"cross_entropy", "nll", "mse"}
	Optimizers = []string{"sgd", "momentum", "adam"}
)

// Ops resolves operator names (a module's scope).
type Ops interface {
	Op(name string) *lang.OpDecl
}

// Training graph inputs and outputs added to the model's.
const (
	LabelsInput = "labels" // cross-entropy: class ids, the output's shape without its last dimension
	TargetInput = "target" // mse: the output's shape
	StepInput   = "step"   // adam: the step number, 1-based
	LossOutput  = "loss"
	// DropoutSeedInput is an i64 scalar that the training graph's
	// dropouts draw their masks from (dropout_seeded): a fresh value at
	// every step gives fresh masks (StepValues).
	DropoutSeedInput = "dropout_seed"
)

// StepValues are the values of the training graph's inputs that a
// training loop sets at each step (1-based) of a run seeded with seed:
// Adam's step number, and dropout's seed, 32 bits drawn from the step
// and the run's seed (what dropout_seeded reads of it).
func StepValues(step int, seed uint64) map[string]float64 {
	return map[string]float64{StepInput: float64(step), DropoutSeedInput: float64(mix64(seed, uint64(step)) >> 32)}
}

// SetEachStep says whether a training loop sets the graph input called
// name at each step (one of StepValues').
func SetEachStep(name string) bool {
	_, ok := StepValues(0, 0)[name]
	return ok
}

// mix64 hashes two words (SplitMix64's finaliser of their combination).
func mix64(a, b uint64) uint64 {
	z := a*0x9e3779b97f4a7c15 ^ (b + 0x632be59bd9b4e019)
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// trainer builds one training graph.
type trainer struct {
	next  map[string]string // parameter -> the output holding its next value
	ops   Ops
	g     *ir.Graph
	names map[string]bool
	backs map[derivedKey]*derived
}

type derived struct {
	backs []*ir.Instance
	wrt   []int
}

// TrainingGraph extends a model's graph into one training step: the
// forward nodes; a loss on the model's first output; the backward nodes
// derived from each forward node, in reverse, each recording its forward
// node; gradient sums where a value is used more than once; and an
// optimizer update of every parameter. Its outputs are the loss, then each
// parameter's next value (named PARAM.next) and optimizer state; next maps
// each parameter (optimizer state included, initialised to zeros) to the
// output that holds its value for the following step.
func TrainingGraph(model *ir.Graph, ops Ops, opts TrainOptions) (g *ir.Graph, next map[string]string, err error) {
	t := &trainer{ops: ops, names: map[string]bool{}, backs: map[derivedKey]*derived{}, next: map[string]string{},
		g: &ir.Graph{Name: model.Name + ".train", Inputs: append([]*ir.Value(nil), model.Inputs...),
			Params: append([]*ir.Param(nil), model.Params...)}}
	for _, v := range model.Inputs {
		t.names[v.Name] = true
	}
	for _, p := range model.Params {
		t.names[p.Value.Name] = true
	}
	for _, n := range model.Nodes {
		fn := *n
		fn.Role = "forward"
		t.g.Nodes = append(t.g.Nodes, &fn)
		t.names[n.Name] = true
		for _, o := range n.Outputs {
			t.names[o.Name] = true
		}
	}
	if len(model.Outputs) == 0 {
		return nil, nil, fmt.Errorf("model %s has no output", model.Name)
	}
	if t.names[LossOutput] {
		return nil, nil, fmt.Errorf("the model already has a tensor named %s, which the training graph needs as its output", LossOutput)
	}
	if err := t.seedDropouts(); err != nil {
		return nil, nil, err
	}
	loss, err := t.loss(model.Outputs[0], opts.Loss)
	if err != nil {
		return nil, nil, err
	}
	scale, err := t.lossScale(opts.LossScale, loss)
	if err != nil {
		return nil, nil, err
	}
	grads, err := t.backward(loss, scale)
	if err != nil {
		return nil, nil, err
	}
	t.g.Outputs = []*ir.Value{loss}
	if err := t.update(grads, opts); err != nil {
		return nil, nil, err
	}
	return t.g, t.next, nil
}

// seedDropouts makes every dropout in training mode a dropout_seeded of
// the DropoutSeedInput, keeping its place, attributes and output values;
// the k-th one's seed attribute becomes seed * 65536 + k, so that layers
// draw different masks within a step.
func (t *trainer) seedDropouts() error {
	var seed *ir.Value
	k := int64(0)
	for i, n := range t.g.Nodes {
		if n.Inst.Op != "dropout" || !training(n.Inst) {
			continue
		}
		if seed == nil {
			var err error
			if seed, err = t.input(DropoutSeedInput, lang.I64, nil); err != nil {
				return err
			}
		}
		attrs := map[string]ir.AttrValue{}
		for _, a := range n.Inst.Attrs {
			attrs[a.Name] = a.Value
		}
		attrs["seed"] = ir.AttrValue{Kind: ir.AttrInt, Int: attrs["seed"].Int*65536 + k}
		k++
		seeded, err := t.call("dropout_seeded", attrs, n.Role, n.Name, n.Inputs[0], seed)
		if err != nil {
			return err
		}
		t.g.Nodes = t.g.Nodes[:len(t.g.Nodes)-1] // t.call appended it: it takes n's place
		seeded.Name, seeded.Outputs, seeded.Pos, seeded.Origin = n.Name, n.Outputs, n.Pos, n.Origin
		t.g.Nodes[i] = seeded
	}
	return nil
}

// training says whether a dropout instance drops (its training attribute).
func training(inst *ir.Instance) bool {
	for _, a := range inst.Attrs {
		if a.Name == "training" {
			return a.Value.Kind == ir.AttrBool && a.Value.Bool
		}
	}
	return false
}

func (t *trainer) unique(name string) string {
	n := name
	for k := 1; t.names[n]; k++ {
		n = fmt.Sprintf("%s.%d", name, k)
	}
	t.names[n] = true
	return n
}

// call instantiates a stdlib operator and appends its node.
func (t *trainer) call(op string, attrs map[string]ir.AttrValue, role, name string, inputs ...*ir.Value) (*ir.Node, error) {
	decl := t.ops.Op(op)
	if decl == nil {
		return nil, fmt.Errorf("no operator %s for the training graph", op)
	}
	types := make([]check.TensorType, len(inputs))
	for i, v := range inputs {
		types[i] = check.TensorType{DType: v.DType, Shape: v.Shape}
	}
	inst, err := check.Instantiate(decl, attrs, types, lang.Pos{File: "training graph"})
	if err != nil {
		return nil, err
	}
	n := &ir.Node{Name: t.unique(name), Inst: inst, Inputs: inputs, Role: role}
	for _, d := range inst.Outputs {
		vname := n.Name
		if len(inst.Outputs) > 1 {
			vname = t.unique(n.Name + "." + d.Tensor.Name)
		}
		n.Outputs = append(n.Outputs, &ir.Value{Name: vname, DType: d.Tensor.DType, Shape: d.Tensor.Shape})
	}
	t.g.Nodes = append(t.g.Nodes, n)
	return n, nil
}

// input adds an input of the training graph; its name is fixed, so that
// callers can feed it, and must not be taken by the model.
func (t *trainer) input(name string, dt lang.DType, shape []lang.Dim) (*ir.Value, error) {
	if t.names[name] {
		return nil, fmt.Errorf("the model already has a tensor named %s, which the training graph needs as an input", name)
	}
	t.names[name] = true
	v := &ir.Value{Name: name, DType: dt, Shape: shape}
	t.g.Inputs = append(t.g.Inputs, v)
	return v, nil
}

// loss adds the loss on the model's output y.
func (t *trainer) loss(y *ir.Value, kind string) (*ir.Value, error) {
	if !y.DType.IsFloat() {
		return nil, fmt.Errorf("the model's output %s is %s; a loss needs floats", y.Name, y.DType)
	}
	// Cross-entropy on logits, or the negative log-likelihood of
	// log-probabilities (a model ending in log_softmax, as classifiers
	// exported for NegativeLogLikelihoodLoss do): each over the last axis.
	classified := map[string]string{"": "softmax_cross_entropy", "cross_entropy": "softmax_cross_entropy", "nll": "nll_loss"}
	switch kind {
	case "", "cross_entropy", "nll":
		if len(y.Shape) < 2 {
			return nil, fmt.Errorf("loss %s needs scores of rank 2 or more ([..., classes]); %s is %s", kind, y.Name, lang.ShapeString(y.Shape))
		}
		labels, err := t.input(LabelsInput, lang.I64, y.Shape[:len(y.Shape)-1])
		if err != nil {
			return nil, err
		}
		logits := y
		if len(y.Shape) > 2 {
			classes, ok := y.Shape[len(y.Shape)-1].IsConst()
			if !ok {
				return nil, fmt.Errorf("cross-entropy over a symbolic number of classes")
			}
			r, err := t.call("reshape", map[string]ir.AttrValue{"shape": ir.IntList(-1, classes)}, "loss", "loss.logits", y)
			if err != nil {
				return nil, err
			}
			l, err := t.call("reshape", map[string]ir.AttrValue{"shape": ir.IntList(-1)}, "loss", "loss.labels", labels)
			if err != nil {
				return nil, err
			}
			logits, labels = r.Outputs[0], l.Outputs[0]
		}
		n, err := t.call(classified[kind], nil, "loss", LossOutput, logits, labels)
		if err != nil {
			return nil, err
		}
		return n.Outputs[0], nil
	case "mse":
		target, err := t.input(TargetInput, y.DType, y.Shape)
		if err != nil {
			return nil, err
		}
		n, err := t.call("mse_loss", nil, "loss", LossOutput, y, target)
		if err != nil {
			return nil, err
		}
		return n.Outputs[0], nil
	}
	return nil, fmt.Errorf("unknown loss %q (expected %s)", kind, strings.Join(Losses, ", "))
}

// lossScale checks a loss scale (TrainOptions.LossScale) against the
// loss's and the parameters' dtypes: the seed must be finite in the
// loss's, and 1/s a normal number of every gradient's.
func (t *trainer) lossScale(s float64, loss *ir.Value) (float64, error) {
	if s == 0 {
		return 1, nil
	}
	if frac, _ := math.Frexp(s); s < 1 || math.IsInf(s, 0) || frac != 0.5 {
		return 0, fmt.Errorf("the loss scale %g is not a power of two of at least 1 (one is, so that scaling the gradients and unscaling them are exact)", s)
	}
	for _, v := range append([]*ir.Value{loss}, paramValues(t.g)...) {
		if most := maxLossScale(v.DType); s > most {
			return 0, fmt.Errorf("the loss scale %g is beyond %g, the most that %s (%s) allows", s, most, v.Name, v.DType)
		}
	}
	return s, nil
}

// maxLossScale is the largest power of two whose reciprocal is a normal
// number of dt (so that it is also finite there).
func maxLossScale(dt lang.DType) float64 {
	switch dt {
	case lang.F16:
		return 0x1p14
	case lang.F64:
		return 0x1p1022
	}
	return 0x1p126
}

func paramValues(g *ir.Graph) []*ir.Value {
	out := make([]*ir.Value, len(g.Params))
	for i, p := range g.Params {
		out[i] = p.Value
	}
	return out
}

// backward adds the backward nodes from the loss, its gradient seeded
// with scale, to every parameter and returns each parameter's gradient,
// multiplied by 1/scale.
func (t *trainer) backward(loss *ir.Value, scale float64) (map[*ir.Value]*ir.Value, error) {
	needs := t.dependsOnParams()
	params := map[*ir.Value]bool{}
	for _, p := range t.g.Params {
		params[p.Value] = p.Trained()
	}
	contribs := map[*ir.Value][]*ir.Value{
		loss: {{Name: t.unique("loss.seed"), DType: loss.DType, Const: &ir.ConstData{Float: scale, Int: int64(scale)}}},
	}
	nodes := t.g.Nodes
	for i := len(nodes) - 1; i >= 0; i-- {
		n := nodes[i]
		var outGrads []*ir.Value
		seeded := make([]bool, len(n.Outputs))
		for k, o := range n.Outputs {
			if !o.DType.IsFloat() {
				continue
			}
			g, err := t.sum(o, contribs[o])
			if err != nil {
				return nil, err
			}
			if g != nil {
				outGrads = append(outGrads, g)
				seeded[k] = true
			}
		}
		if len(outGrads) == 0 {
			continue
		}
		d, err := t.derive(n, seeded)
		if err != nil {
			return nil, err
		}
		for k, back := range d.backs {
			x := n.Inputs[d.wrt[k]]
			if !needs[x] || zeroGradient(back) {
				continue
			}
			bn := &ir.Node{Name: t.unique(n.Name + ".d" + back.Inputs[d.wrt[k]].Name), Inst: back,
				Inputs: append(append([]*ir.Value(nil), n.Inputs...), outGrads...), Forward: n, Role: "backward", Pos: n.Pos}
			gv := &ir.Value{Name: bn.Name, DType: x.DType, Shape: x.Shape, GradOf: x}
			bn.Outputs = []*ir.Value{gv}
			t.g.Nodes = append(t.g.Nodes, bn)
			contribs[x] = append(contribs[x], gv)
			if params[x] && len(contribs[x]) == 2 {
				// A shared weight's gradient is accumulated as its
				// contributions appear (the additions in the same order
				// as at the end), so that one partial sum per weight is
				// live rather than one per use.
				acc, err := t.call("add", nil, "gradient sum", x.Name+".grad", contribs[x]...)
				if err != nil {
					return nil, err
				}
				contribs[x] = acc.Outputs
			}
		}
	}
	grads := map[*ir.Value]*ir.Value{}
	for _, p := range t.g.Params {
		if !p.Trained() {
			continue
		}
		g, err := t.sum(p.Value, contribs[p.Value])
		if err != nil {
			return nil, err
		}
		if g != nil && scale != 1 {
			unscale := &ir.Value{Name: t.unique("loss.unscale"), DType: g.DType, Const: &ir.ConstData{Float: 1 / scale}}
			n, err := t.call("mul", nil, "gradient sum", p.Value.Name+".grad.unscaled", g, unscale)
			if err != nil {
				return nil, err
			}
			g = n.Outputs[0]
			g.GradOf = p.Value
		}
		if g != nil {
			grads[p.Value] = g
		}
	}
	return grads, nil
}

// zeroGradient reports a backward whose result is the constant 0 (the
// output does not depend on that input, like the running statistics of
// batch_norm_train's normalised output).
func zeroGradient(back *ir.Instance) bool {
	k, ok := back.Outputs[0].Body.(*ir.Const)
	return ok && k.Float == 0
}

// derive caches the backward instances of each distinct forward instance
// and set of outputs with a gradient.
func (t *trainer) derive(n *ir.Node, seeded []bool) (*derived, error) {
	key := derivedKey{n.Inst, fmt.Sprint(seeded)}
	if d, ok := t.backs[key]; ok {
		return d, nil
	}
	backs, wrt, err := BackwardSeeded(n.Inst, seeded)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", n.Pos, n.Name, err)
	}
	d := &derived{backs: backs, wrt: wrt}
	t.backs[key] = d
	return d, nil
}

type derivedKey struct {
	inst   *ir.Instance
	seeded string
}

// sum adds up the gradient contributions to v (a tensor used more than
// once), recording what it is the gradient of; nil when there are none.
func (t *trainer) sum(v *ir.Value, parts []*ir.Value) (*ir.Value, error) {
	if len(parts) == 0 {
		return nil, nil
	}
	acc := parts[0]
	for _, p := range parts[1:] {
		n, err := t.call("add", nil, "gradient sum", v.Name+".grad", acc, p)
		if err != nil {
			return nil, err
		}
		acc = n.Outputs[0]
	}
	acc.GradOf = v
	return acc, nil
}

// dependsOnParams marks the values computed from a trained parameter:
// only they need gradients (buffers are constants of the step).
func (t *trainer) dependsOnParams() map[*ir.Value]bool {
	needs := map[*ir.Value]bool{}
	for _, p := range t.g.Params {
		needs[p.Value] = p.Trained()
	}
	for _, n := range t.g.Nodes {
		for _, in := range n.Inputs {
			if needs[in] {
				for _, o := range n.Outputs {
					needs[o] = true
				}
				break
			}
		}
	}
	return needs
}

// update adds the optimizer step of every parameter with a gradient, and
// outputs the next value of every buffer (`update w = EXPR`; a frozen
// parameter keeps its value).
func (t *trainer) update(grads map[*ir.Value]*ir.Value, opts TrainOptions) error {
	for _, p := range t.g.Params {
		if p.Update != nil && p.Update != p.Value {
			if p.Update.DType != p.Value.DType || !lang.ShapeEqual(p.Update.Shape, p.Value.Shape) {
				return fmt.Errorf("the update of %s is %s%s, the parameter %s%s", p.Value.Name, p.Update.DType, lang.ShapeString(p.Update.Shape), p.Value.DType, lang.ShapeString(p.Value.Shape))
			}
			if !slices.Contains(t.g.Outputs, p.Update) {
				t.g.Outputs = append(t.g.Outputs, p.Update)
			}
			t.next[p.Value.Name] = p.Update.Name
		}
	}
	attrs := map[string]ir.AttrValue{}
	if opts.LR != 0 {
		attrs["lr"] = ir.AttrValue{Kind: ir.AttrFloat, Float: opts.LR}
	}
	if opts.ClipNorm > 0 {
		var err error
		if grads, err = t.clip(grads, opts.ClipNorm); err != nil {
			return err
		}
	}
	var step, factor *ir.Value
	stepInput := func() (*ir.Value, error) {
		if step == nil {
			var err error
			step, err = t.input(StepInput, lang.F32, nil)
			return step, err
		}
		return step, nil
	}
	if opts.Schedule.Active() {
		if _, err := stepInput(); err != nil {
			return err
		}
		// The factor in f64 for a model with f64 parameters, else f32.
		at, err := t.castTo(step, t.widestParam())
		if err != nil {
			return err
		}
		n, err := t.call("lr_schedule", opts.Schedule.attrs(), "update", "lr_schedule", at)
		if err != nil {
			return err
		}
		factor = n.Outputs[0]
	}
	for _, p := range t.g.Params[:len(t.g.Params):len(t.g.Params)] {
		g := grads[p.Value]
		if g == nil {
			continue
		}
		inputs := []*ir.Value{p.Value, g}
		switch opts.Optimizer {
		case "", "sgd":
		case "momentum":
			inputs = append(inputs, t.state(p, "v"))
		case "adam":
			if _, err := stepInput(); err != nil {
				return err
			}
			inputs = append(inputs, t.state(p, "m"), t.state(p, "v"), step)
		default:
			return fmt.Errorf("unknown optimizer %q (expected sgd, momentum or adam)", opts.Optimizer)
		}
		name := opts.Optimizer
		if name == "" {
			name = "sgd"
		}
		n, err := t.call(name, attrs, "update", p.Value.Name+".update", inputs...)
		if err != nil {
			return err
		}
		next := n.Outputs[0]
		if factor != nil {
			if next, err = t.scheduled(p.Value, next, factor); err != nil {
				return err
			}
		}
		next.Name = t.unique(p.Value.Name + ".next")
		t.g.Outputs = append(append(t.g.Outputs, next), n.Outputs[1:]...)
		t.next[p.Value.Name] = next.Name
		for i, st := range inputs[2:] {
			if st != step {
				t.next[st.Name] = n.Outputs[1+i].Name // optimizer state, in input order
			}
		}
	}
	return nil
}

// scheduled is the next value of p that moves it by factor times the
// optimizer's step to stepped: p + factor·(stepped − p), the step of the
// learning rate times factor, as every optimizer's step is proportional
// to its rate and its state does not depend on it.
func (t *trainer) scheduled(p, stepped, factor *ir.Value) (*ir.Value, error) {
	stepped.Name = t.unique(p.Name + ".step")
	delta, err := t.call("sub", nil, "update", p.Name+".delta", stepped, p)
	if err != nil {
		return nil, err
	}
	f, err := t.castTo(factor, p.DType)
	if err != nil {
		return nil, err
	}
	scaled, err := t.call("mul", nil, "update", p.Name+".scaled", delta.Outputs[0], f)
	if err != nil {
		return nil, err
	}
	next, err := t.call("add", nil, "update", p.Name+".scheduled", p, scaled.Outputs[0])
	if err != nil {
		return nil, err
	}
	return next.Outputs[0], nil
}

// clip scales every gradient by min(1, c / ‖g‖), ‖g‖ the global norm
// of them all (summed in f32 or wider): c / max(‖g‖, c).
func (t *trainer) clip(grads map[*ir.Value]*ir.Value, c float64) (map[*ir.Value]*ir.Value, error) {
	var total *ir.Value
	params := t.g.Params[:len(t.g.Params):len(t.g.Params)]
	for _, p := range params {
		g := grads[p.Value]
		if g == nil {
			continue
		}
		all := map[string]ir.AttrValue{"keepdims": {Kind: ir.AttrBool}}
		wide, err := t.castTo(g, wider(g.DType))
		if err != nil {
			return nil, err
		}
		sq, err := t.call("reduce_sum_square", all, "update", p.Value.Name+".grad_square", wide)
		if err != nil {
			return nil, err
		}
		if total == nil {
			total = sq.Outputs[0]
			continue
		}
		sum, err := t.call("add", nil, "update", "grad_square_sum", total, sq.Outputs[0])
		if err != nil {
			return nil, err
		}
		total = sum.Outputs[0]
	}
	if total == nil {
		return grads, nil
	}
	limit := &ir.Value{Name: t.unique("clip_norm"), DType: total.DType, Const: &ir.ConstData{Float: c}}
	norm, err := t.call("sqrt", nil, "update", "grad_norm", total)
	if err != nil {
		return nil, err
	}
	most, err := t.call("max", nil, "update", "grad_norm_or_limit", norm.Outputs[0], limit)
	if err != nil {
		return nil, err
	}
	factor, err := t.call("div", nil, "update", "clip_factor", limit, most.Outputs[0])
	if err != nil {
		return nil, err
	}
	out := map[*ir.Value]*ir.Value{}
	for _, p := range params {
		g := grads[p.Value]
		if g == nil {
			continue
		}
		f, err := t.castTo(factor.Outputs[0], g.DType)
		if err != nil {
			return nil, err
		}
		clipped, err := t.call("mul", nil, "update", p.Value.Name+".grad_clipped", g, f)
		if err != nil {
			return nil, err
		}
		out[p.Value] = clipped.Outputs[0]
	}
	return out, nil
}

// widestParam is f64 when a trained parameter is, else f32.
func (t *trainer) widestParam() lang.DType {
	for _, p := range t.g.Params {
		if p.Trained() && p.Value.DType == lang.F64 {
			return lang.F64
		}
	}
	return lang.F32
}

// wider is the dtype a sum of squares of dt is taken in: f32, or f64.
func wider(dt lang.DType) lang.DType {
	if dt == lang.F64 {
		return lang.F64
	}
	return lang.F32
}

// castTo is v as dtype dt, through a cast node when it is another.
func (t *trainer) castTo(v *ir.Value, dt lang.DType) (*ir.Value, error) {
	if v.DType == dt {
		return v, nil
	}
	n, err := t.call("cast_"+dt.String(), nil, "update", v.Name+"."+dt.String(), v)
	if err != nil {
		return nil, err
	}
	return n.Outputs[0], nil
}

// state adds an optimizer state parameter of p, initialised to zeros.
func (t *trainer) state(p *ir.Param, what string) *ir.Value {
	v := &ir.Value{Name: t.unique(p.Value.Name + "." + what), DType: p.Value.DType, Shape: p.Value.Shape}
	t.g.Params = append(t.g.Params, &ir.Param{Value: v, Init: ir.Init{Kind: "zeros"}, Pos: p.Pos})
	return v
}
