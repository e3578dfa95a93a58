package stdlib_test

import (
	"math"

	"tofuc/runtime/tensor"
)

// The normalisations keep their statistics in f32 tensors (lets) and use
// rsqrt, so the float64 formulas below match within 1e-5.
const normTol = 1e-5

// refMoments returns the population mean and variance of the values f
// yields for the indices of shape.
func refMoments(shape []int, f func(i []int) float64) (mean, variance float64) {
	n := 0
	spEach(shape, func(i []int) { mean += f(i); n++ })
	mean /= float64(n)
	spEach(shape, func(i []int) { d := f(i) - mean; variance += d * d })
	return mean, variance / float64(n)
}

// refLayerNorm normalises x over its trailing axes from axis on; rms
// leaves out the mean; scale and bias (nil: none) cover those axes.
func refLayerNorm(x, scale, bias *tensor.Tensor, axis int, eps float64, rms bool) (y, mean, inv *tensor.Tensor) {
	r := x.Rank()
	a := (axis + r) % r
	lead, tail := x.Shape[:a], x.Shape[a:]
	statShape := append(append([]int{}, lead...), make([]int, len(tail))...)
	for i := a; i < r; i++ {
		statShape[i] = 1
	}
	means := map[int]float64{}
	invs := map[int]float64{}
	k := 0
	spEach(lead, func(l []int) {
		m, v := refMoments(tail, func(t []int) float64 { return x.At(spIdx(l, t)...) })
		if rms {
			v, m = v+m*m, 0
		}
		means[k], invs[k] = m, 1/math.Sqrt(v+eps)
		k++
	})
	leadIndex := func(i []int) int {
		o := 0
		for d := range a {
			o = o*x.Shape[d] + i[d]
		}
		return o
	}
	y = spF32(x.Shape, func(i []int) float64 {
		l := leadIndex(i)
		v := (x.At(i...) - means[l]) * invs[l] * scale.At(i[a:]...)
		if bias != nil {
			v += bias.At(i[a:]...)
		}
		return v
	})
	mean = spF32(statShape, func(i []int) float64 { return means[leadIndex(i)] })
	inv = spF32(statShape, func(i []int) float64 { return invs[leadIndex(i)] })
	return y, mean, inv
}

// refChannelNorm normalises x [N, C, *S] with per-(n, group) statistics
// over groups of C / groups channels and *S (groups = C: instance norm),
// or per-channel statistics over N and *S when batch is set.
func refChannelNorm(x, scale, bias *tensor.Tensor, groups int, eps float64, batch bool) (y, mean, variance *tensor.Tensor) {
	n, c := x.Shape[0], x.Shape[1]
	s := x.Shape[2:]
	type key struct{ n, g int }
	means, vars := map[key]float64{}, map[key]float64{}
	cg := c / groups
	keyOf := func(b, ch int) key {
		if batch {
			return key{0, ch}
		}
		return key{b, ch / cg}
	}
	if batch {
		for ch := range c {
			m, v := refMoments(spIdx(n, s), func(i []int) float64 { return x.At(spIdx(i[0], ch, i[1:])...) })
			means[key{0, ch}], vars[key{0, ch}] = m, v
		}
	} else {
		for b := range n {
			for g := range groups {
				m, v := refMoments(spIdx(cg, s), func(i []int) float64 { return x.At(spIdx(b, g*cg+i[0], i[1:])...) })
				means[key{b, g}], vars[key{b, g}] = m, v
			}
		}
	}
	y = spF32(x.Shape, func(i []int) float64 {
		k := keyOf(i[0], i[1])
		return (x.At(i...)-means[k])/math.Sqrt(vars[k]+eps)*scale.At(i[1]) + bias.At(i[1])
	})
	mean = spF32([]int{c}, func(i []int) float64 { return means[key{0, i[0]}] })
	variance = spF32([]int{c}, func(i []int) float64 { return vars[key{0, i[0]}] })
	return y, mean, variance
}

func init() {
	x := randn(400, 2, 3, 4)
	ln := func(name string, axis int, eps float64, scale, bias *tensor.Tensor) opCase {
		return opCase{op: "layer_norm", name: name, attrs: spA("axis", aInt(int64(axis)), "epsilon", aFloat(eps)),
			inputs: []*tensor.Tensor{x, scale, bias}, tol: normTol,
			want: spOne(func(in []*tensor.Tensor) *tensor.Tensor {
				y, _, _ := refLayerNorm(in[0], in[1], in[2], axis, eps, false)
				return y
			})}
	}
	rms := func(name string, axis int, scale *tensor.Tensor) opCase {
		return opCase{op: "rms_norm", name: name, attrs: spA("axis", aInt(int64(axis))),
			inputs: []*tensor.Tensor{x, scale}, tol: normTol,
			want: spOne(func(in []*tensor.Tensor) *tensor.Tensor {
				y, _, _ := refLayerNorm(in[0], in[1], nil, axis, 1e-5, true)
				return y
			})}
	}
	register(
		ln("axis -1", -1, 1e-5, randn(401, 4), randn(402, 4)),
		ln("axis 1 (two normalised axes), epsilon 0.1", 1, 0.1, randn(403, 3, 4), randn(404, 3, 4)),
		ln("axis 0 (everything)", 0, 1e-5, randn(405, 2, 3, 4), randn(406, 2, 3, 4)),
		opCase{op: "layer_norm", name: "hand", attrs: spA("epsilon", aFloat(0)),
			inputs: []*tensor.Tensor{floats([]int{2, 2}, 1, 3, 5, 9), floats([]int{2}, 1, 2), floats([]int{2}, 0, 10)},
			// Means 2 and 7, deviations 1 and 2.
			want: spConst(floats([]int{2, 2}, -1, 12, -1, 12))},
		opCase{op: "layer_norm_stats", name: "axis 1", attrs: spA("axis", aInt(1)),
			inputs: []*tensor.Tensor{x, randn(407, 3, 4), randn(408, 3, 4)}, tol: normTol,
			want: func(in []*tensor.Tensor) []*tensor.Tensor {
				y, m, inv := refLayerNorm(in[0], in[1], in[2], 1, 1e-5, false)
				return []*tensor.Tensor{y, m, inv}
			}},
		opCase{op: "layer_norm_stats", name: "axis -1", attrs: spA("axis", aInt(-1)),
			inputs: []*tensor.Tensor{x, randn(409, 4), randn(410, 4)}, tol: normTol,
			want: func(in []*tensor.Tensor) []*tensor.Tensor {
				y, m, inv := refLayerNorm(in[0], in[1], in[2], -1, 1e-5, false)
				return []*tensor.Tensor{y, m, inv}
			}},
		rms("axis -1", -1, randn(411, 4)),
		rms("axis -2", -2, randn(412, 3, 4)),
		opCase{op: "rms_norm", name: "hand", attrs: spA("epsilon", aFloat(0)),
			inputs: []*tensor.Tensor{floats([]int{1, 2}, 3, 4), floats([]int{2}, 1, 2)},
			// rms = sqrt((9 + 16) / 2)
			want: spConst(floats([]int{1, 2}, 3/math.Sqrt(12.5), 8/math.Sqrt(12.5))), tol: 1e-6},
	)

	// batch_norm (inference) with given statistics.
	bn := func(name string, x *tensor.Tensor, eps float64) opCase {
		c := x.Shape[1]
		mean, vr := randn(420, c), spF32([]int{c}, func(i []int) float64 { return 0.5 + float64(i[0]) })
		return opCase{op: "batch_norm", name: name, attrs: spA("epsilon", aFloat(eps)),
			inputs: []*tensor.Tensor{x, randn(421, c), randn(422, c), mean, vr}, tol: normTol,
			want: spOne(func(in []*tensor.Tensor) *tensor.Tensor {
				return spF32(in[0].Shape, func(i []int) float64 {
					ch := i[1]
					return (in[0].At(i...)-in[3].At(ch))/math.Sqrt(in[4].At(ch)+eps)*in[1].At(ch) + in[2].At(ch)
				})
			})}
	}
	bnt := func(name string, x *tensor.Tensor, eps, momentum float64) opCase {
		c := x.Shape[1]
		return opCase{op: "batch_norm_train", name: name, attrs: spA("epsilon", aFloat(eps), "momentum", aFloat(momentum)),
			inputs: []*tensor.Tensor{x, randn(423, c), randn(424, c), randn(425, c), spF32([]int{c}, func(i []int) float64 { return 1 + float64(i[0]) })},
			tol:    normTol,
			want: func(in []*tensor.Tensor) []*tensor.Tensor {
				y, m, v := refChannelNorm(in[0], in[1], in[2], 1, eps, true)
				run := func(old, cur *tensor.Tensor) *tensor.Tensor {
					return spF32(old.Shape, func(i []int) float64 { return old.At(i...)*momentum + cur.At(i...)*(1-momentum) })
				}
				return []*tensor.Tensor{y, m, v, run(in[3], m), run(in[4], v)}
			}}
	}
	register(
		bn("NCHW", randn(426, 2, 3, 2, 2), 1e-5),
		bn("no spatial axes, epsilon 0.01", randn(427, 4, 3), 0.01),
		bnt("NCHW, momentum 0.8", randn(428, 3, 2, 2, 2), 1e-3, 0.8),
		bnt("NCL, default momentum", randn(429, 4, 3, 2), 1e-5, 0.9),
		opCase{op: "batch_norm_train", name: "hand statistics", attrs: spA("epsilon", aFloat(0), "momentum", aFloat(0.75)),
			inputs: []*tensor.Tensor{floats([]int{2, 1, 2}, 1, 3, 5, 7), floats([]int{1}, 1), floats([]int{1}, 0), floats([]int{1}, 4), floats([]int{1}, 1)},
			// mean 4, variance (9 + 1 + 1 + 9) / 4 = 5; running mean 4*0.75 + 4*0.25, variance 0.75 + 5*0.25.
			want: spConst(floats([]int{2, 1, 2}, -3/math.Sqrt(5), -1/math.Sqrt(5), 1/math.Sqrt(5), 3/math.Sqrt(5)),
				floats([]int{1}, 4), floats([]int{1}, 5), floats([]int{1}, 4), floats([]int{1}, 2)), tol: 1e-6},
	)

	// batch_norm_train's statistics and running update as operators of
	// their own (the partitioner's decomposition of batch_norm_train).
	stats := func(name string, x *tensor.Tensor) []opCase {
		_, m, v := refChannelNorm(x, spF32([]int{x.Shape[1]}, func([]int) float64 { return 1 }), spF32([]int{x.Shape[1]}, func([]int) float64 { return 0 }), 1, 0, true)
		return []opCase{
			{op: "batch_mean", name: name, inputs: []*tensor.Tensor{x}, tol: normTol, want: spConst(m)},
			{op: "batch_var", name: name + ", its batch mean", inputs: []*tensor.Tensor{x, m}, tol: normTol, want: spConst(v)},
		}
	}
	register(stats("NCHW", randn(433, 3, 2, 2, 2))...)
	register(stats("NCL", randn(434, 4, 3, 2))...)
	register(
		opCase{op: "batch_var", name: "around another mean", inputs: []*tensor.Tensor{floats([]int{2, 1, 2}, 1, 3, 5, 7), floats([]int{1}, 2)},
			// ((1-2)^2 + (3-2)^2 + (5-2)^2 + (7-2)^2) / 4 = 36 / 4
			want: spConst(floats([]int{1}, 9)), tol: 1e-6},
		opCase{op: "running_average", name: "momentum 0.75", attrs: spA("momentum", aFloat(0.75)),
			inputs: []*tensor.Tensor{floats([]int{2}, 4, 1), floats([]int{2}, 8, 5)},
			want:   spConst(floats([]int{2}, 4*0.75+8*0.25, 0.75+5*0.25)), tol: 1e-6},
		opCase{op: "running_average", name: "default momentum, [2, 2]",
			inputs: []*tensor.Tensor{floats([]int{2, 2}, 1, 2, 3, 4), floats([]int{2, 2}, 11, 12, 13, 14)},
			want:   spConst(floats([]int{2, 2}, 2, 3, 4, 5)), tol: 1e-6},
	)

	channel := func(op, name string, x *tensor.Tensor, groups int, eps float64) opCase {
		c := x.Shape[1]
		attrs := spA("epsilon", aFloat(eps))
		g := c
		if op == "group_norm" {
			attrs["num_groups"] = aInt(int64(groups))
			g = groups
		}
		return opCase{op: op, name: name, attrs: attrs, inputs: []*tensor.Tensor{x, randn(430, c), randn(431, c)}, tol: normTol,
			want: spOne(func(in []*tensor.Tensor) *tensor.Tensor {
				y, _, _ := refChannelNorm(in[0], in[1], in[2], g, eps, false)
				return y
			})}
	}
	register(
		channel("instance_norm", "NCL", randn(432, 2, 3, 5), 0, 1e-5),
		channel("instance_norm", "NCHW, epsilon 0.1", randn(433, 1, 2, 2, 3), 0, 0.1),
		channel("group_norm", "2 groups", randn(434, 2, 4, 3), 2, 1e-5),
		channel("group_norm", "1 group", randn(435, 2, 4, 3), 1, 1e-5),
		channel("group_norm", "a group per channel, NCHW", randn(436, 1, 4, 2, 2), 4, 1e-3),
		opCase{op: "instance_norm", name: "hand", attrs: spA("epsilon", aFloat(0)),
			inputs: []*tensor.Tensor{floats([]int{1, 2, 2}, 1, 3, 10, 20), floats([]int{2}, 1, 2), floats([]int{2}, 0, 1)},
			want:   spConst(floats([]int{1, 2, 2}, -1, 1, -1, 3)), tol: 1e-6},
	)

	lp := func(name string, x *tensor.Tensor, axis, p int) opCase {
		return opCase{op: "lp_normalization", name: name, attrs: spA("axis", aInt(int64(axis)), "p", aInt(int64(p))),
			inputs: []*tensor.Tensor{x}, tol: 1e-6,
			want: spOne(func(in []*tensor.Tensor) *tensor.Tensor {
				x := in[0]
				a := (axis + x.Rank()) % x.Rank()
				return spF32(x.Shape, func(i []int) float64 {
					j := append([]int{}, i...)
					s := 0.0
					for k := range x.Shape[a] {
						j[a] = k
						if p == 1 {
							s += math.Abs(x.At(j...))
						} else {
							s += x.At(j...) * x.At(j...)
						}
					}
					if p == 2 {
						s = math.Sqrt(s)
					}
					return x.At(i...) / s
				})
			})}
	}
	register(
		lp("p 2 axis -1", randn(440, 2, 3, 4), -1, 2),
		lp("p 1 axis 0", randn(441, 2, 3, 4), 0, 1),
		lp("p 2 axis 1", randn(442, 2, 3, 4), 1, 2),
		opCase{op: "lp_normalization", name: "hand p 2", inputs: []*tensor.Tensor{floats([]int{2, 2}, 3, 4, 0, -2)},
			want: spConst(floats([]int{2, 2}, 0.6, 0.8, 0, -1)), tol: 1e-7},
		opCase{op: "lp_normalization", name: "hand p 1 axis 0", attrs: spA("axis", aInt(0), "p", aInt(1)), inputs: []*tensor.Tensor{floats([]int{2, 2}, 1, 4, -3, 4)},
			want: spConst(floats([]int{2, 2}, 0.25, 0.5, -0.75, 0.5))},
		opCase{op: "lp_normalization", name: "hand zero norm", inputs: []*tensor.Tensor{floats([]int{2, 2}, 0, 0, 3, 4)},
			want: spConst(floats([]int{2, 2}, 0, 0, 0.6, 0.8))},
	)

	lrn := func(name string, x *tensor.Tensor, size int, alpha, beta, bias float64, defaults bool) opCase {
		attrs := spA("size", aInt(int64(size)), "alpha", aFloat(alpha), "beta", aFloat(beta), "bias", aFloat(bias))
		if defaults {
			attrs = nil
		}
		return opCase{op: "lrn", name: name, attrs: attrs, inputs: []*tensor.Tensor{x}, tol: 1e-6,
			want: spOne(func(in []*tensor.Tensor) *tensor.Tensor {
				x := in[0]
				c := x.Shape[1]
				return spF32(x.Shape, func(i []int) float64 {
					// ONNX: the channels max(0, c - floor((size-1)/2)) .. min(C-1, c + ceil((size-1)/2)).
					lo, hi := max(0, i[1]-(size-1)/2), min(c-1, i[1]+(size-1+1)/2)
					j := append([]int{}, i...)
					s := 0.0
					for k := lo; k <= hi; k++ {
						j[1] = k
						s += x.At(j...) * x.At(j...)
					}
					return x.At(i...) / math.Pow(bias+alpha/float64(size)*s, beta)
				})
			})}
	}
	register(
		lrn("defaults", randn(450, 1, 7, 2, 2), 5, 0.0001, 0.75, 1, true),
		lrn("size 3", randn(451, 2, 5, 3), 3, 0.5, 0.75, 2, false),
		lrn("size 4 (even)", randn(452, 1, 6, 2, 2), 4, 0.4, 0.5, 1, false),
		lrn("size 1, no spatial axes", randn(453, 2, 3), 1, 1, 1, 1, false),
	)
}
