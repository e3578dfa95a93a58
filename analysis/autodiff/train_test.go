package autodiff_test

import (
	"math"
	"strings"
	"testing"
	"tofuc/parser"

	"tofuc/analysis/autodiff"
	"tofuc/analysis/check"
	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/runtime/exec"
	"tofuc/runtime/interp"
	"tofuc/runtime/tensor"
)

// A model that uses a parameter twice: its gradient is a sum, the backward
// nodes point at their forward nodes, and one SGD step on the training
// graph equals p - lr * dL/dp computed by finite differences.
const twice = `
model m(x: f64[3, 4]) {
    w = param f64[4, 4] init normal(0.0, 0.5)
    h = matmul(x, w)
    return matmul(tanh(h), w)
}
`

// loadTwice checks the model named twice above: its module and graph.
func loadTwice(t *testing.T) (*check.Module, *ir.Graph) {
	t.Helper()
	return loadModel(t, "twice.tdl", twice)
}

// loadModel checks the model of source: its module and graph.
func loadModel(t *testing.T, name, source string) (*check.Module, *ir.Graph) {
	t.Helper()
	p, err := check.NewProgram(parser.Parse)
	if err != nil {
		t.Fatal(err)
	}
	m, err := p.LoadSource(name, []byte(source))
	if err != nil {
		t.Fatal(err)
	}
	g, err := m.Model("", nil)
	if err != nil {
		t.Fatal(err)
	}
	return m, g
}

func TestTrainingGraphStructure(t *testing.T) {
	m, g := loadTwice(t)
	tg, next, err := autodiff.TrainingGraph(g, m, autodiff.TrainOptions{Loss: "mse", LR: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	w := g.Params[0].Value
	sums, backward := 0, 0
	for _, n := range tg.Nodes {
		switch n.Role {
		case "backward":
			backward++
			if n.Forward == nil || n.Forward.Role != "forward" && n.Forward.Role != "loss" {
				t.Errorf("backward node %s does not point at a forward node", n.Name)
			}
		case "gradient sum":
			sums++
			if n.Outputs[0].GradOf != w {
				t.Errorf("the gradient sum %s is not w's gradient", n.Name)
			}
		}
	}
	if sums != 1 {
		t.Errorf("%d gradient sums, want 1 (w is used twice)", sums)
	}
	if next[w.Name] != w.Name+".next" {
		t.Errorf("next[w] = %q", next[w.Name])
	}

	// One step against finite differences of the loss.
	x := tensor.New(lang.F64, []int{3, 4})
	target := tensor.New(lang.F64, []int{3, 4})
	for i := range x.Len() {
		x.SetFlat(i, math.Sin(float64(i)))
		target.SetFlat(i, math.Cos(float64(i)))
	}
	inputs := map[string]*tensor.Tensor{"x": x, autodiff.TargetInput: target}
	res, err := exec.Run(tg, exec.Interp{}, inputs, nil, 7)
	if err != nil {
		t.Fatal(err)
	}
	w0 := res.Params[w.Name]
	loss := func(wv *tensor.Tensor) float64 {
		r, err := exec.Run(tg, exec.Interp{}, inputs, map[string]*tensor.Tensor{w.Name: wv}, 7)
		if err != nil {
			t.Fatal(err)
		}
		return r.Outputs[autodiff.LossOutput].Flat(0)
	}
	for _, e := range []int{0, 5, 15} {
		h := 1e-6
		plus, minus := w0.Clone(), w0.Clone()
		plus.SetFlat(e, w0.Flat(e)+h)
		minus.SetFlat(e, w0.Flat(e)-h)
		grad := (loss(plus) - loss(minus)) / (2 * h)
		want := w0.Flat(e) - 0.1*grad
		if got := res.Outputs[next[w.Name]].Flat(e); math.Abs(got-want) > 1e-6 {
			t.Errorf("w.next[%d] = %.9g, want w - 0.1 dL/dw = %.9g", e, got, want)
		}
	}
}

// A product's gradient at an element equal to zero is the product of the
// others (not NaN from dividing by the element).
func TestProdGradientAtZero(t *testing.T) {
	p, err := check.NewProgram(parser.Parse)
	if err != nil {
		t.Fatal(err)
	}
	m, err := p.LoadSource("prod.tdl", []byte("op prod_all(x: [N]) -> [] = lambda: prod(lambda k: x[k])\n"))
	if err != nil {
		t.Fatal(err)
	}
	inst, err := check.Instantiate(m.Op("prod_all"), nil, []check.TensorType{{DType: lang.F64, Shape: []lang.Dim{lang.Const(3)}}}, lang.Pos{})
	if err != nil {
		t.Fatal(err)
	}
	backs, _, err := autodiff.Backward(inst)
	if err != nil {
		t.Fatal(err)
	}
	x := tensor.FromFloats(lang.F64, []int{3}, []float64{0, 2, 3})
	out, err := interp.EvalInstance(backs[0], []*tensor.Tensor{x, tensor.Scalar(lang.F64, 1)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := tensor.FromFloats(lang.F64, []int{3}, []float64{6, 0, 0})
	if err := tensor.Compare(out[0], want, tensor.Exact); err != nil {
		t.Errorf("d prod / dx at [0 2 3]: %v", err)
	}
}

// The training graph's inputs have fixed names; a model tensor of the
// same name is an error, not a silent rename.
func TestTrainingInputNameClash(t *testing.T) {
	p, err := check.NewProgram(parser.Parse)
	if err != nil {
		t.Fatal(err)
	}
	m, err := p.LoadSource("clash.tdl", []byte("model m(labels: f32[2, 3]) {\n    w = param f32[3, 4]\n    return matmul(labels, w)\n}\n"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := m.Model("", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := autodiff.TrainingGraph(g, m, autodiff.TrainOptions{}); err == nil {
		t.Error("a model input named labels was accepted")
	}
}

// TestLossScale: a loss scale of 2¹⁰ seeds the gradient with it and
// unscales every parameter's gradient before its update, so that one
// step gives bit for bit the unscaled step's parameters (scaling by a
// power of two is exact); a scale that is no power of two is refused.
func TestLossScale(t *testing.T) {
	m, g := loadTwice(t)
	x := tensor.New(lang.F64, []int{3, 4})
	target := tensor.New(lang.F64, []int{3, 4})
	for i := range x.Len() {
		x.SetFlat(i, math.Sin(float64(i)))
		target.SetFlat(i, math.Cos(float64(i)))
	}
	inputs := map[string]*tensor.Tensor{"x": x, autodiff.TargetInput: target}
	step := func(scale float64) (map[string]*tensor.Tensor, int) {
		tg, _, err := autodiff.TrainingGraph(g, m, autodiff.TrainOptions{Loss: "mse", Optimizer: "adam", LossScale: scale})
		if err != nil {
			t.Fatal(err)
		}
		unscaled := 0
		for _, n := range tg.Nodes {
			for _, in := range n.Inputs {
				if in.Const != nil && in.Const.Float == 1/scale && scale != 1 {
					unscaled++
				}
			}
		}
		in := map[string]*tensor.Tensor{autodiff.StepInput: tensor.Scalar(lang.F32, 1)}
		for k, v := range inputs {
			in[k] = v
		}
		res, err := exec.Run(tg, exec.Interp{}, in, nil, 7)
		if err != nil {
			t.Fatal(err)
		}
		return res.Outputs, unscaled
	}
	want, _ := step(1)
	got, unscaled := step(1024)
	if unscaled != 1 {
		t.Errorf("%d gradients unscaled, want 1 (w's)", unscaled)
	}
	for name, w := range want {
		if err := tensor.Compare(got[name], w, tensor.Exact); err != nil {
			t.Errorf("output %s with a loss scale of 1024: %v", name, err)
		}
	}
	for _, bad := range []float64{3, 0.5, -2, math.Inf(1), 0x1p1023} {
		if _, _, err := autodiff.TrainingGraph(g, m, autodiff.TrainOptions{LossScale: bad}); err == nil {
			t.Errorf("a loss scale of %g was accepted", bad)
		}
	}
}

// The nll loss on log_softmax(z) is cross-entropy on z: one training
// step of each gives the same loss and the same updated weights.
func TestNLLLossIsCrossEntropyOfLogSoftmax(t *testing.T) {
	p, err := check.NewProgram(parser.Parse)
	if err != nil {
		t.Fatal(err)
	}
	m, err := p.LoadSource("cls.tdl", []byte(`
model logits(x: f64[4, 3]) {
    w = param f64[3, 5] init normal(0.0, 0.5)
    return matmul(x, w)
}
model logp(x: f64[4, 3]) {
    w = param f64[3, 5] init normal(0.0, 0.5)
    return log_softmax(matmul(x, w))
}
`))
	if err != nil {
		t.Fatal(err)
	}
	x := tensor.New(lang.F64, []int{4, 3})
	for i := range x.Len() {
		x.SetFlat(i, math.Sin(float64(3*i)))
	}
	inputs := map[string]*tensor.Tensor{"x": x, autodiff.LabelsInput: tensor.FromInts(lang.I64, []int{4}, []int64{0, 4, 2, 2})}
	step := func(model, loss string) *exec.Result {
		g, err := m.Model(model, nil)
		if err != nil {
			t.Fatal(err)
		}
		tg, _, err := autodiff.TrainingGraph(g, m, autodiff.TrainOptions{Loss: loss, LR: 0.5})
		if err != nil {
			t.Fatal(err)
		}
		res, err := exec.Run(tg, exec.Interp{}, inputs, nil, 3)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	ce, nll := step("logits", "cross_entropy"), step("logp", "nll")
	for _, name := range []string{autodiff.LossOutput, "w.next"} {
		if err := tensor.Compare(nll.Outputs[name], ce.Outputs[name], tensor.Reordered(lang.F64, 16)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, _, err := autodiff.TrainingGraph(mustModel(t, m, "logp"), m, autodiff.TrainOptions{Loss: "nl"}); err == nil || !strings.Contains(err.Error(), "cross_entropy, nll, mse") {
		t.Errorf("an unknown loss: %v", err)
	}
}

func mustModel(t *testing.T, m *check.Module, name string) *ir.Graph {
	t.Helper()
	g, err := m.Model(name, nil)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// A model with a buffer updated from batch statistics, a frozen weight and
// a dropout in training mode.
const buffered = `
model m(x: f64[8, 6]) {
    w = param f64[6, 6] init normal(0.0, 0.5)
    frozen = param f64[6, 4] init normal(0.0, 0.5)
    seen = param f64[6] init zeros()
    h = matmul(x, w)
    update seen = add(mul(seen, 0.5), mul(reduce_mean<axes = [0], keepdims = false>(h), 0.5))
    update frozen = frozen
    h = dropout<ratio = 0.5, training = true>(h)
    return matmul(tanh(h), frozen)
}
`

// TestBuffersAndDropoutSeeds: an updated parameter gets no optimizer
// update but its update statement's value; a frozen one keeps its value;
// dropout draws from the training graph's dropout_seed input, so that
// the masks, and the gradients, differ between steps.
func TestBuffersAndDropoutSeeds(t *testing.T) {
	m, g := loadModel(t, "buffered.tdl", buffered)
	tg, next, err := autodiff.TrainingGraph(g, m, autodiff.TrainOptions{Loss: "mse", LR: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := next["frozen"]; ok {
		t.Errorf("the frozen parameter has a next value (%s)", next["frozen"])
	}
	if next["seen"] == "" || next["w"] == "" {
		t.Fatalf("next %v: want seen's update and w's", next)
	}
	var seeded int
	for _, n := range tg.Nodes {
		if n.Inst.Op == "dropout" {
			t.Errorf("node %s is still an unseeded dropout", n.Name)
		}
		if n.Inst.Op == "dropout_seeded" {
			seeded++
		}
		if n.Role == "update" && strings.HasPrefix(n.Name, "seen") || strings.HasPrefix(n.Name, "frozen") && n.Role == "update" {
			t.Errorf("%s has an optimizer update (%s)", n.Name, n.Inst.Op)
		}
	}
	if seeded != 1 {
		t.Fatalf("%d dropout_seeded nodes, want 1", seeded)
	}
	x := tensor.New(lang.F64, []int{8, 6})
	for i := range x.F {
		x.F[i] = math.Sin(float64(i))
	}
	inputs := map[string]*tensor.Tensor{"x": x, autodiff.TargetInput: tensor.New(lang.F64, []int{8, 4})}
	stepOf := func(step int) *exec.Result {
		in := map[string]*tensor.Tensor{autodiff.DropoutSeedInput: tensor.Scalar(lang.I64, autodiff.StepValues(step, 3)[autodiff.DropoutSeedInput])}
		for k, v := range inputs {
			in[k] = v
		}
		res, err := exec.Run(tg, exec.Interp{}, in, nil, 7)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	one, two := stepOf(1), stepOf(2)
	if err := tensor.Compare(one.Outputs[next["w"]], two.Outputs[next["w"]], tensor.Tolerance{}); err == nil {
		t.Error("steps 1 and 2 drew the same dropout mask: w's updates are equal")
	}
	// seen's next value is 0.5 * 0 + 0.5 * the batch mean of x w.
	h := mustMatmul(t, x, one.Params["w"])
	seen := one.Outputs[next["seen"]]
	for j := range 6 {
		var mean float64
		for i := range 8 {
			mean += h.F[i*6+j] / 8
		}
		if math.Abs(seen.F[j]-0.5*mean) > 1e-12 {
			t.Errorf("seen[%d] = %g, want %g", j, seen.F[j], 0.5*mean)
		}
	}
}

func mustMatmul(t *testing.T, a, b *tensor.Tensor) *tensor.Tensor {
	t.Helper()
	n, k, m := a.Shape[0], a.Shape[1], b.Shape[1]
	out := tensor.New(lang.F64, []int{n, m})
	for i := range n {
		for j := range m {
			for l := range k {
				out.F[i*m+j] += a.F[i*k+l] * b.F[l*m+j]
			}
		}
	}
	return out
}

// TestDropoutMasksDifferByLayerStepAndSeed: two dropouts of one shape
// draw different masks in a step, and a step's mask changes with the
// step and the run's seed (also 65,536 steps apart).
func TestDropoutMasksDifferByLayerStepAndSeed(t *testing.T) {
	m, g := loadModel(t, "two.tdl", `
model m(x: f64[64]) {
    w = param f64[64] init ones()
    a = dropout<ratio = 0.5, training = true>(x * w)
    b = dropout<ratio = 0.5, training = true>(x * w)
    return a - b
}
`)
	tg, _, err := autodiff.TrainingGraph(g, m, autodiff.TrainOptions{Loss: "mse"})
	if err != nil {
		t.Fatal(err)
	}
	x := tensor.New(lang.F64, []int{64})
	for i := range x.F {
		x.F[i] = float64(i + 1) // distinct: different masks give different losses
	}
	loss := func(step int, seed uint64) float64 {
		s := autodiff.StepValues(step, seed)[autodiff.DropoutSeedInput]
		in := map[string]*tensor.Tensor{"x": x, autodiff.TargetInput: tensor.New(lang.F64, []int{64}), autodiff.DropoutSeedInput: tensor.Scalar(lang.I64, s)}
		res, err := exec.Run(tg, exec.Interp{}, in, nil, 1)
		if err != nil {
			t.Fatal(err)
		}
		return res.Outputs[autodiff.LossOutput].Flat(0)
	}
	one := loss(1, 0)
	if one == 0 {
		t.Error("the two dropouts drew the same mask: (a - b)^2 is 0")
	}
	if again := loss(1, 0); again != one {
		t.Errorf("step 1 drew another mask when run again: loss %g, then %g", one, again)
	}
	for _, other := range []struct{ step, seed int }{{2, 0}, {1, 1}, {65537, 0}} {
		if l := loss(other.step, uint64(other.seed)); l == one {
			t.Errorf("step %d seed %d drew the masks of step 1 seed 0 (loss %g)", other.step, other.seed, l)
		}
	}
}

// A schedule scales each step by its factor at the step, and clipping
// scales every gradient by c / ‖g‖ when the global norm ‖g‖ exceeds c:
// one step of each against the plain step's gradients.
func TestScheduleAndClipping(t *testing.T) {
	m, g := loadModel(t, "two.tdl", `
model two(x: f64[3, 4]) {
    w = param f64[4, 4] init normal(0.0, 0.5)
    b = param f64[4] init normal(0.0, 0.5)
    return matmul(x, w) + b
}
`)
	x := tensor.New(lang.F64, []int{3, 4})
	target := tensor.New(lang.F64, []int{3, 4})
	for i := range x.Len() {
		x.SetFlat(i, math.Sin(float64(i)))
		target.SetFlat(i, math.Cos(float64(i)))
	}
	const step = 3
	run := func(opts autodiff.TrainOptions) (params, outputs map[string]*tensor.Tensor) {
		opts.Loss = "mse"
		tg, next, err := autodiff.TrainingGraph(g, m, opts)
		if err != nil {
			t.Fatal(err)
		}
		in := map[string]*tensor.Tensor{"x": x, autodiff.TargetInput: target}
		for _, v := range tg.Inputs {
			if v.Name == autodiff.StepInput {
				in[v.Name] = tensor.Scalar(lang.F32, step)
			}
		}
		res, err := exec.Run(tg, exec.Interp{}, in, nil, 7)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]*tensor.Tensor{}
		for p, o := range next {
			out[p] = res.Outputs[o]
		}
		return res.Params, out
	}
	params, plain := run(autodiff.TrainOptions{LR: 1})
	grad := map[string]*tensor.Tensor{} // w - w.next at a rate of 1
	norm := 0.0
	for _, name := range []string{"w", "b"} {
		d := params[name].Clone()
		for i := range d.Len() {
			d.SetFlat(i, params[name].Flat(i)-plain[name].Flat(i))
			norm += d.Flat(i) * d.Flat(i)
		}
		grad[name] = d
	}
	norm = math.Sqrt(norm)
	cosine := autodiff.Schedule{Decay: "cosine", Warmup: 2, Total: 10, Final: 0.1}
	// The factor is computed in f64, as the model's parameters are.
	factor := 0.1 + 0.9*0.5*(1+math.Cos(math.Pi*float64(step-2)/8))
	for _, tc := range []struct {
		name  string
		opts  autodiff.TrainOptions
		scale float64 // of the plain step
	}{
		{"clipped", autodiff.TrainOptions{LR: 0.5, ClipNorm: norm / 3}, 0.5 / 3},
		{"not clipped below the limit", autodiff.TrainOptions{LR: 0.5, ClipNorm: norm * 2}, 0.5},
		{"cosine schedule after a warm-up", autodiff.TrainOptions{LR: 0.5, Schedule: cosine}, 0.5 * factor},
		{"both", autodiff.TrainOptions{LR: 0.5, Schedule: cosine, ClipNorm: norm / 4}, 0.5 * factor / 4},
	} {
		_, got := run(tc.opts)
		for name, d := range grad {
			want := params[name].Clone()
			for i := range want.Len() {
				want.SetFlat(i, params[name].Flat(i)-tc.scale*d.Flat(i))
			}
			if err := tensor.Compare(got[name], want, tensor.Tolerance{Rel: 1e-12, Abs: 1e-12}); err != nil {
				t.Errorf("%s: %s: %v", tc.name, name, err)
			}
		}
	}
	// Adam's step under a schedule is its plain step times the factor;
	// its moments are the plain ones.
	_, adam := run(autodiff.TrainOptions{Optimizer: "adam"})
	_, scheduled := run(autodiff.TrainOptions{Optimizer: "adam", Schedule: cosine})
	for name, p := range params {
		if _, ok := adam[name]; !ok {
			continue
		}
		want := p.Clone()
		if _, trained := grad[name]; trained {
			for i := range want.Len() {
				want.SetFlat(i, p.Flat(i)+factor*(adam[name].Flat(i)-p.Flat(i)))
			}
		} else {
			want = adam[name]
		}
		if err := tensor.Compare(scheduled[name], want, tensor.Tolerance{Rel: 1e-12, Abs: 1e-15}); err != nil {
			t.Errorf("adam under a schedule: %s: %v", name, err)
		}
	}
	for _, bad := range []autodiff.Schedule{{Decay: "cosin"}, {Decay: "linear", Total: 5, Warmup: 5}, {Decay: "step", Gamma: 0.5}, {Decay: "exponential", Gamma: 2}, {Warmup: -1}} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v was accepted", bad)
		}
	}
}
