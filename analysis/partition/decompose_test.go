package partition_test

import (
	"math/rand/v2"
	"testing"
	"tofuc/parser"

	"tofuc/analysis/autodiff"
	"tofuc/analysis/check"
	"tofuc/analysis/partition"
	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/runtime/exec"
	"tofuc/runtime/tensor"
)

// bnModel returns batch_norm_train's five outputs (and a loss-friendly
// first output) for a batch of 6 NCHW images.
const bnModel = `
model bn(x: f32[6, 4, 5, 3]) {
    gamma = param f32[4] init ones()
    beta = param f32[4] init zeros()
    mean = param f32[4] init zeros()
    var = param f32[4] init ones()
    w = param f32[60, 4] init glorot()
    y, bm, bv, nm, nv = batch_norm_train<epsilon = 0.001, momentum = 0.8>(x, gamma, beta, mean, var)
    return linear(flatten(y), w, bv), y, bm, bv, nm, nv
}
`

func loadBN(t *testing.T) (*check.Module, *ir.Graph) {
	t.Helper()
	m, g, err := check.LoadModel(parser.Parse, "bn.tdl", []byte(bnModel), nil)
	if err != nil {
		t.Fatal(err)
	}
	return m, g
}

// randomTensors fills every input and parameter with values in
// [-1, 1) shifted by 3 (a mean far from 0, where a variance by
// E[x^2] - E[x]^2 would lose digits), positive for the variances.
func randomTensors(vs []*ir.Value, seed uint64) map[string]*tensor.Tensor {
	r := rand.New(rand.NewPCG(seed, 7))
	out := map[string]*tensor.Tensor{}
	for _, v := range vs {
		shape, _ := lang.ConstShape(v.Shape)
		x := tensor.New(v.DType, shape)
		for i := range x.Len() {
			x.SetFlat(i, 3+2*r.Float64()-1)
		}
		out[v.Name] = x
	}
	return out
}

func paramValues(g *ir.Graph) []*ir.Value {
	var out []*ir.Value
	for _, p := range g.Params {
		out = append(out, p.Value)
	}
	return out
}

// TestDecomposeBatchNorm: Decompose replaces batch_norm_train by
// batch_mean, batch_var, batch_norm and two running_average nodes that
// keep its output values, and the decomposed graph computes exactly what
// the operator computes (the same formulas, the sums in the same order);
// the training graphs derived from the two (the decomposed one's
// backward operators are those of its parts) give the same loss and,
// within the tolerance of reordered sums, the same updated parameters.
func TestDecomposeBatchNorm(t *testing.T) {
	m, g := loadBN(t)
	dg, err := partition.Decompose(g, m)
	if err != nil {
		t.Fatal(err)
	}
	ops := map[string]int{}
	for _, n := range dg.Nodes {
		ops[n.Inst.Op]++
	}
	if ops["batch_norm_train"] != 0 || ops["batch_mean"] != 1 || ops["batch_var"] != 1 || ops["batch_norm"] != 1 || ops["running_average"] != 2 {
		t.Errorf("decomposed operators: %v", ops)
	}
	var orig *ir.Node
	for _, n := range g.Nodes {
		if n.Inst.Op == "batch_norm_train" {
			orig = n
		}
	}
	produced := map[*ir.Value]string{}
	for _, n := range dg.Nodes {
		for _, o := range n.Outputs {
			produced[o] = n.Inst.Op
		}
	}
	for i, want := range []string{"batch_norm", "batch_mean", "batch_var", "running_average", "running_average"} {
		if got := produced[orig.Outputs[i]]; got != want {
			t.Errorf("output %s is computed by %q, want %s", orig.Outputs[i].Name, got, want)
		}
	}

	inputs := randomTensors(g.Inputs, 1)
	params := randomTensors(paramValues(g), 2)
	whole, err := exec.Run(g, exec.Interp{}, inputs, params, 1)
	if err != nil {
		t.Fatal(err)
	}
	parts, err := exec.Run(dg, exec.Interp{}, inputs, params, 1)
	if err != nil {
		t.Fatal(err)
	}
	for name, w := range whole.Outputs {
		if err := tensor.Compare(parts.Outputs[name], w, tensor.Exact); err != nil {
			t.Errorf("output %s: %v", name, err)
		}
	}

	tg, _, err := autodiff.TrainingGraph(g, m, autodiff.TrainOptions{Loss: "mse", LR: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	dtg, _, err := autodiff.TrainingGraph(dg, m, autodiff.TrainOptions{Loss: "mse", LR: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	tin := randomTensors(tg.Inputs, 3)
	wt, err := exec.Run(tg, exec.Interp{}, tin, params, 1)
	if err != nil {
		t.Fatal(err)
	}
	dt, err := exec.Run(dtg, exec.Interp{}, tin, params, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(dt.Outputs) != len(wt.Outputs) {
		t.Errorf("the decomposed training graph has %d outputs, the original %d", len(dt.Outputs), len(wt.Outputs))
	}
	for name, w := range wt.Outputs {
		tol := tensor.Reordered(lang.F32, 6*5*3)
		if name == autodiff.LossOutput {
			tol = tensor.Exact
		}
		if err := tensor.Compare(dt.Outputs[name], w, tol); err != nil {
			t.Errorf("training output %s: %v", name, err)
		}
	}
	// The update moved gamma and beta (the test would pass vacuously if
	// their gradients were lost).
	for _, p := range []string{"gamma", "beta"} {
		if err := tensor.Compare(dt.Outputs[p+".next"], params[p], tensor.Exact); err == nil {
			t.Errorf("%s.next equals %s: no gradient reached it", p, p)
		}
	}
}
