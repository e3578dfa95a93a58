package stdlib_test

import (
	"math"
	"testing"

	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/runtime/tensor"
)

// Interpreter cases for the operators of recent sequence models
// (rotary_embedding, linear_attention_step and _read,
// causal_conv_with_state, tensor_scatter) against direct Go loops
// written from the ONNX definitions.

// refRotary rotates x [B, H, S, D] by cos and sin [B, S, R]: pairs
// (d, d + R), or (2i, 2i + 1) when interleaved, of the first 2R channels.
func refRotary(x, cos, sin *tensor.Tensor, interleaved bool) *tensor.Tensor {
	y := x.Clone()
	r := cos.Shape[2]
	for b := range x.Shape[0] {
		for h := range x.Shape[1] {
			for s := range x.Shape[2] {
				for i := range r {
					a, c := i, i+r
					if interleaved {
						a, c = 2*i, 2*i+1
					}
					x1, x2 := x.At(b, h, s, a), x.At(b, h, s, c)
					co, si := cos.At(b, s, i), sin.At(b, s, i)
					y.Set(co*x1-si*x2, b, h, s, a)
					y.Set(si*x1+co*x2, b, h, s, c)
				}
			}
		}
	}
	return y
}

// refLinearAttention runs ONNX LinearAttention's recurrence on 4-D q
// [B, HQ, T, K], k [B, H, T, K], v [B, H, T, V], decay g [B, H, T, 1 or
// K] and beta [B, H, T, 1] (nil when the rule takes none) from state s
// [B, H, K, V]; it returns the outputs [B, HQ, T, V] and the final state.
func refLinearAttention(q, k, v, g, beta, s *tensor.Tensor, scale float64) (*tensor.Tensor, *tensor.Tensor) {
	nb, hq, steps, dk := q.Shape[0], q.Shape[1], q.Shape[2], q.Shape[3]
	h, dv := k.Shape[1], v.Shape[3]
	groups := hq / h
	state := s.Clone()
	out := tensor.New(lang.F32, []int{nb, hq, steps, dv})
	for t := range steps {
		for b := range nb {
			for j := range h {
				if g != nil {
					for d := range dk {
						e := math.Exp(g.At(b, j, t, min(d, g.Shape[3]-1)))
						for m := range dv {
							state.Set(e*state.At(b, j, d, m), b, j, d, m)
						}
					}
				}
				u := make([]float64, dv)
				for m := range dv {
					u[m] = v.At(b, j, t, m)
					if beta != nil {
						read := 0.0
						for d := range dk {
							read += state.At(b, j, d, m) * k.At(b, j, t, d)
						}
						u[m] = beta.At(b, j, t, 0) * (u[m] - read)
					}
				}
				for d := range dk {
					for m := range dv {
						state.Set(state.At(b, j, d, m)+k.At(b, j, t, d)*u[m], b, j, d, m)
					}
				}
			}
			for i := range hq {
				for m := range dv {
					o := 0.0
					for d := range dk {
						o += q.At(b, i, t, d) * state.At(b, i/groups, d, m)
					}
					out.Set(scale*o, b, i, t, m)
				}
			}
		}
	}
	return out, state
}

// laSteps runs linear_attention_step and _read over every token.
func laSteps(t testing.TB, attrs map[string]ir.AttrValue, groups int64, q, k, v, g, beta, s *tensor.Tensor) (*tensor.Tensor, *tensor.Tensor) {
	steps := q.Shape[2]
	out := tensor.New(lang.F32, []int{q.Shape[0], q.Shape[1], steps, v.Shape[3]})
	for step := range steps {
		a := map[string]ir.AttrValue{"step": aInt(int64(step))}
		for n, v := range attrs {
			a[n] = v
		}
		s = eval(t, "linear_attention_step", a, s, k, v, g, beta)[0]
		o := eval(t, "linear_attention_read", map[string]ir.AttrValue{"step": aInt(int64(step)), "groups": aInt(groups)}, q, s)[0]
		for b := range out.Shape[0] {
			for h := range out.Shape[1] {
				for m := range out.Shape[3] {
					out.Set(o.At(b, h, 0, m), b, h, step, m)
				}
			}
		}
	}
	return out, s
}

// refCausalConv is the depthwise convolution of state ++ x with w.
func refCausalConv(x, w, bias, state *tensor.Tensor, silu bool) (*tensor.Tensor, *tensor.Tensor) {
	nb, nc, l := x.Shape[0], x.Shape[1], x.Shape[2]
	p := state.Shape[2]
	y := tensor.New(x.DType, x.Shape)
	present := tensor.New(x.DType, state.Shape)
	for b := range nb {
		for c := range nc {
			padded := make([]float64, 0, p+l)
			for j := range p {
				padded = append(padded, state.At(b, c, j))
			}
			for j := range l {
				padded = append(padded, x.At(b, c, j))
			}
			for t := range l {
				z := bias.At(c)
				for k := range p + 1 {
					z += w.At(c, 0, k) * padded[t+k]
				}
				if silu {
					z /= 1 + math.Exp(-z)
				}
				y.Set(z, b, c, t)
			}
			for j := range p {
				present.Set(padded[l+j], b, c, j)
			}
		}
	}
	return y, present
}

// refTensorScatter writes update into cache along axis 1 of [B, M, D]
// from idx[b], modulo M when circular.
func refTensorScatter(cache, update, idx *tensor.Tensor, circular bool) *tensor.Tensor {
	y := cache.Clone()
	m := cache.Shape[1]
	for b := range cache.Shape[0] {
		for s := range update.Shape[1] {
			at := int(idx.At(b)) + s
			if circular {
				at = ((at % m) + m) % m
			}
			for d := range cache.Shape[2] {
				y.Set(update.At(b, s, d), b, at, d)
			}
		}
	}
	return y
}

func init() {
	s := func(dims ...int) []int { return dims }
	x := randn(91, 2, 3, 4, 8)
	cos, sin := randn(92, 2, 4, 4), randn(93, 2, 4, 4)
	cos2, sin2 := randn(94, 2, 4, 2), randn(95, 2, 4, 2)
	rotary := func(interleaved bool) func([]*tensor.Tensor) []*tensor.Tensor {
		return func(in []*tensor.Tensor) []*tensor.Tensor {
			return []*tensor.Tensor{refRotary(in[0], in[1], in[2], interleaved)}
		}
	}

	nb, hq, h, steps, dk, dv := 2, 4, 2, 3, 3, 2
	q, k, v := randn(101, nb, hq, steps, dk), randn(102, nb, h, steps, dk), randn(103, nb, h, steps, dv)
	gk, gh := mapF(randn(104, nb, h, steps, dk), func(x float64) float64 { return -math.Abs(x) * 0.3 }), mapF(randn(105, nb, h, steps, 1), func(x float64) float64 { return -math.Abs(x) * 0.3 })
	beta := mapF(randn(106, nb, h, steps, 1), func(x float64) float64 { return 1 / (1 + math.Exp(-x)) })
	s0 := randn(107, nb, h, dk, dv)
	none := tensor.New(lang.F32, s(1, 1, 1, 1))
	rsqrt := 1 / math.Sqrt(float64(dk))
	la := func(name string, attrs map[string]ir.AttrValue, g, b *tensor.Tensor, gRef, bRef *tensor.Tensor) opCase {
		return opCase{op: "linear_attention_step", name: name, attrs: attrs, inputs: []*tensor.Tensor{s0, k, v, g, b},
			check: func(t *testing.T, _, _ []*tensor.Tensor) {
				gotY, gotS := laSteps(t, attrs, int64(hq/h), q, k, v, g, b, s0)
				wantY, wantS := refLinearAttention(q, k, v, gRef, bRef, s0, rsqrt)
				assertClose(t, "output", gotY, wantY, 1e-5)
				assertClose(t, "state", gotS, wantS, 1e-5)
			}}
	}

	xc, wc, bc, sc := randn(111, 2, 3, 5), randn(112, 3, 1, 4), randn(113, 3), randn(114, 2, 3, 3)
	xs := randn(115, 2, 3, 2) // shorter than the state
	conv := func(silu bool) func([]*tensor.Tensor) []*tensor.Tensor {
		return func(in []*tensor.Tensor) []*tensor.Tensor {
			y, p := refCausalConv(in[0], in[1], in[2], in[3], silu)
			return []*tensor.Tensor{y, p}
		}
	}

	cache, update := randn(121, 2, 5, 3), randn(122, 2, 3, 3)
	scatter := func(circular bool) func([]*tensor.Tensor) []*tensor.Tensor {
		return func(in []*tensor.Tensor) []*tensor.Tensor {
			return []*tensor.Tensor{refTensorScatter(in[0], in[1], in[2], circular)}
		}
	}

	register(
		opCase{op: "rotary_embedding", name: "halves", inputs: []*tensor.Tensor{x, cos, sin}, tol: 1e-6, want: rotary(false)},
		opCase{op: "rotary_embedding", name: "interleaved", attrs: map[string]ir.AttrValue{"interleaved": aBool(true)},
			inputs: []*tensor.Tensor{x, cos, sin}, tol: 1e-6, want: rotary(true)},
		opCase{op: "rotary_embedding", name: "partial: the last 4 channels pass", inputs: []*tensor.Tensor{x, cos2, sin2}, tol: 1e-6, want: rotary(false)},
		opCase{op: "rotary_embedding", name: "partial, interleaved", attrs: map[string]ir.AttrValue{"interleaved": aBool(true)},
			inputs: []*tensor.Tensor{x, cos2, sin2}, tol: 1e-6, want: rotary(true)},
		ewFixed("rotary_embedding", "by hand: a quarter turn", nil,
			floats(s(1, 1, 1, 2), -2, 1), floats(s(1, 1, 1, 2), 1, 2), floats(s(1, 1, 1), 0), floats(s(1, 1, 1), 1)),

		la("linear, grouped queries", nil, none, none, nil, nil),
		la("gated per key channel", map[string]ir.AttrValue{"gated": aBool(true)}, gk, none, gk, nil),
		la("delta", map[string]ir.AttrValue{"delta": aBool(true)}, none, beta, nil, beta),
		la("gated delta per head", map[string]ir.AttrValue{"gated": aBool(true), "delta": aBool(true)}, gh, beta, gh, beta),
		opCase{op: "linear_attention_read", name: "explicit scale", attrs: map[string]ir.AttrValue{"step": aInt(1), "scale": aFloat(0.5)},
			inputs: []*tensor.Tensor{randn(108, 1, 2, 2, 3), randn(109, 1, 2, 3, 2)}, tol: 1e-6,
			want: func(in []*tensor.Tensor) []*tensor.Tensor {
				out := tensor.New(lang.F32, s(1, 2, 1, 2))
				for hh := range 2 {
					for m := range 2 {
						o := 0.0
						for d := range 3 {
							o += in[0].At(0, hh, 1, d) * in[1].At(0, hh, d, m)
						}
						out.Set(0.5*o, 0, hh, 0, m)
					}
				}
				return []*tensor.Tensor{out}
			}},

		opCase{op: "causal_conv_with_state", name: "with a past state and bias", inputs: []*tensor.Tensor{xc, wc, bc, sc}, tol: 1e-6, want: conv(false)},
		opCase{op: "causal_conv_with_state", name: "silu", attrs: map[string]ir.AttrValue{"silu": aBool(true)},
			inputs: []*tensor.Tensor{xc, wc, bc, sc}, tol: 1e-6, want: conv(true)},
		opCase{op: "causal_conv_with_state", name: "input shorter than the state", inputs: []*tensor.Tensor{xs, wc, bc, sc}, tol: 1e-6, want: conv(false)},

		opCase{op: "tensor_scatter", name: "linear", inputs: []*tensor.Tensor{cache, update, ints(s(2), 0, 2)}, want: scatter(false)},
		opCase{op: "tensor_scatter", name: "circular wraps", attrs: map[string]ir.AttrValue{"circular": aBool(true)},
			inputs: []*tensor.Tensor{cache, update, ints(s(2), 3, 4)}, want: scatter(true)},
	)
}
