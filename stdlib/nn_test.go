package stdlib_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"tofuc/internal/onnxref"
	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/runtime/tensor"
)

// Interpreter cases for stdlib/nn.tdl: softmax and friends against direct
// Go loops and their defining identities, attention against a direct
// softmax(q k^T * scale) v, dropout against a Go implementation of the
// Squares generator that docs/stdlib.md specifies, losses against direct
// sums.

var (
	nllIgnore1      = map[string]ir.AttrValue{"ignore_index": aInt(1), "ignore": aBool(true)}
	nllIgnoreMinus1 = map[string]ir.AttrValue{"ignore_index": aInt(-1), "ignore": aBool(true)}
)

// nnAlong applies f to every 1-D slice of x along axis (negative counts
// from the rank) and stores the results, of dtype dt, in the same layout.
func nnAlong(x *tensor.Tensor, axis int, dt lang.DType, f func(v []float64) []float64) *tensor.Tensor {
	if axis < 0 {
		axis += x.Rank()
	}
	outer, inner := 1, 1
	for d, n := range x.Shape {
		if d < axis {
			outer *= n
		} else if d > axis {
			inner *= n
		}
	}
	n := x.Shape[axis]
	out := tensor.New(dt, x.Shape)
	v := make([]float64, n)
	for o := range outer {
		for in := range inner {
			for k := range n {
				v[k] = x.Flat((o*n+k)*inner + in)
			}
			for k, r := range f(v) {
				out.SetFlat((o*n+k)*inner+in, r)
			}
		}
	}
	return out
}

func nnSoftmax(v []float64) []float64 {
	m := math.Inf(-1)
	for _, x := range v {
		m = math.Max(m, x)
	}
	out := make([]float64, len(v))
	s := 0.0
	for k, x := range v {
		out[k] = math.Exp(x - m)
		s += out[k]
	}
	for k := range out {
		out[k] /= s
	}
	return out
}

func nnLogSoftmax(v []float64) []float64 {
	m := math.Inf(-1)
	for _, x := range v {
		m = math.Max(m, x)
	}
	s := 0.0
	for _, x := range v {
		s += math.Exp(x - m)
	}
	out := make([]float64, len(v))
	for k, x := range v {
		out[k] = x - m - math.Log(s)
	}
	return out
}

// nnEighths is a tensor of random multiples of 1/8 in [-4, 4]: adding a
// constant such as 1000 to it is exact in f32.
func nnEighths(seed uint64, shape ...int) *tensor.Tensor {
	r := rand.New(rand.NewPCG(seed, 3))
	t := tensor.New(lang.F32, shape)
	for i := range t.Len() {
		t.SetFlat(i, float64(r.IntN(65)-32)/8)
	}
	return t
}

func nnAddConst(x *tensor.Tensor, c float64) *tensor.Tensor {
	return mapF(x, func(v float64) float64 { return v + c })
}

// nnSoftmaxProps checks that softmax along axis sums to 1, lies in (0, 1]
// and does not change when a constant is added to the input.
func nnSoftmaxProps(op string, axis int) func(t *testing.T, in, out []*tensor.Tensor) {
	return func(t *testing.T, in, out []*tensor.Tensor) {
		attrs := map[string]ir.AttrValue{"axis": aInt(int64(axis))}
		y := out[0]
		if op == "log_softmax" {
			y = mapF(y, math.Exp)
		}
		nnAlong(y, axis, lang.F64, func(v []float64) []float64 {
			s := 0.0
			for _, p := range v {
				if !(p > 0 && p <= 1) {
					t.Fatalf("probability %v outside (0, 1]", p)
				}
				s += p
			}
			if math.Abs(s-1) > 1e-6 {
				t.Fatalf("probabilities sum to %v", s)
			}
			return v
		})
		for _, c := range []float64{1000, -1000, 0.5} {
			shifted := eval(t, op, attrs, nnAddConst(in[0], c))
			assertClose(t, "shifted input", shifted[0], out[0], 1e-6)
		}
	}
}

// nnSquares32 is Widynski's Squares counter-based generator with the key
// of docs/stdlib.md.
func nnSquares32(ctr uint64) uint64 {
	const key = 0x548c9decbce65297
	y := ctr * key
	z := y + key
	x := y*y + y
	x = x>>32 | x<<32
	x = x*x + z
	x = x>>32 | x<<32
	x = x*x + y
	x = x>>32 | x<<32
	return (x*x + z) >> 32
}

// nnDropout is dropout in training as docs/stdlib.md specifies it: element
// i is kept, scaled by 1 / (1 - ratio), when squares32(seed * 2^32 + i) >=
// floor(ratio * 2^32).
func nnDropout(x *tensor.Tensor, ratio float64, seed uint64) (y, mask *tensor.Tensor) {
	y = tensor.New(x.DType, x.Shape)
	mask = tensor.New(lang.Bool, x.Shape)
	threshold := uint64(ratio * (1 << 32))
	for i := range x.Len() {
		if nnSquares32(seed<<32+uint64(i)) >= threshold {
			y.SetFlat(i, x.Flat(i)/(1-ratio))
			mask.I[i] = 1
		}
	}
	return y, mask
}

// nnAwayFromZero is a tensor of values with |x| >= 1, so that a zero in a
// dropout result means a dropped element.
func nnAwayFromZero(seed uint64, shape ...int) *tensor.Tensor {
	return mapF(randn(seed, shape...), func(v float64) float64 { return math.Copysign(1+math.Abs(v), v) })
}

// nnDropoutStats checks that training dropout zeroes about ratio of the
// elements (within 5 standard deviations), scales the rest by 1 / (1 -
// ratio), is reproducible for its seed and changes with another seed.
func nnDropoutStats(ratio float64, seed int64) func(t *testing.T, in, out []*tensor.Tensor) {
	return func(t *testing.T, in, out []*tensor.Tensor) {
		x, y := in[0], out[0]
		n := float64(x.Len())
		dropped := 0
		for i := range x.Len() {
			if y.Flat(i) == 0 {
				dropped++
				continue
			}
			want := float64(float32(x.Flat(i) / (1 - ratio)))
			if math.Abs(y.Flat(i)-want) > 1e-6*math.Abs(want) {
				t.Fatalf("kept element %d is %v, want %v", i, y.Flat(i), want)
			}
		}
		sd := math.Sqrt(ratio * (1 - ratio) / n)
		if frac := float64(dropped) / n; math.Abs(frac-ratio) > 5*sd {
			t.Fatalf("dropped fraction %v, want about %v", frac, ratio)
		}
		attrs := map[string]ir.AttrValue{"ratio": aFloat(ratio), "seed": aInt(seed), "training": aBool(true)}
		assertClose(t, "same seed again", eval(t, "dropout", attrs, x)[0], y, 0)
		attrs["seed"] = aInt(seed + 1)
		other := eval(t, "dropout", attrs, x)[0]
		differ := 0
		for i := range x.Len() {
			if (other.Flat(i) == 0) != (y.Flat(i) == 0) {
				differ++
			}
		}
		// Independent masks differ in about 2 ratio (1 - ratio) of the places.
		if want := 2 * ratio * (1 - ratio) * n; float64(differ) < want/2 {
			t.Fatalf("seeds %d and %d give masks differing in %d places, want about %v", seed, seed+1, differ, want)
		}
	}
}

func init() {
	f32 := lang.F32
	s := func(dims ...int) []int { return dims }
	axisAttr := func(a int64) map[string]ir.AttrValue { return map[string]ir.AttrValue{"axis": aInt(a)} }
	along := func(axis int, f func([]float64) []float64) func(in []*tensor.Tensor) []*tensor.Tensor {
		return func(in []*tensor.Tensor) []*tensor.Tensor {
			return []*tensor.Tensor{nnAlong(in[0], axis, f32, f)}
		}
	}

	x234 := randn(31, 2, 3, 4)
	e234 := nnEighths(32, 2, 3, 4)
	register(
		opCase{op: "softmax", name: "default axis -1, direct", inputs: []*tensor.Tensor{x234},
			want: along(-1, nnSoftmax), tol: 1e-6},
		opCase{op: "softmax", name: "axis 1, direct", attrs: axisAttr(1), inputs: []*tensor.Tensor{x234},
			want: along(1, nnSoftmax), tol: 1e-6},
		opCase{op: "softmax", name: "axis 0, direct", attrs: axisAttr(0), inputs: []*tensor.Tensor{x234},
			want: along(0, nnSoftmax), tol: 1e-6},
		opCase{op: "softmax", name: "axis -2, direct", attrs: axisAttr(-2), inputs: []*tensor.Tensor{x234},
			want: along(1, nnSoftmax), tol: 1e-6},
		opCase{op: "softmax", name: "by hand", inputs: []*tensor.Tensor{floats(s(2, 2), 0, 0, 1000, 1000+math.Ln2)},
			want: func([]*tensor.Tensor) []*tensor.Tensor {
				// 1000 + ln 2 in f32 is not exactly that; the difference of the pair is.
				d := float64(float32(1000+math.Ln2)) - 1000
				return []*tensor.Tensor{floats(s(2, 2), 0.5, 0.5, 1/(1+math.Exp(d)), 1/(1+math.Exp(-d)))}
			}, tol: 1e-6},
		opCase{op: "softmax", name: "sums to 1, shift invariant, axis -1", inputs: []*tensor.Tensor{e234},
			check: nnSoftmaxProps("softmax", -1)},
		opCase{op: "softmax", name: "sums to 1, shift invariant, axis 1", attrs: axisAttr(1), inputs: []*tensor.Tensor{e234},
			check: nnSoftmaxProps("softmax", 1)},

		opCase{op: "log_softmax", name: "default axis -1, direct", inputs: []*tensor.Tensor{x234},
			want: along(-1, nnLogSoftmax), tol: 1e-6},
		opCase{op: "log_softmax", name: "axis 0, direct", attrs: axisAttr(0), inputs: []*tensor.Tensor{x234},
			want: along(0, nnLogSoftmax), tol: 1e-6},
		opCase{op: "log_softmax", name: "equals log(softmax), axis 1", attrs: axisAttr(1), inputs: []*tensor.Tensor{x234},
			check: func(t *testing.T, in, out []*tensor.Tensor) {
				sm := eval(t, "softmax", axisAttr(1), in[0])[0]
				assertClose(t, "log(softmax)", out[0], mapF(sm, math.Log), 1e-5)
			}},
		opCase{op: "log_softmax", name: "large logits stay finite", inputs: []*tensor.Tensor{floats(s(1, 3), 1000, 0, -1000)},
			want: func([]*tensor.Tensor) []*tensor.Tensor {
				return []*tensor.Tensor{floats(s(1, 3), 0, -1000, -2000)}
			}, tol: 1e-6},
		opCase{op: "log_softmax", name: "accurate beside a large maximum", inputs: []*tensor.Tensor{floats(s(1, 2), 10000, 10000.5)},
			want: func([]*tensor.Tensor) []*tensor.Tensor {
				return []*tensor.Tensor{floats(s(1, 2), -math.Log1p(math.Exp(0.5)), -math.Log1p(math.Exp(-0.5)))}
			}, tol: 1e-6},
		opCase{op: "log_softmax", name: "sums to 1, shift invariant, axis -1", inputs: []*tensor.Tensor{e234},
			check: nnSoftmaxProps("log_softmax", -1)},

		ewFixed("hardmax", "axis -1, first maximum wins", nil,
			floats(s(2, 3), 0, 1, 0, 1, 0, 0),
			floats(s(2, 3), 1, 3, 3, -1, -2, -5)),
		ewFixed("hardmax", "axis 0", axisAttr(0),
			floats(s(2, 3), 1, 1, 0, 0, 0, 1),
			floats(s(2, 3), 1, 5, 2, 1, 4, 7)),
		ewFixed("hardmax", "axis 1 of [2,3,2]", axisAttr(1),
			floats(s(2, 3, 2), 0, 0, 1, 1, 0, 0, 1, 0, 0, 0, 0, 1),
			floats(s(2, 3, 2), 1, 2, 3, 4, -1, 0, 9, 8, 9, 8, 7, 9)),
		ewFixed("hardmax", "f64 keeps its dtype", nil,
			ewT(lang.F64, s(1, 4), 0, 0, 0, 1), ewT(lang.F64, s(1, 4), -3, -2, -1, 0)),
		opCase{op: "hardmax", name: "one-hot of the argmax, random", inputs: []*tensor.Tensor{x234},
			want: along(-1, func(v []float64) []float64 {
				out := make([]float64, len(v))
				best := 0
				for k := range v {
					if v[k] > v[best] {
						best = k
					}
				}
				out[best] = 1
				return out
			})},
	)

	// Attention: batch 2, 6 query heads on 3 key heads (groups 2), S = 3
	// queries, T = 5 keys, D = 4, DV = 3.
	q, k, v := randn(41, 2, 6, 3, 4), randn(42, 2, 3, 5, 4), randn(43, 2, 3, 5, 3)
	mha := randn(44, 2, 3, 3, 4) // 3 query heads on the 3 key heads
	zero := floats(nil, 0)
	bias := randn(45, 3, 5)
	// Query 1 of batch 1 sees no key: its weights are zero.
	masked := randn(46, 2, 1, 3, 5)
	for j := range 5 {
		masked.Set(math.Inf(-1), 1, 0, 1, j)
	}
	masked.Set(math.Inf(-1), 0, 0, 2, 3)
	weights := func(a onnxref.Attention, stage int) func(in []*tensor.Tensor) []*tensor.Tensor {
		return func(in []*tensor.Tensor) []*tensor.Tensor {
			if stage == 3 {
				return []*tensor.Tensor{a.Weights(in[0], in[1], in[2])}
			}
			return []*tensor.Tensor{a.Scores(in[0], in[1], in[2], stage)}
		}
	}
	gqa := onnxref.Attention{Scale: 0.7, Softcap: 2, Causal: true, Past: 1}
	gqaAttrs := func(stage int64) map[string]ir.AttrValue {
		return map[string]ir.AttrValue{"groups": aInt(2), "scale": aFloat(0.7), "softcap": aFloat(2),
			"causal": aBool(true), "past": aInt(1), "stage": aInt(stage)}
	}
	register(
		opCase{op: "attention_weights", name: "multi-head, default scale 1/sqrt(D), no bias", tol: 1e-5,
			inputs: []*tensor.Tensor{mha, k, zero}, want: weights(onnxref.Attention{}, 3)},
		opCase{op: "attention_weights", name: "causal, square", tol: 1e-5, attrs: map[string]ir.AttrValue{"causal": aBool(true)},
			inputs: []*tensor.Tensor{randn(47, 1, 2, 4, 3), randn(48, 1, 2, 4, 3), zero}, want: weights(onnxref.Attention{Causal: true}, 3)},
		opCase{op: "attention_weights", name: "groups 2, scale, softcap, causal after 1 past key, 2-D bias", tol: 1e-5,
			attrs: gqaAttrs(3), inputs: []*tensor.Tensor{q, k, bias}, want: weights(gqa, 3)},
		opCase{op: "attention_weights", name: "fully masked query gets zero weights", tol: 1e-5,
			attrs: map[string]ir.AttrValue{"groups": aInt(2)}, inputs: []*tensor.Tensor{q, k, masked},
			want: weights(onnxref.Attention{}, 3)},
		opCase{op: "attention_weights", name: "stage 0: the scaled product", tol: 1e-5,
			attrs: gqaAttrs(0), inputs: []*tensor.Tensor{q, k, bias}, want: weights(gqa, 0)},
		opCase{op: "attention_weights", name: "stage 1: the softcap", tol: 1e-5,
			attrs: gqaAttrs(1), inputs: []*tensor.Tensor{q, k, bias}, want: weights(gqa, 1)},
		opCase{op: "attention_weights", name: "stage 2: bias and causal mask", tol: 1e-5,
			attrs: gqaAttrs(2), inputs: []*tensor.Tensor{q, k, bias}, want: weights(gqa, 2)},
		opCase{op: "attention_values", name: "groups 2", tol: 1e-5, attrs: map[string]ir.AttrValue{"groups": aInt(2)},
			inputs: []*tensor.Tensor{randn(49, 2, 6, 3, 5), v},
			want:   func(in []*tensor.Tensor) []*tensor.Tensor { return []*tensor.Tensor{onnxref.Values(in[0], in[1])} }},
		// Equal keys give uniform weights over the visible keys: causally
		// query i sees keys 0..i; the output is the mean of their values.
		ewFixed("attention_weights", "causal by hand", map[string]ir.AttrValue{"causal": aBool(true)},
			floats(s(1, 1, 3, 3), 1, 0, 0, 0.5, 0.5, 0, 1.0/3, 1.0/3, 1.0/3),
			floats(s(1, 1, 3, 2), 1, 2, 3, 4, 5, 6), floats(s(1, 1, 3, 2), 1, 1, 1, 1, 1, 1), zero),
		ewFixed("attention_values", "means of the visible values by hand", nil,
			floats(s(1, 1, 3, 2), 1, 10, 1.5, 15, 2, 20),
			floats(s(1, 1, 3, 3), 1, 0, 0, 0.5, 0.5, 0, 1.0/3, 1.0/3, 1.0/3), floats(s(1, 1, 3, 2), 1, 10, 2, 20, 3, 30)),
		// lens [2, 4], 2 queries, 5 keys: batch 0 sees keys 0..1 (causal:
		// query i sees keys j <= i), batch 1 keys 0..3 (causal: j <= i + 2).
		ewFixed("attention_length_bias", "causal", map[string]ir.AttrValue{"queries": aInt(2), "keys": aInt(5), "causal": aBool(true)},
			floats(s(2, 1, 2, 5), 0, ewNInf, ewNInf, ewNInf, ewNInf, 0, 0, ewNInf, ewNInf, ewNInf,
				0, 0, 0, ewNInf, ewNInf, 0, 0, 0, 0, ewNInf),
			ints(s(2), 2, 4)),
		ewFixed("attention_length_bias", "padding only", map[string]ir.AttrValue{"queries": aInt(1), "keys": aInt(3)},
			floats(s(2, 1, 1, 3), 0, ewNInf, ewNInf, 0, 0, 0), ewI(lang.I32, s(2), 1, 3)),
	)

	// Dropout.
	xd := nnAwayFromZero(51, 4, 5, 6)
	big := nnAwayFromZero(52, 32, 32)
	train := func(ratio float64, seed int64) map[string]ir.AttrValue {
		return map[string]ir.AttrValue{"ratio": aFloat(ratio), "seed": aInt(seed), "training": aBool(true)}
	}
	identity := func(in []*tensor.Tensor) []*tensor.Tensor { return []*tensor.Tensor{in[0]} }
	register(
		opCase{op: "dropout", name: "inference is the identity", inputs: []*tensor.Tensor{xd}, want: identity},
		opCase{op: "dropout", name: "training false with ratio 0.3 is the identity",
			attrs:  map[string]ir.AttrValue{"ratio": aFloat(0.3), "seed": aInt(5), "training": aBool(false)},
			inputs: []*tensor.Tensor{xd}, want: identity},
		opCase{op: "dropout", name: "training ratio 0 keeps everything", attrs: train(0, 3),
			inputs: []*tensor.Tensor{xd}, want: identity},
		opCase{op: "dropout", name: "training ratio 1 drops everything", attrs: train(1, 3),
			inputs: []*tensor.Tensor{xd}, want: func(in []*tensor.Tensor) []*tensor.Tensor {
				return []*tensor.Tensor{tensor.New(f32, in[0].Shape)}
			}},
		opCase{op: "dropout", name: "training ratio 0.3 seed 7 matches squares32", attrs: train(0.3, 7),
			inputs: []*tensor.Tensor{xd}, tol: 1e-6, want: func(in []*tensor.Tensor) []*tensor.Tensor {
				y, _ := nnDropout(in[0], 0.3, 7)
				return []*tensor.Tensor{y}
			}},
		opCase{op: "dropout", name: "training ratio 0.5 seed 0 statistics", attrs: train(0.5, 0),
			inputs: []*tensor.Tensor{big}, check: nnDropoutStats(0.5, 0)},
		opCase{op: "dropout", name: "training ratio 0.2 seed 1234 statistics", attrs: train(0.2, 1234),
			inputs: []*tensor.Tensor{big}, check: nnDropoutStats(0.2, 1234)},
		opCase{op: "dropout", name: "training ratio 0.75 seed 9 statistics", attrs: train(0.75, 9),
			inputs: []*tensor.Tensor{big}, check: nnDropoutStats(0.75, 9)},

		opCase{op: "dropout_seeded", name: "inference is the identity", inputs: []*tensor.Tensor{xd, tensor.Scalar(lang.I64, 5)}, want: identity},
		opCase{op: "dropout_seeded", name: "seed 0 is dropout's mask at seed s", attrs: train(0.3, 0),
			inputs: []*tensor.Tensor{xd, tensor.Scalar(lang.I64, 123456789)}, tol: 1e-6, want: func(in []*tensor.Tensor) []*tensor.Tensor {
				y, _ := nnDropout(in[0], 0.3, 123456789)
				return []*tensor.Tensor{y}
			}},
		opCase{op: "dropout_seeded", name: "seed 2 salts s = 5: dropout's at (5 + 2 * 2654435769) mod 2^32", attrs: train(0.3, 2),
			inputs: []*tensor.Tensor{xd, tensor.Scalar(lang.I64, 5)}, tol: 1e-6, want: func(in []*tensor.Tensor) []*tensor.Tensor {
				y, _ := nnDropout(in[0], 0.3, (5+2*2654435769)%(1<<32))
				return []*tensor.Tensor{y}
			}},
		opCase{op: "dropout_seeded", name: "training ratio 0.5 s 9 statistics", attrs: train(0.5, 0),
			inputs: []*tensor.Tensor{big, tensor.Scalar(lang.I64, 9)}, check: func(t *testing.T, in, out []*tensor.Tensor) {
				nnDropoutStats(0.5, 9)(t, in[:1], out)
			}},

		opCase{op: "dropout_with_mask", name: "inference: identity, mask all true", inputs: []*tensor.Tensor{xd},
			want: func(in []*tensor.Tensor) []*tensor.Tensor {
				mask := tensor.New(lang.Bool, in[0].Shape)
				for i := range mask.I {
					mask.I[i] = 1
				}
				return []*tensor.Tensor{in[0], mask}
			}},
		opCase{op: "dropout_with_mask", name: "training ratio 0.4 seed 11 matches squares32", attrs: train(0.4, 11),
			inputs: []*tensor.Tensor{xd}, tol: 1e-6, want: func(in []*tensor.Tensor) []*tensor.Tensor {
				y, mask := nnDropout(in[0], 0.4, 11)
				return []*tensor.Tensor{y, mask}
			}},
		opCase{op: "dropout_with_mask", name: "training equals dropout", attrs: train(0.5, 2),
			inputs: []*tensor.Tensor{big}, check: func(t *testing.T, in, out []*tensor.Tensor) {
				assertClose(t, "y", out[0], eval(t, "dropout", train(0.5, 2), in[0])[0], 0)
				for i := range out[1].Len() {
					if (out[1].Flat(i) != 0) != (out[0].Flat(i) != 0) {
						t.Fatalf("mask %v at %d but y is %v", out[1].Flat(i), i, out[0].Flat(i))
					}
				}
			}},
	)

	// Losses.
	logits := randn(61, 4, 5)
	labels := ints(s(4), 0, 4, 2, 2)
	xent := func(in []*tensor.Tensor) []*tensor.Tensor {
		x, l := in[0], in[1]
		n, c := x.Shape[0], x.Shape[1]
		loss := 0.0
		for i := range n {
			row := make([]float64, c)
			for j := range c {
				row[j] = x.At(i, j)
			}
			loss -= nnLogSoftmax(row)[int(l.At(i))]
		}
		return []*tensor.Tensor{floats(nil, loss/float64(n))}
	}
	logp := floats(s(3, 4), -1, -2, -3, -4, -0.5, -1.5, -2.5, -3.5, -0.25, -1, -2, -8)
	register(
		opCase{op: "softmax_cross_entropy", name: "direct", inputs: []*tensor.Tensor{logits, labels}, want: xent, tol: 1e-6},
		opCase{op: "softmax_cross_entropy", name: "i32 labels", tol: 1e-6, want: xent,
			inputs: []*tensor.Tensor{logits, ewI(lang.I32, s(4), 3, 1, 0, 4)}},
		opCase{op: "softmax_cross_entropy", name: "uniform logits give log C", tol: 1e-6,
			inputs: []*tensor.Tensor{floats(s(2, 4), 7, 7, 7, 7, 0, 0, 0, 0), ints(s(2), 1, 3)},
			want:   func([]*tensor.Tensor) []*tensor.Tensor { return []*tensor.Tensor{floats(nil, math.Log(4))} }},
		opCase{op: "softmax_cross_entropy", name: "shift invariant", inputs: []*tensor.Tensor{nnEighths(64, 3, 5), ints(s(3), 4, 0, 2)},
			check: func(t *testing.T, in, out []*tensor.Tensor) {
				for _, c := range []float64{1000, -3000} {
					shifted := eval(t, "softmax_cross_entropy", nil, nnAddConst(in[0], c), in[1])
					assertClose(t, "shifted logits", shifted[0], out[0], 1e-6)
				}
			}},
		opCase{op: "softmax_cross_entropy", name: "large logits", tol: 1e-6,
			inputs: []*tensor.Tensor{floats(s(2, 2), 1000, 0, 1000, 0), ints(s(2), 0, 1)},
			want:   func([]*tensor.Tensor) []*tensor.Tensor { return []*tensor.Tensor{floats(nil, 500)} }},

		ewFixed("nll_loss", "by hand", nil, floats(nil, 3.5), logp, ints(s(3), 1, 0, 3)),
		opCase{op: "nll_loss", name: "direct, i32 labels", inputs: []*tensor.Tensor{logits, ewI(lang.I32, s(4), 2, 2, 4, 0)},
			tol: 1e-6, want: func(in []*tensor.Tensor) []*tensor.Tensor {
				s := 0.0
				for i := range 4 {
					s -= in[0].At(i, int(in[1].At(i)))
				}
				return []*tensor.Tensor{floats(nil, s/4)}
			}},

		ewFixed("nll_loss_elements", "by hand, class 1 ignored", nllIgnore1, floats(s(3), 6, 0, 16),
			logp, ints(s(3), 2, 1, 3), floats(s(4), 0.5, 3, 2, 2)),
		ewFixed("nll_loss_weights", "by hand, class 1 ignored", nllIgnore1, floats(s(3), 2, 0, 2),
			ints(s(3), 2, 1, 3), floats(s(4), 0.5, 3, 2, 2)),
		opCase{op: "nll_loss_elements", name: "direct [N, C, D1, D2], -1 ignored", attrs: nllIgnoreMinus1,
			inputs: []*tensor.Tensor{randn(71, 2, 3, 2, 2), ints(s(2, 2, 2), 0, 2, -1, 1, 2, 2, 0, -1), randn(72, 3)},
			tol:    1e-12, want: func(in []*tensor.Tensor) []*tensor.Tensor {
				x, target, w := in[0], in[1], in[2]
				out := tensor.New(lang.F32, target.Shape)
				for n := range 2 {
					for i := range 2 {
						for j := range 2 {
							if c := int(target.At(n, i, j)); c >= 0 {
								out.Set(-x.At(n, c, i, j)*w.At(c), n, i, j)
							}
						}
					}
				}
				return []*tensor.Tensor{out}
			}},
		ewFixed("mse_loss", "by hand", nil, floats(nil, 3.25), floats(s(4), 1, 2, 3, 4), floats(s(4), 1, 0, 0, 4)),
		ewFixed("mse_loss", "rank 0", nil, floats(nil, 6.25), floats(nil, 1), floats(nil, -1.5)),
		opCase{op: "mse_loss", name: "direct [2,3,2]", inputs: []*tensor.Tensor{randn(62, 2, 3, 2), randn(63, 2, 3, 2)},
			tol: 1e-6, want: func(in []*tensor.Tensor) []*tensor.Tensor {
				s := 0.0
				for i := range in[0].Len() {
					d := in[0].Flat(i) - in[1].Flat(i)
					s += d * d
				}
				return []*tensor.Tensor{floats(nil, s/float64(in[0].Len()))}
			}},
	)
}
