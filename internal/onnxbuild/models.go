package onnxbuild

import (
	"math/rand/v2"

	"tofuc/frontend/onnx/onnxpb"
	"tofuc/lang"
	"tofuc/runtime/tensor"
)

// Built is a model built here with its initializers' values.
type Built struct {
	Model   *onnxpb.ModelProto
	Weights map[string]*tensor.Tensor
}

// weights draws the initializers of a model from a seeded normal
// distribution scaled by 0.3.
type weights struct {
	r     *rand.Rand
	vals  map[string]*tensor.Tensor
	inits []*onnxpb.TensorProto
}

func newWeights(seed uint64) *weights {
	return &weights{r: rand.New(rand.NewPCG(seed, 1)), vals: map[string]*tensor.Tensor{}}
}

func (w *weights) add(name string, shape ...int) string {
	t := tensor.New(lang.F32, shape)
	for i := range t.Len() {
		t.SetFlat(i, 0.3*w.r.NormFloat64())
	}
	w.vals[name] = t
	w.inits = append(w.inits, FromTensor(name, t))
	return name
}

func (w *weights) ints(name string, vals ...int64) string {
	w.inits = append(w.inits, Int64Tensor(name, vals...))
	return name
}

// LSTM sizes.
const (
	LSTMSteps, LSTMBatch, LSTMInput, LSTMHidden, LSTMClasses = 4, 4, 8, 8, 4
)

// LSTM is a bidirectional LSTM layer as PyTorch exports it (one LSTM
// node, weights W, R, B as initializers, no peepholes) over X
// [steps, batch, input], followed by a linear layer on the final hidden
// states of both directions: logits [batch, classes], and the sequence
// output Y [steps, 2, batch, hidden].
func LSTM() Built {
	w := newWeights(16)
	const H, D = LSTMHidden, 2
	nodes := []*onnxpb.NodeProto{
		Node("LSTM", []string{"X", w.add("W", D, 4*H, LSTMInput), w.add("R", D, 4*H, H), w.add("B", D, 8*H)}, []string{"Y", "Y_h"},
			Int("hidden_size", H), String("direction", "bidirectional")),
		Node("Transpose", []string{"Y_h"}, []string{"h_bd"}, Ints("perm", 1, 0, 2)),
		Node("Reshape", []string{"h_bd", w.ints("flat", LSTMBatch, D*H)}, []string{"h"}),
		Node("MatMul", []string{"h", w.add("W_out", D*H, LSTMClasses)}, []string{"z"}),
		Node("Add", []string{"z", w.add("b_out", LSTMClasses)}, []string{"logits"}),
	}
	g := Graph("lstm", nodes,
		[]*onnxpb.ValueInfoProto{TensorInfo("X", onnxpb.TensorProto_FLOAT, LSTMSteps, LSTMBatch, LSTMInput)},
		[]*onnxpb.ValueInfoProto{TensorInfo("logits", onnxpb.TensorProto_FLOAT, LSTMBatch, LSTMClasses),
			TensorInfo("Y", onnxpb.TensorProto_FLOAT, LSTMSteps, D, LSTMBatch, H)},
		w.inits...)
	return Built{Model: Model(g, 22), Weights: w.vals}
}

// Transformer block sizes: the queries have 2 heads on 1 key and value
// head (grouped-query attention), of TransformerHead features each.
const (
	TransformerBatch, TransformerSeq, TransformerHead, TransformerFF = 2, 4, 4, 16
	TransformerQHeads, TransformerKVHeads                            = 2, 1
	TransformerWidth                                                 = TransformerQHeads * TransformerHead
)

// TransformerBlock is a pre-norm decoder block on x [batch, seq, width]:
// y = r + W_down(SwiGLU(W_gate n, W_up n)) with n = LayerNorm(r) and
// r = x + W_o Attention(W_q m, W_k m, W_v m) with m = LayerNorm(x),
// causal grouped-query attention on 3-D inputs.
func TransformerBlock() Built {
	w := newWeights(17)
	const E, KV, FF = TransformerWidth, TransformerKVHeads * TransformerHead, TransformerFF
	nodes := []*onnxpb.NodeProto{
		Node("LayerNormalization", []string{"x", w.add("ln1_scale", E), w.add("ln1_bias", E)}, []string{"m"}, Int("axis", -1)),
		Node("MatMul", []string{"m", w.add("W_q", E, E)}, []string{"q"}),
		Node("MatMul", []string{"m", w.add("W_k", E, KV)}, []string{"k"}),
		Node("MatMul", []string{"m", w.add("W_v", E, KV)}, []string{"v"}),
		Node("Attention", []string{"q", "k", "v"}, []string{"a"},
			Int("q_num_heads", TransformerQHeads), Int("kv_num_heads", TransformerKVHeads), Int("is_causal", 1)),
		Node("MatMul", []string{"a", w.add("W_o", E, E)}, []string{"o"}),
		Node("Add", []string{"x", "o"}, []string{"r"}),
		Node("LayerNormalization", []string{"r", w.add("ln2_scale", E), w.add("ln2_bias", E)}, []string{"n"}, Int("axis", -1)),
		Node("MatMul", []string{"n", w.add("W_gate", E, FF)}, []string{"gate"}),
		Node("MatMul", []string{"n", w.add("W_up", E, FF)}, []string{"up"}),
		Node("SwiGLU", []string{"gate", "up"}, []string{"s"}),
		Node("MatMul", []string{"s", w.add("W_down", FF, E)}, []string{"d"}),
		Node("Add", []string{"r", "d"}, []string{"y"}),
	}
	g := Graph("transformer_block", nodes,
		[]*onnxpb.ValueInfoProto{TensorInfo("x", onnxpb.TensorProto_FLOAT, TransformerBatch, TransformerSeq, E)},
		[]*onnxpb.ValueInfoProto{TensorInfo("y", onnxpb.TensorProto_FLOAT, TransformerBatch, TransformerSeq, E)},
		w.inits...)
	return Built{Model: Model(g, 28), Weights: w.vals}
}
