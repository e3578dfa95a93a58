package conform

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"tofuc/parser"

	"google.golang.org/protobuf/proto"

	"tofuc/analysis/autodiff"
	"tofuc/analysis/check"
	"tofuc/analysis/cost"
	"tofuc/analysis/partition"
	"tofuc/analysis/partition/execution"
	"tofuc/frontend/onnx"
	"tofuc/internal/onnxbuild"
	"tofuc/internal/onnxref"
	"tofuc/internal/shared"
	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/runtime/exec"
	"tofuc/runtime/tensor"
)

// The recurrent and attention operators end to end: a small LSTM and a
// transformer block built with the ONNX helper API (internal/onnxbuild)
// import, equal ONNX's semantics written out in Go (internal/onnxref, itself
// checked against the ONNX node tests' outputs below), and their training
// graphs partition over 4 devices, where the partitioned execution gives
// the whole graph's outputs.

func TestLSTMModel(t *testing.T) {
	b := onnxbuild.LSTM()
	x := randomTensor(21, onnxbuild.LSTMSteps, onnxbuild.LSTMBatch, onnxbuild.LSTMInput)
	logits, y := lstmReference(b.Weights, x)
	checkModel(t, b, "X", x, "cross_entropy", logits, y)
}

func TestTransformerBlockModel(t *testing.T) {
	b := onnxbuild.TransformerBlock()
	x := randomTensor(22, onnxbuild.TransformerBatch, onnxbuild.TransformerSeq, onnxbuild.TransformerWidth)
	checkModel(t, b, "x", x, "mse", transformerReference(b.Weights, x))
}

// checkModel imports the model, compares its outputs on the input with
// want, and partitions its training graph (with the loss) over 4
// devices, comparing the partitioned execution with the whole graph.
// (Extents below the device count, a batch of 2 on 4 devices, make
// execution.Build fail with "no strategy split"; the models avoid them.)
func checkModel(t *testing.T, b onnxbuild.Built, input string, x *tensor.Tensor, loss string, want ...*tensor.Tensor) {
	data, err := proto.Marshal(b.Model)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), b.Model.GetGraph().GetName()+".onnx")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := onnx.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	prog, err := check.NewProgram(parser.Parse)
	if err != nil {
		t.Fatal(err)
	}
	res, err := onnx.Import(m, onnx.Options{Program: prog})
	if err != nil {
		t.Fatal(err)
	}
	in := feed{tensors: map[string]*tensor.Tensor{input: x}}
	got, err := Evaluate(prog, path, res, in)
	if err != nil {
		t.Fatalf("%v\n%s", err, res.Source)
	}
	for i, w := range want {
		if err := tensor.Compare(got[i], w, tensor.External); err != nil {
			t.Errorf("output %s: %v", res.Outputs[i].ONNX, err)
		}
	}
	mod, err := prog.LoadSource(path+".tdl", res.Source)
	if err != nil {
		t.Fatal(err)
	}
	g, err := mod.Model("", nil)
	if err != nil {
		t.Fatal(err)
	}
	tg, _, err := autodiff.TrainingGraph(g, mod, autodiff.TrainOptions{Loss: loss})
	if err != nil {
		t.Fatal(err)
	}
	inputs := trainingInputs(tg.Inputs, x, input)
	whole, err := exec.Run(tg, exec.Interp{}, inputs, res.Params, 1)
	if err != nil {
		t.Fatal(err)
	}
	cg, err := cost.NewGraph(tg)
	if err != nil {
		t.Fatal(err)
	}
	const devices = 4
	plan, err := partition.Search(cg, devices, partition.Options{})
	if err != nil {
		t.Fatal(err)
	}
	eg, err := execution.Build(cg, plan.Plan)
	if err != nil {
		t.Fatal(err)
	}
	parts, err := eg.Run(inputs, whole.Params)
	if err != nil {
		t.Fatal(err)
	}
	for name, w := range whole.Outputs {
		if err := tensor.Compare(parts[name], w, tensor.Reordered(lang.F32, 1<<12)); err != nil {
			t.Errorf("partitioned training graph, output %s: %v", name, err)
		}
	}
	t.Logf("%s: %d training operators on %d devices, %d bytes per step", g.Name, len(tg.Nodes), devices, plan.Cost.CommBytes)
}

// trainingInputs are x for the model's input and drawn values for the
// loss's labels or targets (integers below 2).
func trainingInputs(vals []*ir.Value, x *tensor.Tensor, input string) map[string]*tensor.Tensor {
	r := rand.New(rand.NewPCG(3, 4))
	out := map[string]*tensor.Tensor{}
	for _, v := range vals {
		if v.Name == input {
			out[v.Name] = x
			continue
		}
		shape, _ := lang.ConstShape(v.Shape)
		t := tensor.New(v.DType, shape)
		for i := range t.Len() {
			t.SetFlat(i, float64(r.IntN(2)))
		}
		out[v.Name] = t
	}
	return out
}

func randomTensor(seed uint64, shape ...int) *tensor.Tensor {
	r := rand.New(rand.NewPCG(seed, 5))
	t := tensor.New(lang.F32, shape)
	for i := range t.Len() {
		t.SetFlat(i, r.NormFloat64())
	}
	return t
}

// at is t[i] along the first axis.
func at(t *tensor.Tensor, i int) *tensor.Tensor {
	n := t.Len() / t.Shape[0]
	return tensor.FromFloats(t.DType, t.Shape[1:], t.F[i*n:(i+1)*n])
}

// lstmReference runs onnxbuild.LSTM's layer and linear layer on x.
func lstmReference(w map[string]*tensor.Tensor, x *tensor.Tensor) (logits, y *tensor.Tensor) {
	const T, B, H, C = onnxbuild.LSTMSteps, onnxbuild.LSTMBatch, onnxbuild.LSTMHidden, onnxbuild.LSTMClasses
	cell := onnxref.Cell{Activations: []onnxref.Activation{{Name: "sigmoid"}, {Name: "tanh"}, {Name: "tanh"}}}
	y = tensor.New(lang.F32, []int{T, 2, B, H})
	final := make([]*tensor.Tensor, 2)
	for d := range 2 {
		h, c := tensor.New(lang.F32, []int{B, H}), tensor.New(lang.F32, []int{B, H})
		for k := range T {
			t := k
			if d == 1 {
				t = T - 1 - k
			}
			h, c = cell.LSTM(at(x, t), h, c, at(w["W"], d), at(w["R"], d), at(w["B"], d), nil)
			for i := range h.Len() {
				y.Set(h.F[i], t, d, i/H, i%H)
			}
		}
		final[d] = h
	}
	logits = tensor.New(lang.F32, []int{B, C})
	for n := range B {
		for k := range C {
			s := w["b_out"].At(k)
			for d := range 2 {
				for j := range H {
					s += final[d].At(n, j) * w["W_out"].At(d*H+j, k)
				}
			}
			logits.Set(s, n, k)
		}
	}
	return logits, y
}

// transformerReference runs onnxbuild.TransformerBlock on x.
func transformerReference(w map[string]*tensor.Tensor, x *tensor.Tensor) *tensor.Tensor {
	const D, HQ, HKV = onnxbuild.TransformerHead, onnxbuild.TransformerQHeads, onnxbuild.TransformerKVHeads
	m := layerNorm(x, w["ln1_scale"], w["ln1_bias"])
	q, k, v := heads(matmul(m, w["W_q"]), HQ, D), heads(matmul(m, w["W_k"]), HKV, D), heads(matmul(m, w["W_v"]), HKV, D)
	a := onnxref.Attention{Causal: true}.Apply(q, k, v, nil)
	r := add(x, matmul(unheads(a), w["W_o"]))
	n := layerNorm(r, w["ln2_scale"], w["ln2_bias"])
	gate, up := matmul(n, w["W_gate"]), matmul(n, w["W_up"])
	for i, g := range gate.F {
		gate.F[i] = g / (1 + math.Exp(-g)) * up.F[i]
	}
	return add(r, matmul(gate, w["W_down"]))
}

// rows applies f to every row (last axis) of x, giving rows of n.
func rows(x *tensor.Tensor, n int, f func(in, out []float64)) *tensor.Tensor {
	k := x.Shape[x.Rank()-1]
	shape := append(append([]int{}, x.Shape[:x.Rank()-1]...), n)
	out := tensor.New(lang.F32, shape)
	for r := range x.Len() / k {
		f(x.F[r*k:(r+1)*k], out.F[r*n:(r+1)*n])
	}
	return out
}

func matmul(x, w *tensor.Tensor) *tensor.Tensor {
	K, N := w.Shape[0], w.Shape[1]
	return rows(x, N, func(in, out []float64) {
		for j := range N {
			for k := range K {
				out[j] += in[k] * w.At(k, j)
			}
		}
	})
}

func layerNorm(x, scale, bias *tensor.Tensor) *tensor.Tensor {
	n := x.Shape[x.Rank()-1]
	return rows(x, n, func(in, out []float64) {
		mean, sq := 0.0, 0.0
		for _, v := range in {
			mean += v / float64(n)
		}
		for _, v := range in {
			sq += (v - mean) * (v - mean) / float64(n)
		}
		for i, v := range in {
			out[i] = (v-mean)/math.Sqrt(sq+1e-5)*scale.At(i) + bias.At(i)
		}
	})
}

func add(a, b *tensor.Tensor) *tensor.Tensor {
	out := a.Clone()
	for i := range out.F {
		out.F[i] += b.F[i]
	}
	return out
}

// heads splits x [B, S, H * D] into [B, H, S, D]; unheads merges back.
func heads(x *tensor.Tensor, H, D int) *tensor.Tensor {
	B, S := x.Shape[0], x.Shape[1]
	out := tensor.New(lang.F32, []int{B, H, S, D})
	for b := range B {
		for s := range S {
			for h := range H {
				for d := range D {
					out.Set(x.At(b, s, h*D+d), b, h, s, d)
				}
			}
		}
	}
	return out
}

func unheads(x *tensor.Tensor) *tensor.Tensor {
	B, H, S, D := x.Shape[0], x.Shape[1], x.Shape[2], x.Shape[3]
	out := tensor.New(lang.F32, []int{B, S, H * D})
	for b := range B {
		for h := range H {
			for s := range S {
				for d := range D {
					out.Set(x.At(b, h, s, d), b, s, h*D+d)
				}
			}
		}
	}
	return out
}

// TestReferenceMatchesNodeTests checks internal/onnxref against the
// expected outputs of ONNX node tests (computed by ONNX's reference
// implementation): what it says of the recurrent cells and attention is
// ONNX's semantics.
func TestReferenceMatchesNodeTests(t *testing.T) {
	sigmoidTanh := []onnxref.Activation{{Name: "sigmoid"}, {Name: "tanh"}, {Name: "tanh"}}
	// Each test has one output: Y_h (one step) or Y.
	for name, ref := range map[string]func(in []*tensor.Tensor) *tensor.Tensor{
		"lstm_with_peepholes": func(in []*tensor.Tensor) *tensor.Tensor {
			h, _ := onnxref.Cell{Activations: sigmoidTanh}.LSTM(at(in[0], 0), at(in[5], 0), at(in[6], 0), at(in[1], 0), at(in[2], 0), at(in[3], 0), at(in[7], 0))
			return unsqueeze0(h)
		},
		"gru_with_initial_bias": func(in []*tensor.Tensor) *tensor.Tensor {
			H := in[2].Shape[2]
			h := onnxref.Cell{Activations: sigmoidTanh[:2]}.GRU(at(in[0], 0), tensor.New(lang.F32, []int{in[0].Shape[1], H}), at(in[1], 0), at(in[2], 0), at(in[3], 0))
			return unsqueeze0(h)
		},
		"attention_4d_gqa_causal": func(in []*tensor.Tensor) *tensor.Tensor {
			return onnxref.Attention{Causal: true}.Apply(in[0], in[1], in[2], nil)
		},
		"attention_4d_diff_heads_sizes_softcap": func(in []*tensor.Tensor) *tensor.Tensor {
			return onnxref.Attention{Softcap: 2}.Apply(in[0], in[1], in[2], nil)
		},
		"attention_4d_attn_mask_4d_causal": func(in []*tensor.Tensor) *tensor.Tensor {
			return onnxref.Attention{Causal: true}.Apply(in[0], in[1], in[2], in[3])
		},
	} {
		dir := filepath.Join(shared.Dir(t), "onnx", "node", name, "test_data_set_0")
		ins, err := readNumbered(filepath.Join(dir, "input_%d.pb"), nil)
		if err != nil {
			t.Fatal(err)
		}
		outs, err := readNumbered(filepath.Join(dir, "output_%d.pb"), nil)
		if err != nil {
			t.Fatal(err)
		}
		got := ref(flatten(ins))
		if err := tensor.Compare(got, outs[0].tensor, tensor.External); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func unsqueeze0(t *tensor.Tensor) *tensor.Tensor {
	return tensor.FromFloats(t.DType, append([]int{1}, t.Shape...), t.F)
}
