package execution_test

import (
	"fmt"
	"testing"

	"tofuc/analysis/autodiff"
	"tofuc/analysis/cost"
	"tofuc/analysis/partition"
	"tofuc/internal/examplegraph"
	"tofuc/lang"
	"tofuc/runtime/exec"
	"tofuc/runtime/tensor"
)

// TestExtentsSmallerThanDevices: an LSTM whose batch (2) and hidden size
// (3) are smaller than the devices builds and runs on 4 and 8 devices: a
// tensor too small to split is replicated, and a worker whose part of a
// split variable is one value splits it further into one part and empty
// ones (before, the execution graph failed with "no strategy split").
func TestExtentsSmallerThanDevices(t *testing.T) {
	g := load(t, "rnn", true, ints("layers", 1, "hidden", 3, "steps", 2, "batch", 2, "classes", 3))
	inputs := examplegraph.RandomInputs(g, 3)
	want, err := exec.Run(g, exec.Interp{}, inputs, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	cg, err := cost.NewGraph(g)
	if err != nil {
		t.Fatal(err)
	}
	for _, devices := range []int{4, 8} {
		for _, name := range append([]string{"search"}, partition.Baselines...) {
			t.Run(fmt.Sprintf("%d/%s", devices, name), func(t *testing.T) {
				_, eg := planned(t, cg, name, devices)
				got, err := eg.Run(inputs, want.Params)
				if err != nil {
					t.Fatal(err)
				}
				for out, w := range want.Outputs {
					if err := tensor.Compare(got[out], w, tensor.Reordered(lang.F32, 1<<12)); err != nil {
						t.Errorf("output %s: %v", out, err)
					}
				}
			})
		}
	}
}

// TestScalarTensor: a rank-0 parameter (the transformer block's ONNX
// import has one) is read by the devices like any tensor; before, its
// input had no region and the execution graph's run dereferenced nil.
func TestScalarTensor(t *testing.T) {
	const src = `model scaled<batch = 8, n = 8>(x: f32[batch, n]) {
    w = param f32[n, n] init glorot()
    s = param f32[] init ones()
    return matmul(x, w) * s
}
`
	m, g := sourceModel(t, "scaled.tdl", src)
	g, _, err := autodiff.TrainingGraph(g, m, autodiff.TrainOptions{})
	if err != nil {
		t.Fatal(err)
	}
	inputs := examplegraph.RandomInputs(g, 3)
	want, err := exec.Run(g, exec.Interp{}, inputs, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	cg, err := cost.NewGraph(g)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range append([]string{"search"}, partition.Baselines...) {
		_, eg := planned(t, cg, name, 4)
		for _, ops := range eg.Ops {
			for _, op := range ops {
				for j, v := range op.Node.Inputs {
					if v.Const == nil && op.In[j] == nil {
						t.Fatalf("%s: input %s of %s on device %d has no region", name, v.Name, op.Node.Name, op.Device)
					}
				}
			}
		}
		got, err := eg.Run(inputs, want.Params)
		if err != nil {
			t.Fatal(err)
		}
		for out, w := range want.Outputs {
			if err := tensor.Compare(got[out], w, tensor.Reordered(lang.F32, 1<<12)); err != nil {
				t.Errorf("%s: output %s: %v", name, out, err)
			}
		}
	}
}
