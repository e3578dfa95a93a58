package execution_test

import (
	"fmt"
	"testing"

	"tofuc/analysis/autodiff"
	"tofuc/analysis/cost"
	"tofuc/analysis/partition"
	"tofuc/analysis/partition/execution"
	"tofuc/internal/examplegraph"
	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/runtime/exec"
	"tofuc/runtime/tensor"
)

// bnNet is a small convolutional network with batch statistics: two
// 3×3 convolutions, each followed by batch_norm_train and relu, and a
// linear classifier; each channel's statistics are over batch × 8 × 8
// values (2048).
const bnNet = `
model bnnet<batch = 32>(x: f32[batch, 3, 8, 8]) {
    block conv_bn<cin = 3, cout = 8>(x) {
        w = param f32[cout, cin, 3, 3] init he()
        gamma = param f32[cout] init ones()
        beta = param f32[cout] init zeros()
        mean = param f32[cout] init zeros()
        var = param f32[cout] init ones()
        y, batch_mean, batch_var, new_mean, new_var = batch_norm_train(conv2d<pads = [1, 1, 1, 1]>(x, w), gamma, beta, mean, var)
        return relu(y)
    }
    h = conv_bn<cin = 16, cout = 16>(conv_bn<cin = 3, cout = 16>(x))
    fc = param f32[1024, 10] init glorot()
    fc_bias = param f32[10] init zeros()
    return linear(flatten(h), fc, fc_bias)
}
`

// TestBatchNormBatchSplitEqualsWhole: the training graph of a small
// network with batch statistics (bnNet, batch 32, 16 channels), decomposed as tofuc
// partition decomposes it (partition.Decompose), run as the execution
// graphs of the searched plan and of the data-parallel plan over 2, 4
// and 8 devices, gives the loss and every updated parameter of the whole
// graph, decomposed and not (batch_norm_train whole), within the
// tolerance for reordered sums. Between them the plans split the batch
// of batch_norm_train: batch_mean and batch_var as partial sums over
// parts of the batch, each device reading only its part, batch_norm
// along n, and the gradients of its scale and variance as partial sums
// over the batch; the test fails if they stop doing so. (ResNet-50's
// training graph at batch 8 and 16×16 images, whose last stages have
// statistics over 8 values, is too ill-conditioned for this tolerance,
// with or without the decomposition.)
func TestBatchNormBatchSplitEqualsWhole(t *testing.T) {
	m, fg := sourceModel(t, "bnnet.tdl", bnNet)
	dg, err := partition.Decompose(fg, m)
	if err != nil {
		t.Fatal(err)
	}
	orig, _, err := autodiff.TrainingGraph(fg, m, autodiff.TrainOptions{})
	if err != nil {
		t.Fatal(err)
	}
	g, _, err := autodiff.TrainingGraph(dg, m, autodiff.TrainOptions{})
	if err != nil {
		t.Fatal(err)
	}
	inputs := examplegraph.RandomInputs(g, 10)
	want, err := exec.Run(g, exec.Interp{}, inputs, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	wantOrig, err := exec.Run(orig, exec.Interp{}, inputs, want.Params, 1)
	if err != nil {
		t.Fatal(err)
	}
	cg, err := cost.NewGraph(g)
	if err != nil {
		t.Fatal(err)
	}
	tol := tensor.Reordered(lang.F32, 1<<12)
	seen := map[string]bool{}
	for _, devices := range []int{2, 4, 8} {
		for _, plan := range []string{"search", "data_parallel"} {
			t.Run(fmt.Sprintf("%s/%d", plan, devices), func(t *testing.T) {
				res, eg := planned(t, cg, plan, devices)
				got, err := eg.Run(inputs, want.Params)
				if err != nil {
					t.Fatal(err)
				}
				if len(want.Outputs) != 9 {
					t.Fatalf("%d outputs, want the loss and 8 updated parameters", len(want.Outputs))
				}
				for name, w := range want.Outputs {
					if err := tensor.Compare(got[name], w, tol); err != nil {
						t.Errorf("output %s: %v", name, err)
					}
					if err := tensor.Compare(got[name], wantOrig.Outputs[name], tol); err != nil {
						t.Errorf("output %s, against batch_norm_train whole: %v", name, err)
					}
				}
				for f := range batchSplits(eg) {
					seen[f] = true
				}
				t.Logf("%d operators, cost model %d bytes", len(g.Nodes), res.Cost.CommBytes)
			})
		}
	}
	for _, f := range []string{"batch_mean partial over n", "batch_var partial over n", "batch_norm split n",
		"batch_norm.grad_scale partial over n", "batch_norm.grad_var partial over n"} {
		if !seen[f] {
			t.Errorf("no plan has %s: the test no longer covers the batch split of batch_norm_train", f)
		}
	}
}

// batchSplits lists how the plan splits the batch of the decomposed
// batch norms: an operator computing partial sums while reading only
// part of the batch of its first input, batch_norm computing part of the
// batch.
func batchSplits(eg *execution.Graph) map[string]bool {
	out := map[string]bool{}
	for _, ops := range eg.Ops {
		for _, op := range ops {
			if op.Inst == nil {
				continue
			}
			n := op.Node
			batch, _ := n.Inputs[0].Shape[0].IsConst()
			name := n.Inst.Op
			if n.Forward != nil {
				name = n.Forward.Inst.Op + "." + n.Inst.Op[len(n.Forward.Inst.Op)+1:]
			}
			switch {
			case op.Partial && op.Reducer == ir.Sum && op.In[0] != nil && op.In[0].Shape[0] < batch:
				out[name+" partial over n"] = true
			case n.Inst.Op == "batch_norm" && op.Outputs[0][0].Size() < batch:
				out[name+" split n"] = true
			}
		}
	}
	return out
}
