// Package onnxref is test support: ONNX's recurrent cells and attention
// written directly in Go from the ONNX specification (loops over
// elements, no TDL), the independent expectation that the stdlib cells
// and the imported ONNX models are compared with. Tensors are f32 unless
// stated; the computation is in float64.
package onnxref

import (
	"math"

	"tofuc/lang"
	"tofuc/runtime/tensor"
)

// Activation is an ONNX recurrent activation: a lower-case name and its
// alpha and beta (used by affine, leakyrelu, thresholdedrelu,
// scaledtanh, hardsigmoid and elu).
type Activation struct {
	Name        string
	Alpha, Beta float64
}

// Apply evaluates the activation at v.
func (a Activation) Apply(v float64) float64 {
	switch a.Name {
	case "sigmoid":
		return 1 / (1 + math.Exp(-v))
	case "tanh":
		return math.Tanh(v)
	case "relu":
		return math.Max(v, 0)
	case "affine":
		return a.Alpha*v + a.Beta
	case "leakyrelu":
		if v < 0 {
			return a.Alpha * v
		}
		return v
	case "thresholdedrelu":
		if v > a.Alpha {
			return v
		}
		return 0
	case "scaledtanh":
		return a.Alpha * math.Tanh(a.Beta*v)
	case "hardsigmoid":
		return math.Max(0, math.Min(1, a.Alpha*v+a.Beta))
	case "elu":
		if v < 0 {
			return a.Alpha * (math.Exp(v) - 1)
		}
		return v
	case "softsign":
		return v / (1 + math.Abs(v))
	case "softplus":
		return math.Log1p(math.Exp(v))
	}
	panic("onnxref: unknown activation " + a.Name)
}

// Cell holds the attributes of one recurrent step.
type Cell struct {
	// Activations are f, g, h (LSTM), f, g (GRU) or f (RNN).
	Activations []Activation
	// Clip > 0 bounds the gates' pre-activations to [-Clip, Clip] (not the
	// LSTM's cell state before h, as in ONNX Runtime).
	Clip float64
	// InputForget couples the LSTM's forget gate to its input gate (f = 1 - i).
	InputForget bool
	// LinearBeforeReset applies the GRU's reset gate after R_h.
	LinearBeforeReset bool
}

func (c Cell) act(k int, v float64) float64 {
	if c.Clip > 0 {
		v = math.Max(-c.Clip, math.Min(c.Clip, v))
	}
	return c.Activations[k].Apply(v)
}

// dot is sum_k x[n, k] w[row, k].
func dot(x *tensor.Tensor, n int, w *tensor.Tensor, row int) float64 {
	s := 0.0
	for k := range x.Shape[1] {
		s += x.At(n, k) * w.At(row, k)
	}
	return s
}

// LSTM is one LSTM step (gate order i, o, f, c) of x [B, I], h and c
// [B, H], W [4H, I], R [4H, H], b [8H] (Wb then Rb) and peepholes p [3H]
// (i, o, f; nil for none): it returns h' and c'.
func (c Cell) LSTM(x, h, cs, W, R, b, p *tensor.Tensor) (hn, cn *tensor.Tensor) {
	B, H := h.Shape[0], h.Shape[1]
	hn, cn = tensor.New(lang.F32, []int{B, H}), tensor.New(lang.F32, []int{B, H})
	peep := func(gate, j int) float64 {
		if p == nil {
			return 0
		}
		return p.At(gate*H + j)
	}
	for n := range B {
		for j := range H {
			z := func(gate int) float64 {
				g := gate*H + j
				return dot(x, n, W, g) + dot(h, n, R, g) + b.At(g) + b.At(4*H+g)
			}
			prev := cs.At(n, j)
			i := c.act(0, z(0)+peep(0, j)*prev)
			f := c.act(0, z(2)+peep(2, j)*prev)
			if c.InputForget {
				f = 1 - i
			}
			cell := f*prev + i*c.act(1, z(3))
			o := c.act(0, z(1)+peep(1, j)*cell)
			cn.Set(cell, n, j)
			hn.Set(o*c.Activations[2].Apply(cell), n, j)
		}
	}
	return hn, cn
}

// GRU is one GRU step (gate order z, r, h) of x [B, I], h [B, H],
// W [3H, I], R [3H, H] and b [6H] (Wb then Rb): it returns h'.
func (c Cell) GRU(x, h, W, R, b *tensor.Tensor) *tensor.Tensor {
	B, H := h.Shape[0], h.Shape[1]
	out := tensor.New(lang.F32, []int{B, H})
	for n := range B {
		r := make([]float64, H)
		for k := range H {
			r[k] = c.act(0, dot(x, n, W, H+k)+dot(h, n, R, H+k)+b.At(H+k)+b.At(4*H+k))
		}
		for j := range H {
			z := c.act(0, dot(x, n, W, j)+dot(h, n, R, j)+b.At(j)+b.At(3*H+j))
			var rh float64
			if c.LinearBeforeReset {
				rh = r[j] * (dot(h, n, R, 2*H+j) + b.At(5*H+j))
			} else {
				for k := range H {
					rh += r[k] * h.At(n, k) * R.At(2*H+j, k)
				}
				rh += b.At(5*H + j)
			}
			cand := c.act(1, dot(x, n, W, 2*H+j)+b.At(2*H+j)+rh)
			out.Set((1-z)*cand+z*h.At(n, j), n, j)
		}
	}
	return out
}

// RNN is one Elman step of x [B, I], h [B, H], W [H, I], R [H, H] and
// b [2H]: it returns h'.
func (c Cell) RNN(x, h, W, R, b *tensor.Tensor) *tensor.Tensor {
	B, H := h.Shape[0], h.Shape[1]
	out := tensor.New(lang.F32, []int{B, H})
	for n := range B {
		for j := range H {
			out.Set(c.act(0, dot(x, n, W, j)+dot(h, n, R, j)+b.At(j)+b.At(H+j)), n, j)
		}
	}
	return out
}

// Attention holds the attributes of ONNX Attention on 4-D tensors.
type Attention struct {
	// Scale multiplies q k^T (0: 1 / sqrt(D)); Softcap > 0 is
	// softcap * tanh(x / softcap).
	Scale, Softcap float64
	// Causal masks keys j > i + Past.
	Causal bool
	Past   int
}

// Scores are those of q [B, HQ, S, D] and k [B, HK, T, D] before the
// softmax, [B, HQ, S, T], up to stage (ONNX's qk_matmul_output_mode): 0
// the scaled product q k^T (query head h reads key head h / (HQ / HK)), 1
// after the softcap, 2 after adding bias, broadcast to [B, HQ, S, T] (nil:
// none), and the causal mask.
func (a Attention) Scores(q, k, bias *tensor.Tensor, stage int) *tensor.Tensor {
	B, HQ, S, D := q.Shape[0], q.Shape[1], q.Shape[2], q.Shape[3]
	HK, T := k.Shape[1], k.Shape[2]
	scale := a.Scale
	if scale == 0 {
		scale = 1 / math.Sqrt(float64(D))
	}
	out := tensor.New(lang.F32, []int{B, HQ, S, T})
	for b := range B {
		for h := range HQ {
			for i := range S {
				for j := range T {
					s := 0.0
					for d := range D {
						s += q.At(b, h, i, d) * k.At(b, h/(HQ/HK), j, d)
					}
					s *= scale
					if a.Softcap > 0 && stage >= 1 {
						s = a.Softcap * math.Tanh(s/a.Softcap)
					}
					if bias != nil && stage >= 2 {
						s += broadcastAt(bias, b, h, i, j)
					}
					if a.Causal && stage >= 2 && j > i+a.Past {
						s = math.Inf(-1)
					}
					out.Set(s, b, h, i, j)
				}
			}
		}
	}
	return out
}

// Weights are the softmax over the keys of the scores (stage 2); a query
// whose keys are all masked gets zero weights.
func (a Attention) Weights(q, k, bias *tensor.Tensor) *tensor.Tensor {
	w := a.Scores(q, k, bias, 2)
	T := w.Shape[3]
	for r := 0; r < w.Len(); r += T {
		row := w.F[r : r+T]
		m := math.Inf(-1)
		for _, s := range row {
			m = math.Max(m, s)
		}
		sum := 0.0
		for j, s := range row {
			row[j] = 0
			if !math.IsInf(m, -1) {
				row[j] = math.Exp(s - m)
			}
			sum += row[j]
		}
		for j := range row {
			if sum > 0 {
				row[j] /= sum
			}
		}
	}
	return w
}

// Apply is the attention output [B, HQ, S, DV] of q, k and v
// [B, HK, T, DV] with bias (see Scores).
func (a Attention) Apply(q, k, v, bias *tensor.Tensor) *tensor.Tensor {
	return Values(a.Weights(q, k, bias), v)
}

// Values is the output of weights w [B, HQ, S, T] on values v
// [B, HK, T, DV]: query head h reads value head h / (HQ / HK).
func Values(w, v *tensor.Tensor) *tensor.Tensor {
	B, HQ, S, T := w.Shape[0], w.Shape[1], w.Shape[2], w.Shape[3]
	HK, DV := v.Shape[1], v.Shape[3]
	out := tensor.New(lang.F32, []int{B, HQ, S, DV})
	for b := range B {
		for h := range HQ {
			for i := range S {
				for c := range DV {
					s := 0.0
					for j := range T {
						s += w.At(b, h, i, j) * v.At(b, h/(HQ/HK), j, c)
					}
					out.Set(s, b, h, i, c)
				}
			}
		}
	}
	return out
}

// broadcastAt reads t at idx with NumPy broadcasting: t's axes align with
// the last ones of idx, and an axis of extent 1 is read at 0.
func broadcastAt(t *tensor.Tensor, idx ...int) float64 {
	at := make([]int, t.Rank())
	off := len(idx) - t.Rank()
	for d := range at {
		if t.Shape[d] != 1 {
			at[d] = idx[off+d]
		}
	}
	return t.At(at...)
}
