package onnx

import (
	"math/rand/v2"
	"strings"
	"testing"

	"tofuc/frontend/onnx/onnxpb"
	"tofuc/internal/onnxbuild"
	"tofuc/internal/onnxref"
	"tofuc/lang"
	"tofuc/runtime/tensor"
)

// The recurrent operators against a layer run in Go (refLayer) from the
// ONNX cells of internal/onnxref: directions, both layouts, sequence
// lengths shorter than the input, initial states, activations with their
// alpha and beta, clipping; ONNX's own node tests cover fewer of these.

// rnnCase is one recurrent node on X [T, B, I] (time-major), with the
// node's inputs by name and its attributes.
type rnnCase struct {
	name, op            string
	attrs               []*onnxpb.AttributeProto
	reverse             []bool
	cell                onnxref.Cell
	cell2               *onnxref.Cell // the second direction's, when it differs
	lens                []int64       // nil: all steps
	batchMajor, initial bool
}

const rnnT, rnnB, rnnI, rnnH = 4, 3, 2, 3

func TestImportRecurrent(t *testing.T) {
	act := func(name string, ab ...float64) onnxref.Activation {
		a := onnxref.Activation{Name: name}
		if len(ab) == 2 {
			a.Alpha, a.Beta = ab[0], ab[1]
		}
		return a
	}
	sig, tanh := act("sigmoid"), act("tanh")
	for _, c := range []rnnCase{
		{name: "lstm forward, defaults", op: "LSTM", reverse: []bool{false},
			cell: onnxref.Cell{Activations: []onnxref.Activation{sig, tanh, tanh}}},
		{name: "lstm bidirectional, lengths, initial states, batch-major", op: "LSTM", reverse: []bool{false, true},
			attrs: []*onnxpb.AttributeProto{onnxbuild.String("direction", "bidirectional"), onnxbuild.Int("layout", 1)},
			cell:  onnxref.Cell{Activations: []onnxref.Activation{sig, tanh, tanh}}, lens: []int64{4, 2, 1}, batchMajor: true, initial: true},
		// alpha and beta are consumed by the activations that take them:
		// HardSigmoid takes (0.3, 0.6), ScaledTanh (2, 0.5), the second
		// direction's HardSigmoid (0.2, 0.7) and its ScaledTanh the
		// defaults (1, 1).
		{name: "lstm activations, clip, input_forget", op: "LSTM", reverse: []bool{false, true},
			attrs: []*onnxpb.AttributeProto{onnxbuild.String("direction", "bidirectional"), onnxbuild.Float("clip", 0.8), onnxbuild.Int("input_forget", 1),
				onnxbuild.Strings("activations", "HardSigmoid", "Relu", "ScaledTanh", "HardSigmoid", "Tanh", "ScaledTanh"),
				onnxbuild.Floats("activation_alpha", 0.3, 2, 0.2), onnxbuild.Floats("activation_beta", 0.6, 0.5, 0.7)},
			cell:  onnxref.Cell{Activations: []onnxref.Activation{act("hardsigmoid", 0.3, 0.6), act("relu"), act("scaledtanh", 2, 0.5)}, Clip: 0.8, InputForget: true},
			cell2: &onnxref.Cell{Activations: []onnxref.Activation{act("hardsigmoid", 0.2, 0.7), tanh, act("scaledtanh", 1, 1)}, Clip: 0.8, InputForget: true}},
		{name: "gru reverse, lengths, linear_before_reset", op: "GRU", reverse: []bool{true},
			attrs: []*onnxpb.AttributeProto{onnxbuild.String("direction", "reverse"), onnxbuild.Int("linear_before_reset", 1)},
			cell:  onnxref.Cell{Activations: []onnxref.Activation{sig, tanh}, LinearBeforeReset: true}, lens: []int64{3, 4, 2}, initial: true},
		{name: "rnn relu, clip, batch-major", op: "RNN", reverse: []bool{false},
			attrs: []*onnxpb.AttributeProto{onnxbuild.Strings("activations", "Relu"), onnxbuild.Float("clip", 1.5), onnxbuild.Int("layout", 1)},
			cell:  onnxref.Cell{Activations: []onnxref.Activation{act("relu")}, Clip: 1.5}, batchMajor: true},
		// Bidirectional without lengths: the directions run stacked, the
		// reverse one's input reversed in time.
		{name: "lstm bidirectional, initial states", op: "LSTM", reverse: []bool{false, true},
			attrs: []*onnxpb.AttributeProto{onnxbuild.String("direction", "bidirectional")},
			cell:  onnxref.Cell{Activations: []onnxref.Activation{sig, tanh, tanh}}, initial: true},
		{name: "gru bidirectional, linear_before_reset, batch-major", op: "GRU", reverse: []bool{false, true},
			attrs: []*onnxpb.AttributeProto{onnxbuild.String("direction", "bidirectional"), onnxbuild.Int("linear_before_reset", 1), onnxbuild.Int("layout", 1)},
			cell:  onnxref.Cell{Activations: []onnxref.Activation{sig, tanh}, LinearBeforeReset: true}, batchMajor: true},
		{name: "rnn bidirectional defaults, lengths", op: "RNN", reverse: []bool{false, true},
			attrs: []*onnxpb.AttributeProto{onnxbuild.String("direction", "bidirectional")},
			cell:  onnxref.Cell{Activations: []onnxref.Activation{tanh}}, lens: []int64{1, 4, 3}},
	} {
		t.Run(c.name, func(t *testing.T) { c.check(t) })
	}
}

func (c rnnCase) gates() int {
	return map[string]int{"LSTM": 4, "GRU": 3, "RNN": 1}[c.op]
}

// check imports the node, runs it and compares Y, Y_h (and Y_c) with
// refLayer.
func (c rnnCase) check(t *testing.T) {
	r := rand.New(rand.NewPCG(uint64(len(c.name)), 9))
	rnd := func(shape ...int) *tensor.Tensor {
		x := tensor.New(lang.F32, shape)
		for i := range x.Len() {
			x.SetFlat(i, r.NormFloat64())
		}
		return x
	}
	D, G := len(c.reverse), c.gates()
	in := map[string]*tensor.Tensor{"X": rnd(rnnT, rnnB, rnnI), "W": rnd(D, G*rnnH, rnnI), "R": rnd(D, G*rnnH, rnnH), "B": rnd(D, 2*G*rnnH)}
	names := []string{"X", "W", "R", "B", "", ""}
	if c.lens != nil {
		in["sequence_lens"], names[4] = tensor.FromInts(lang.I32, []int{rnnB}, c.lens), "sequence_lens"
	}
	states := []string{"initial_h"}
	outs := []string{"Y", "Y_h"}
	if c.op == "LSTM" {
		states, outs, names = append(states, "initial_c"), append(outs, "Y_c"), append(names, "")
	}
	for s, name := range states {
		if c.initial {
			in[name], names[5+s] = rnd(D, rnnB, rnnH), name
		}
	}
	want := refLayer(c, in)
	feed := map[string]*tensor.Tensor{}
	var infos []*onnxpb.ValueInfoProto
	for _, name := range names {
		if x := in[name]; x != nil {
			if c.batchMajor && (name == "X" || strings.HasPrefix(name, "initial_")) {
				x = swap01(x)
			}
			feed[name] = x
			infos = append(infos, onnxbuild.TensorInfo(name, onnxpb.TensorProto_DataType(map[lang.DType]int32{lang.F32: 1, lang.I32: 6}[x.DType]), intsAny(x.Shape)...))
		}
	}
	var outInfos []*onnxpb.ValueInfoProto
	for _, o := range outs {
		outInfos = append(outInfos, onnxbuild.TensorInfo(o, onnxpb.TensorProto_FLOAT))
	}
	node := onnxbuild.Node(c.op, names, outs, append(c.attrs, onnxbuild.Int("hidden_size", rnnH))...)
	m := model(onnxbuild.Graph("g", []*onnxpb.NodeProto{node}, infos, outInfos), 22)
	_, got := run(t, m, Options{}, feed, nil)
	for i, w := range want {
		if c.batchMajor {
			w = batchMajorOutput(i, w)
		}
		if err := tensor.Compare(got[i], w, tensor.Tolerance{Rel: 1e-5, Abs: 1e-6}); err != nil {
			t.Errorf("%s: %v", outs[i], err)
		}
	}
}

func intsAny(shape []int) []any {
	out := make([]any, len(shape))
	for i, d := range shape {
		out[i] = d
	}
	return out
}

// refLayer runs each batch entry of each direction on its own, step by
// step over its own length (a reverse direction from its last step), with
// onnxref's cells: Y [T, D, B, H] is zero past a sequence's end, Y_h (and
// Y_c) [D, B, H] the states after its last step.
func refLayer(c rnnCase, in map[string]*tensor.Tensor) []*tensor.Tensor {
	D := len(c.reverse)
	y, finals := tensor.New(lang.F32, []int{rnnT, D, rnnB, rnnH}), []*tensor.Tensor{}
	nStates := 1
	if c.op == "LSTM" {
		nStates = 2
	}
	for range nStates {
		finals = append(finals, tensor.New(lang.F32, []int{D, rnnB, rnnH}))
	}
	for d, rev := range c.reverse {
		cell := c.cell
		if d == 1 && c.cell2 != nil {
			cell = *c.cell2
		}
		W, R, B := sub(in["W"], d), sub(in["R"], d), sub(in["B"], d)
		for b := range rnnB {
			state := make([]*tensor.Tensor, nStates)
			for s, name := range []string{"initial_h", "initial_c"}[:nStates] {
				state[s] = tensor.New(lang.F32, []int{1, rnnH})
				if x := in[name]; x != nil {
					state[s] = rowOf(sub(x, d), b)
				}
			}
			steps := rnnT
			if c.lens != nil {
				steps = int(c.lens[b])
			}
			for k := range steps {
				t := k
				if rev {
					t = steps - 1 - k
				}
				x := rowOf(sub(in["X"], t), b)
				switch c.op {
				case "LSTM":
					state[0], state[1] = cell.LSTM(x, state[0], state[1], W, R, B, nil)
				case "GRU":
					state[0] = cell.GRU(x, state[0], W, R, B)
				default:
					state[0] = cell.RNN(x, state[0], W, R, B)
				}
				for j := range rnnH {
					y.Set(state[0].At(0, j), t, d, b, j)
				}
			}
			for s := range state {
				for j := range rnnH {
					finals[s].Set(state[s].At(0, j), d, b, j)
				}
			}
		}
	}
	return append([]*tensor.Tensor{y}, finals...)
}

// sub is x[i] along the first axis; rowOf is row b of a matrix as [1, n].
func sub(x *tensor.Tensor, i int) *tensor.Tensor {
	n := x.Len() / x.Shape[0]
	return tensor.FromFloats(x.DType, x.Shape[1:], x.F[i*n:(i+1)*n])
}

func rowOf(x *tensor.Tensor, b int) *tensor.Tensor {
	n := x.Shape[1]
	return tensor.FromFloats(x.DType, []int{1, n}, x.F[b*n:(b+1)*n])
}

// swap01 swaps the first two axes of a 3-D tensor.
func swap01(x *tensor.Tensor) *tensor.Tensor {
	out := tensor.New(x.DType, []int{x.Shape[1], x.Shape[0], x.Shape[2]})
	for i := range x.Shape[0] {
		for j := range x.Shape[1] {
			for k := range x.Shape[2] {
				out.Set(x.At(i, j, k), j, i, k)
			}
		}
	}
	return out
}

// batchMajorOutput is output i in layout 1: Y [B, T, D, H], the states
// [B, D, H].
func batchMajorOutput(i int, w *tensor.Tensor) *tensor.Tensor {
	if i > 0 {
		return swap01(w)
	}
	T, D, B, H := w.Shape[0], w.Shape[1], w.Shape[2], w.Shape[3]
	out := tensor.New(w.DType, []int{B, T, D, H})
	for t := range T {
		for d := range D {
			for b := range B {
				for h := range H {
					out.Set(w.At(t, d, b, h), b, t, d, h)
				}
			}
		}
	}
	return out
}

func TestImportRecurrentErrors(t *testing.T) {
	x := onnxbuild.TensorInfo("X", onnxpb.TensorProto_FLOAT, 2, "batch", 3)
	w := onnxbuild.TensorInfo("W", onnxpb.TensorProto_FLOAT, 1, 4, 3)
	r := onnxbuild.TensorInfo("R", onnxpb.TensorProto_FLOAT, 1, 4, 4)
	steps := onnxbuild.TensorInfo("X", onnxpb.TensorProto_FLOAT, "T", 2, 3)
	for _, c := range []struct {
		x     *onnxpb.ValueInfoProto
		attrs []*onnxpb.AttributeProto
		want  string
	}{
		{x, nil, `the batch extent is symbolic (batch): input 5 (the initial state) is needed`},
		{steps, nil, `the number of time steps is symbolic (T)`},
		{x, []*onnxpb.AttributeProto{onnxbuild.String("direction", "sideways")}, `direction = "sideways"`},
		{x, []*onnxpb.AttributeProto{onnxbuild.Strings("activations", "Swish")}, `activation "swish"`},
		{x, []*onnxpb.AttributeProto{onnxbuild.Strings("activations", "Tanh", "Tanh")}, `2 activations, expected 1`},
		{x, []*onnxpb.AttributeProto{onnxbuild.Int("hidden_size", 5)}, `hidden_size = 5, but R is [1, 4, 4]`},
	} {
		g := onnxbuild.Graph("g", []*onnxpb.NodeProto{onnxbuild.Node("RNN", []string{"X", "W", "R"}, []string{"Y"}, c.attrs...)},
			[]*onnxpb.ValueInfoProto{c.x, w, r}, []*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("Y", onnxpb.TensorProto_FLOAT)})
		_, err := Import(model(g, 22), Options{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
}

// TestImportRecurrentCallLimit: a recurrence too long to unroll within
// the call limit is an error, found before any step is built.
func TestImportRecurrentCallLimit(t *testing.T) {
	g := onnxbuild.Graph("g", []*onnxpb.NodeProto{onnxbuild.Node("RNN", []string{"X", "W", "R"}, []string{"Y"})},
		[]*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("X", onnxpb.TensorProto_FLOAT, 100, 2, 3),
			onnxbuild.TensorInfo("W", onnxpb.TensorProto_FLOAT, 1, 4, 3), onnxbuild.TensorInfo("R", onnxpb.TensorProto_FLOAT, 1, 4, 4)},
		[]*onnxpb.ValueInfoProto{onnxbuild.TensorInfo("Y", onnxpb.TensorProto_FLOAT)})
	_, err := Import(model(g, 22), Options{CallLimit: 50})
	if want := "unrolling 100 steps: the model would need more than 50 calls"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v, want %q", err, want)
	}
}
