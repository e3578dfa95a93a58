package stdlib_test

import (
	"math"

	"tofuc/internal/onnxref"
	"tofuc/lang/ir"
	"tofuc/runtime/tensor"
)

// Interpreter cases for stdlib/rnn.tdl: one step of each cell against the
// ONNX formulas written out in Go (internal/onnxref), with every
// activation, clipping, peepholes, input_forget and linear_before_reset,
// and the gate order shown by hand.

// rnnCell is a cell's attributes for the interpreter and for onnxref.
type rnnCell struct {
	attrs map[string]ir.AttrValue
	ref   onnxref.Cell
}

// rnnAttrs builds the attributes of a cell with the given activations,
// clip and flags (name, value pairs).
func rnnAttrs(acts []onnxref.Activation, clip float64, flags ...any) rnnCell {
	names, alpha, beta := ir.AttrValue{Kind: ir.AttrList}, ir.AttrValue{Kind: ir.AttrList}, ir.AttrValue{Kind: ir.AttrList}
	for _, a := range acts {
		names.List = append(names.List, spStr(a.Name))
		alpha.List = append(alpha.List, aFloat(a.Alpha))
		beta.List = append(beta.List, aFloat(a.Beta))
	}
	c := rnnCell{attrs: map[string]ir.AttrValue{"activations": names, "alpha": alpha, "beta": beta, "clip": aFloat(clip)},
		ref: onnxref.Cell{Activations: acts, Clip: clip}}
	for i := 0; i < len(flags); i += 2 {
		name, on := flags[i].(string), flags[i+1].(bool)
		c.attrs[name] = aBool(on)
		switch name {
		case "input_forget":
			c.ref.InputForget = on
		case "linear_before_reset":
			c.ref.LinearBeforeReset = on
		}
	}
	return c
}

func (c rnnCell) lstm(in []*tensor.Tensor) []*tensor.Tensor {
	h, cn := c.ref.LSTM(in[0], in[1], in[2], in[3], in[4], in[5], in[6])
	return []*tensor.Tensor{h, cn}
}

func (c rnnCell) gru(in []*tensor.Tensor) []*tensor.Tensor {
	return []*tensor.Tensor{c.ref.GRU(in[0], in[1], in[2], in[3], in[4])}
}

func (c rnnCell) rnn(in []*tensor.Tensor) []*tensor.Tensor {
	return []*tensor.Tensor{c.ref.RNN(in[0], in[1], in[2], in[3], in[4])}
}

func act(name string, ab ...float64) onnxref.Activation {
	a := onnxref.Activation{Name: name}
	if len(ab) > 0 {
		a.Alpha = ab[0]
	}
	if len(ab) > 1 {
		a.Beta = ab[1]
	}
	return a
}

// rnnActivations are all of ONNX's recurrent activations, with alpha and
// beta where they take them.
var rnnActivations = []onnxref.Activation{
	act("sigmoid"), act("tanh"), act("relu"), act("affine", 0.7, -0.2), act("leakyrelu", 0.1),
	act("thresholdedrelu", 0.3), act("scaledtanh", 1.5, 0.5), act("hardsigmoid", 0.25, 0.4),
	act("elu", 0.8), act("softsign"), act("softplus"),
}

func init() {
	const B, I, H = 2, 3, 4
	x, h, c := randn(71, B, I), randn(72, B, H), randn(73, B, H)
	lstmIn := []*tensor.Tensor{x, h, c, randn(74, 4*H, I), randn(75, 4*H, H), randn(76, 8*H), randn(83, 3*H)}
	gruIn := []*tensor.Tensor{x, h, randn(84, 3*H, I), randn(85, 3*H, H), randn(86, 6*H)}
	rnnIn := []*tensor.Tensor{x, h, randn(88, H, I), randn(89, H, H), randn(90, 2*H)}
	lstmDefault := rnnAttrs([]onnxref.Activation{act("sigmoid"), act("tanh"), act("tanh")}, 0)
	gruDefault := rnnAttrs([]onnxref.Activation{act("sigmoid"), act("tanh")}, 0)
	lstmCustom := rnnAttrs([]onnxref.Activation{act("hardsigmoid", 0.3, 0.6), act("relu"), act("scaledtanh", 2, 0.5)}, 0.5, "input_forget", true)
	gruPyTorch := rnnAttrs([]onnxref.Activation{act("sigmoid"), act("tanh")}, 0, "linear_before_reset", true)
	gruCustom := rnnAttrs([]onnxref.Activation{act("elu", 0.5), act("softsign")}, 0.4)
	register(
		opCase{op: "lstm_cell", name: "defaults, random weights and peepholes", tol: 1e-5, inputs: lstmIn,
			want: lstmDefault.lstm},
		opCase{op: "lstm_cell", name: "batch 1, H 1", tol: 1e-5, want: lstmDefault.lstm,
			inputs: []*tensor.Tensor{randn(77, 1, 5), randn(78, 1, 1), randn(79, 1, 1), randn(80, 4, 5), randn(81, 4, 1), randn(82, 8), randn(91, 3)}},
		opCase{op: "lstm_cell", name: "clip 0.5, input_forget, hardsigmoid, relu, scaledtanh", tol: 1e-5, inputs: lstmIn,
			attrs: lstmCustom.attrs, want: lstmCustom.lstm},
		// With zero weights and peepholes the gates are the biases (Wb +
		// Rb): i = f = o = sigmoid(0) = 1/2 and c~ = tanh(b_c), so c' =
		// c/2 + tanh(b_c)/2; a bias of +-30 on one gate saturates it and
		// shows where each gate sits (i, o, f, c).
		opCase{op: "lstm_cell", name: "gate order by bias", tol: 1e-6,
			inputs: []*tensor.Tensor{
				floats([]int{1, 1}, 0), floats([]int{1, 1}, 0), floats([]int{1, 1}, 0.8),
				floats([]int{4, 1}, 0, 0, 0, 0), floats([]int{4, 1}, 0, 0, 0, 0),
				floats([]int{8}, 30, 15, -30, 0.25, 0, 15, 0, 0.25), floats([]int{3}, 0, 0, 0)},
			// i = 1, o = 1, f = 0, c~ = tanh(0.5): c' = tanh(0.5), h' = tanh(tanh(0.5)).
			want: func([]*tensor.Tensor) []*tensor.Tensor {
				g := math.Tanh(0.5)
				return []*tensor.Tensor{floats([]int{1, 1}, math.Tanh(g)), floats([]int{1, 1}, g)}
			}},

		opCase{op: "gru_cell", name: "defaults, random weights", tol: 1e-5, inputs: gruIn, want: gruDefault.gru},
		opCase{op: "gru_cell", name: "linear_before_reset (PyTorch)", tol: 1e-5, inputs: gruIn,
			attrs: gruPyTorch.attrs, want: gruPyTorch.gru},
		opCase{op: "gru_cell", name: "clip 0.4, elu, softsign", tol: 1e-5, inputs: gruIn,
			attrs: gruCustom.attrs, want: gruCustom.gru},
		// Zero weights: z = sigmoid(-30) ~ 0, r = 1/2 and the candidate
		// is tanh(Wb_h + r Rb_h) with linear_before_reset, tanh(Wb_h +
		// Rb_h) without: the reset gate multiplies only R_h's term.
		opCase{op: "gru_cell", name: "gate order by bias, linear_before_reset", tol: 1e-6,
			attrs: gruPyTorch.attrs,
			inputs: []*tensor.Tensor{
				floats([]int{1, 1}, 0), floats([]int{1, 1}, 0.6),
				floats([]int{3, 1}, 0, 0, 0), floats([]int{3, 1}, 0, 0, 0),
				floats([]int{6}, -30, 0, 0.25, 0, 0, 0.5)},
			want: func([]*tensor.Tensor) []*tensor.Tensor {
				z := 1 / (1 + math.Exp(30))
				return []*tensor.Tensor{floats([]int{1, 1}, (1-z)*math.Tanh(0.5)+z*0.6)}
			}},

		opCase{op: "rnn_cell", name: "by hand", tol: 1e-6,
			inputs: []*tensor.Tensor{
				floats([]int{1, 2}, 1, 2), floats([]int{1, 1}, -1),
				floats([]int{1, 2}, 0.5, 0.25), floats([]int{1, 1}, 2), floats([]int{2}, 0.1, -0.05)},
			// 0.5 + 0.5 - 2 + 0.1 - 0.05 = -0.95.
			want: func([]*tensor.Tensor) []*tensor.Tensor {
				return []*tensor.Tensor{floats([]int{1, 1}, math.Tanh(-0.95))}
			}},
	)
	// The steps, their input projected by project and R transposed, against
	// the cells.
	lstmStep := func(in []*tensor.Tensor) []*tensor.Tensor {
		return []*tensor.Tensor{project(in[0], in[3], in[5], 0, 4*H), in[1], in[2], transpose2(in[4]), in[6]}
	}
	gruStep := []*tensor.Tensor{project(x, gruIn[2], gruIn[4], 0), h, transpose2(gruIn[3]), tensor.FromFloats(gruIn[4].DType, []int{3 * H}, gruIn[4].F[3*H:])}
	rnnStep := []*tensor.Tensor{project(x, rnnIn[2], rnnIn[4], 0, H), h, transpose2(rnnIn[3])}
	of := func(in []*tensor.Tensor, want func([]*tensor.Tensor) []*tensor.Tensor) func([]*tensor.Tensor) []*tensor.Tensor {
		return func([]*tensor.Tensor) []*tensor.Tensor { return want(in) }
	}
	// lstm_step stacks h' and c' on an axis before the last.
	stacked := func(want func([]*tensor.Tensor) []*tensor.Tensor) func([]*tensor.Tensor) []*tensor.Tensor {
		return func(in []*tensor.Tensor) []*tensor.Tensor {
			hc := want(in)
			out := tensor.New(hc[0].DType, []int{B, 2, H})
			for n := range B {
				for s := range 2 {
					for j := range H {
						out.Set(hc[s].At(n, j), n, s, j)
					}
				}
			}
			return []*tensor.Tensor{out}
		}
	}
	rnnTanh := rnnAttrs([]onnxref.Activation{act("softsign")}, 0.8)
	register(
		opCase{op: "lstm_step", name: "defaults", tol: 1e-5, inputs: lstmStep(lstmIn), want: of(lstmIn, stacked(lstmDefault.lstm))},
		opCase{op: "lstm_step", name: "clip 0.5, input_forget, hardsigmoid, relu, scaledtanh", tol: 1e-5, inputs: lstmStep(lstmIn),
			attrs: lstmCustom.attrs, want: of(lstmIn, stacked(lstmCustom.lstm))},
		opCase{op: "gru_step", name: "defaults", tol: 1e-5, inputs: gruStep, want: of(gruIn, gruDefault.gru)},
		opCase{op: "gru_step", name: "linear_before_reset (PyTorch)", tol: 1e-5, inputs: gruStep, attrs: gruPyTorch.attrs, want: of(gruIn, gruPyTorch.gru)},
		opCase{op: "gru_step", name: "clip 0.4, elu, softsign", tol: 1e-5, inputs: gruStep, attrs: gruCustom.attrs, want: of(gruIn, gruCustom.gru)},
		opCase{op: "rnn_step", name: "softsign, clip 0.8", tol: 1e-5, inputs: rnnStep, attrs: rnnTanh.attrs, want: of(rnnIn, rnnTanh.rnn)},
	)
	// Two cells stacked (a bidirectional layer's directions): each is its
	// own step, the second with other weights and states.
	lstmIn2 := []*tensor.Tensor{randn(92, B, I), randn(93, B, H), randn(94, B, H), randn(95, 4*H, I), randn(96, 4*H, H), randn(97, 8*H), randn(98, 3*H)}
	one, two := lstmStep(lstmIn), lstmStep(lstmIn2)
	both := make([]*tensor.Tensor, len(one))
	for i := range one {
		both[i] = stackFirst(one[i], two[i])
	}
	register(opCase{op: "lstm_step", name: "two directions stacked", tol: 1e-5, inputs: both,
		want: func([]*tensor.Tensor) []*tensor.Tensor {
			return []*tensor.Tensor{stackFirst(stacked(lstmDefault.lstm)(lstmIn)[0], stacked(lstmDefault.lstm)(lstmIn2)[0])}
		}})
	// Every activation, in the Elman cell (clipped) and as the GRU's f.
	for _, a := range rnnActivations {
		rnn := rnnAttrs([]onnxref.Activation{a}, 1.5)
		gru := rnnAttrs([]onnxref.Activation{a, act("tanh")}, 0)
		register(
			opCase{op: "rnn_cell", name: a.Name + ", clip 1.5", tol: 1e-5, inputs: rnnIn, attrs: rnn.attrs, want: rnn.rnn},
			opCase{op: "gru_cell", name: "f = " + a.Name, tol: 1e-5, inputs: gruIn, attrs: gru.attrs, want: gru.gru},
		)
	}
}

// project is x W^T plus the blocks of b starting at offsets, each as wide
// as W has rows: a step's input projection with its biases.
func project(x, W, b *tensor.Tensor, offsets ...int) *tensor.Tensor {
	n, k, g := x.Shape[0], x.Shape[1], W.Shape[0]
	out := tensor.New(x.DType, []int{n, g})
	for i := range n {
		for j := range g {
			v := 0.0
			for l := range k {
				v += x.At(i, l) * W.At(j, l)
			}
			for _, o := range offsets {
				v += b.Flat(o + j)
			}
			out.Set(v, i, j)
		}
	}
	return out
}

// stackFirst stacks tensors of one shape on a new leading axis.
func stackFirst(ts ...*tensor.Tensor) *tensor.Tensor {
	out := tensor.New(ts[0].DType, append([]int{len(ts)}, ts[0].Shape...))
	for i, t := range ts {
		for e := range t.Len() {
			out.SetFlat(i*t.Len()+e, t.Flat(e))
		}
	}
	return out
}

// transpose2 is a matrix transposed.
func transpose2(m *tensor.Tensor) *tensor.Tensor {
	out := tensor.New(m.DType, []int{m.Shape[1], m.Shape[0]})
	for i := range m.Shape[0] {
		for j := range m.Shape[1] {
			out.Set(m.At(i, j), j, i)
		}
	}
	return out
}
