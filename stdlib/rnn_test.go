package stdlib_test

import (
	"math"

	"tofuc/lang"
	"tofuc/runtime/tensor"
)

// Interpreter cases for stdlib/rnn.tdl: one step of each cell against the
// PyTorch formulas written out in Go (weights [gates * H, input], gate
// order i, f, g, o for LSTM and r, z, n for GRU).

func rnnSigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// rnnGate is x W[g]^T + h R[g]^T for the row g of W and R, batch row n.
func rnnGate(x, h, W, R *tensor.Tensor, n, g int) (fromX, fromH float64) {
	for k := range x.Shape[1] {
		fromX += x.At(n, k) * W.At(g, k)
	}
	for k := range h.Shape[1] {
		fromH += h.At(n, k) * R.At(g, k)
	}
	return fromX, fromH
}

func rnnLSTM(in []*tensor.Tensor) []*tensor.Tensor {
	x, h, c, W, R, b := in[0], in[1], in[2], in[3], in[4], in[5]
	B, H := h.Shape[0], h.Shape[1]
	hn, cn := tensor.New(lang.F32, []int{B, H}), tensor.New(lang.F32, []int{B, H})
	for n := range B {
		for j := range H {
			z := func(gate int) float64 {
				g := gate*H + j
				fx, fh := rnnGate(x, h, W, R, n, g)
				return fx + fh + b.At(g)
			}
			i, f, g, o := rnnSigmoid(z(0)), rnnSigmoid(z(1)), math.Tanh(z(2)), rnnSigmoid(z(3))
			cc := f*c.At(n, j) + i*g
			cn.Set(cc, n, j)
			hn.Set(o*math.Tanh(cc), n, j)
		}
	}
	return []*tensor.Tensor{hn, cn}
}

func rnnGRU(in []*tensor.Tensor) []*tensor.Tensor {
	x, h, W, R, bw, br := in[0], in[1], in[2], in[3], in[4], in[5]
	B, H := h.Shape[0], h.Shape[1]
	out := tensor.New(lang.F32, []int{B, H})
	for n := range B {
		for j := range H {
			gate := func(k int) (float64, float64) {
				g := k*H + j
				fx, fh := rnnGate(x, h, W, R, n, g)
				return fx + bw.At(g), fh + br.At(g)
			}
			rx, rh := gate(0)
			zx, zh := gate(1)
			nx, nh := gate(2)
			r, z := rnnSigmoid(rx+rh), rnnSigmoid(zx+zh)
			cand := math.Tanh(nx + r*nh)
			out.Set((1-z)*cand+z*h.At(n, j), n, j)
		}
	}
	return []*tensor.Tensor{out}
}

func rnnElman(in []*tensor.Tensor) []*tensor.Tensor {
	x, h, W, R, b := in[0], in[1], in[2], in[3], in[4]
	B, H := h.Shape[0], h.Shape[1]
	out := tensor.New(lang.F32, []int{B, H})
	for n := range B {
		for j := range H {
			fx, fh := rnnGate(x, h, W, R, n, j)
			out.Set(math.Tanh(fx+fh+b.At(j)), n, j)
		}
	}
	return []*tensor.Tensor{out}
}

func init() {
	const B, I, H = 2, 3, 4
	x, h, c := randn(71, B, I), randn(72, B, H), randn(73, B, H)
	register(
		opCase{op: "lstm_cell", name: "random weights, PyTorch formulas", tol: 1e-5, want: rnnLSTM,
			inputs: []*tensor.Tensor{x, h, c, randn(74, 4*H, I), randn(75, 4*H, H), randn(76, 4*H)}},
		opCase{op: "lstm_cell", name: "batch 1, H 1", tol: 1e-5, want: rnnLSTM,
			inputs: []*tensor.Tensor{randn(77, 1, 5), randn(78, 1, 1), randn(79, 1, 1), randn(80, 4, 5), randn(81, 4, 1), randn(82, 4)}},
		// With zero weights the gates are the biases: i = f = o = sigmoid(0)
		// = 1/2 and g = tanh(b_g), so c' = c/2 + tanh(b_g)/2; a bias of +-30
		// on one gate saturates it and shows where each gate sits.
		opCase{op: "lstm_cell", name: "gate order by bias", tol: 1e-6,
			inputs: []*tensor.Tensor{
				floats([]int{1, 1}, 0), floats([]int{1, 1}, 0), floats([]int{1, 1}, 0.8),
				floats([]int{4, 1}, 0, 0, 0, 0), floats([]int{4, 1}, 0, 0, 0, 0),
				floats([]int{4}, 30, -30, 0.5, 30)},
			// i = 1, f = 0, g = tanh(0.5), o = 1: c' = tanh(0.5), h' = tanh(tanh(0.5)).
			want: func([]*tensor.Tensor) []*tensor.Tensor {
				g := math.Tanh(0.5)
				return []*tensor.Tensor{floats([]int{1, 1}, math.Tanh(g)), floats([]int{1, 1}, g)}
			}},

		opCase{op: "gru_cell", name: "random weights, PyTorch formulas", tol: 1e-5, want: rnnGRU,
			inputs: []*tensor.Tensor{x, h, randn(84, 3*H, I), randn(85, 3*H, H), randn(86, 3*H), randn(87, 3*H)}},
		// Zero weights: r = sigmoid(bw_r + br_r), z likewise and n =
		// tanh(bw_n + r br_n): the reset gate multiplies only the recurrent
		// bias of n.
		opCase{op: "gru_cell", name: "gate order by bias", tol: 1e-6,
			inputs: []*tensor.Tensor{
				floats([]int{1, 1}, 0), floats([]int{1, 1}, 0.6),
				floats([]int{3, 1}, 0, 0, 0), floats([]int{3, 1}, 0, 0, 0),
				floats([]int{3}, 0, -30, 0.25), floats([]int{3}, 0, 0, 0.5)},
			// r = 1/2, z = sigmoid(-30), n = tanh(0.25 + 0.5 * 0.5).
			want: func([]*tensor.Tensor) []*tensor.Tensor {
				z := 1 / (1 + math.Exp(30))
				return []*tensor.Tensor{floats([]int{1, 1}, (1-z)*math.Tanh(0.5)+z*0.6)}
			}},

		opCase{op: "rnn_cell", name: "random weights", tol: 1e-5, want: rnnElman,
			inputs: []*tensor.Tensor{x, h, randn(88, H, I), randn(89, H, H), randn(90, H)}},
		opCase{op: "rnn_cell", name: "by hand", tol: 1e-6,
			inputs: []*tensor.Tensor{
				floats([]int{1, 2}, 1, 2), floats([]int{1, 1}, -1),
				floats([]int{1, 2}, 0.5, 0.25), floats([]int{1, 1}, 2), floats([]int{1}, 0.1)},
			// 0.5 + 0.5 - 2 + 0.1 = -0.9.
			want: func([]*tensor.Tensor) []*tensor.Tensor {
				return []*tensor.Tensor{floats([]int{1, 1}, math.Tanh(-0.9))}
			}},
	)
}
