package stdlib_test

import (
	"math"
	"tofuc/lang/ir"

	"tofuc/lang"
	"tofuc/runtime/tensor"
)

// refPoolOut is the ONNX (and PyTorch) pooled extent of one axis; in ceil
// mode the last window must start inside the input or its left padding.
func refPoolOut(in, k, s, pb, pe, d int, ceil bool) int {
	span := in + pb + pe - d*(k-1) - 1
	if !ceil {
		return span/s + 1
	}
	out := (span+s-1)/s + 1
	if (out-1)*s >= in+pb {
		out--
	}
	return out
}

type poolAttrs struct {
	kernel, strides, pads, dil []int
	ceil, includePad           bool
}

// refPool2d computes max pooling (with ONNX flat indices of the first
// maximum in window order), average pooling (op avg_pool2d) or sum pooling
// (sum_pool2d) of x [N, C, H, W].
func refPool2d(x *tensor.Tensor, p poolAttrs, op string) (y, idx *tensor.Tensor) {
	n, c, h, w := x.Shape[0], x.Shape[1], x.Shape[2], x.Shape[3]
	oh := refPoolOut(h, p.kernel[0], p.strides[0], p.pads[0], p.pads[2], p.dil[0], p.ceil)
	ow := refPoolOut(w, p.kernel[1], p.strides[1], p.pads[1], p.pads[3], p.dil[1], p.ceil)
	shape := []int{n, c, oh, ow}
	y = tensor.New(lang.F32, shape)
	idx = tensor.New(lang.I64, shape)
	k := 0
	spEach(shape, func(o []int) {
		best, bestAt := math.Inf(-1), int64(-1)
		sum, count := 0.0, 0
		for a := range p.kernel[0] {
			for b := range p.kernel[1] {
				i := o[2]*p.strides[0] + a*p.dil[0] - p.pads[0]
				j := o[3]*p.strides[1] + b*p.dil[1] - p.pads[1]
				if p.includePad {
					if i >= -p.pads[0] && i < h+p.pads[2] && j >= -p.pads[1] && j < w+p.pads[3] {
						count++
					}
				}
				if i < 0 || i >= h || j < 0 || j >= w {
					continue
				}
				v := x.At(o[0], o[1], i, j)
				sum += v
				if !p.includePad {
					count++
				}
				if v > best {
					best, bestAt = v, int64(((o[0]*c+o[1])*h+i)*w+j)
				}
			}
		}
		switch op {
		case "avg_pool2d":
			y.SetFlat(k, sum/float64(count))
		case "sum_pool2d":
			y.SetFlat(k, sum)
		default:
			y.SetFlat(k, best)
			idx.I[k] = bestAt
		}
		k++
	})
	return y, idx
}

func init() {
	i64s := func(v []int) []int64 {
		out := make([]int64, len(v))
		for i, x := range v {
			out[i] = int64(x)
		}
		return out
	}
	pool := func(op, name string, x *tensor.Tensor, p poolAttrs) opCase {
		attrs := spA("kernel_shape", ir.IntList(i64s(p.kernel)...), "strides", ir.IntList(i64s(p.strides)...),
			"pads", ir.IntList(i64s(p.pads)...), "dilations", ir.IntList(i64s(p.dil)...), "ceil_mode", aInt(map[bool]int64{false: 0, true: 1}[p.ceil]))
		if op == "avg_pool2d" {
			attrs["count_include_pad"] = aInt(map[bool]int64{false: 0, true: 1}[p.includePad])
		}
		return opCase{op: op, name: name, attrs: attrs, inputs: []*tensor.Tensor{x},
			want: func(in []*tensor.Tensor) []*tensor.Tensor {
				y, idx := refPool2d(in[0], p, op)
				if op == "max_pool2d_with_indices" {
					return []*tensor.Tensor{y, idx}
				}
				return []*tensor.Tensor{y}
			}}
	}
	// x [1, 2, 5, 6]: H = 5 with k 2, s 2, pads 1 + 1 would give 4 windows
	// in ceil mode, but the 4th would start in the bottom padding (3
	// remain); W = 6 with k 3, s 2 gives 3 in ceil mode (2 in floor mode),
	// the last window running past the input.
	ceilCase := poolAttrs{kernel: []int{2, 3}, strides: []int{2, 2}, pads: []int{1, 0, 1, 0}, dil: []int{1, 1}, ceil: true}
	floorCase := ceilCase
	floorCase.ceil = false
	xc := randn(200, 1, 2, 5, 6)
	general := poolAttrs{kernel: []int{3, 2}, strides: []int{2, 1}, pads: []int{1, 0, 2, 1}, dil: []int{1, 2}}
	xg := randn(201, 2, 2, 6, 5)
	plain := poolAttrs{kernel: []int{2, 2}, strides: []int{2, 2}, pads: []int{0, 0, 0, 0}, dil: []int{1, 1}}
	x44 := floats([]int{1, 1, 4, 4}, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)

	for _, op := range []string{"max_pool2d", "max_pool2d_with_indices", "avg_pool2d", "sum_pool2d"} {
		register(
			pool(op, "k 2 s 2", x44, plain),
			pool(op, "ceil mode, last window clipped and dropped", xc, ceilCase),
			pool(op, "floor mode", xc, floorCase),
			pool(op, "strides, asymmetric pads, dilation", xg, general),
		)
	}
	// H = 6, k 3, s 2, pads 1 + 1 in ceil mode: 4 windows, the last one
	// (rows 5, 6, 7) covering one input row, one bottom-padding row and
	// one row past the padding; with dilation 2 along W.
	pastPad := poolAttrs{kernel: []int{3, 2}, strides: []int{2, 2}, pads: []int{1, 0, 1, 1}, dil: []int{1, 2}, ceil: true}
	xp := randn(208, 1, 2, 6, 5)
	for _, op := range []string{"max_pool2d", "max_pool2d_with_indices", "avg_pool2d", "sum_pool2d"} {
		register(pool(op, "ceil mode, last window past the end padding", xp, pastPad))
	}
	inc := func(p poolAttrs) poolAttrs { p.includePad = true; return p }
	register(pool("avg_pool2d", "count_include_pad, ceil mode past the end padding", xp, inc(pastPad)))
	register(
		pool("avg_pool2d", "count_include_pad, ceil mode", xc, inc(ceilCase)),
		pool("avg_pool2d", "count_include_pad, asymmetric pads", xg, inc(general)),
		// Hand-computed expectations.
		opCase{op: "max_pool2d", name: "hand k 2 s 2", attrs: spA("strides", ir.IntList(2, 2)), inputs: []*tensor.Tensor{x44},
			want: spConst(floats([]int{1, 1, 2, 2}, 5, 7, 13, 15))},
		opCase{op: "avg_pool2d", name: "hand pads 1, count_include_pad 0", attrs: spA("pads", ir.IntList(1, 1, 1, 1)),
			inputs: []*tensor.Tensor{floats([]int{1, 1, 2, 2}, 1, 2, 3, 4)},
			want:   spConst(floats([]int{1, 1, 3, 3}, 1, 1.5, 2, 2, 2.5, 3, 3, 3.5, 4))},
		opCase{op: "avg_pool2d", name: "hand pads 1, count_include_pad 1", attrs: spA("pads", ir.IntList(1, 1, 1, 1), "count_include_pad", aInt(1)),
			inputs: []*tensor.Tensor{floats([]int{1, 1, 2, 2}, 1, 2, 3, 4)},
			want:   spConst(floats([]int{1, 1, 3, 3}, 0.25, 0.75, 0.5, 1, 2.5, 1.5, 0.75, 1.75, 1))},
		opCase{op: "avg_pool2d", name: "hand ceil mode k 2 s 2 on 3x3", attrs: spA("strides", ir.IntList(2, 2), "ceil_mode", aInt(1)),
			inputs: []*tensor.Tensor{spSeq(1, 1, 3, 3)},
			want:   spConst(floats([]int{1, 1, 2, 2}, 3, 4.5, 7.5, 9))},
		opCase{op: "max_pool2d_with_indices", name: "hand ties take the first, flat over N and C",
			inputs: []*tensor.Tensor{floats([]int{1, 2, 2, 3}, 1, 5, 5, 5, 2, 0, 7, 7, 7, 7, 7, 7)},
			want: spConst(floats([]int{1, 2, 1, 2}, 5, 5, 7, 7),
				ints([]int{1, 2, 1, 2}, 1, 1, 6, 7))},
		opCase{op: "max_pool2d_with_indices", name: "hand padded window", attrs: spA("pads", ir.IntList(1, 1, 0, 0), "strides", ir.IntList(2, 2)),
			inputs: []*tensor.Tensor{floats([]int{1, 1, 3, 3}, -1, -2, -3, -4, -5, -6, -7, -8, -9)},
			want: spConst(floats([]int{1, 1, 2, 2}, -1, -2, -4, -5),
				ints([]int{1, 1, 2, 2}, 0, 1, 3, 4))},
	)

	spatialMean := func(max bool) func([]*tensor.Tensor) []*tensor.Tensor {
		return spOne(func(in []*tensor.Tensor) *tensor.Tensor {
			x := in[0]
			out := append([]int{x.Shape[0], x.Shape[1]}, make([]int, x.Rank()-2)...)
			for i := 2; i < len(out); i++ {
				out[i] = 1
			}
			return spF32(out, func(o []int) float64 {
				s, m, n := 0.0, math.Inf(-1), 0
				spEach(x.Shape[2:], func(r []int) {
					v := x.At(spIdx(o[0], o[1], r)...)
					s += v
					m = math.Max(m, v)
					n++
				})
				if max {
					return m
				}
				return s / float64(n)
			})
		})
	}
	register(
		opCase{op: "global_avg_pool2d", name: "vs loop", inputs: []*tensor.Tensor{randn(202, 2, 3, 4, 5)}, want: spatialMean(false)},
		opCase{op: "global_avg_pool2d", name: "hand", inputs: []*tensor.Tensor{spSeq(1, 2, 2, 2)}, want: spConst(floats([]int{1, 2, 1, 1}, 2.5, 6.5))},
		opCase{op: "global_max_pool2d", name: "vs loop", inputs: []*tensor.Tensor{randn(203, 2, 3, 4, 5)}, want: spatialMean(true)},
		opCase{op: "global_avg_pool", name: "3 spatial axes", inputs: []*tensor.Tensor{randn(204, 1, 2, 2, 3, 2)}, want: spatialMean(false)},
		opCase{op: "global_avg_pool", name: "1 spatial axis", inputs: []*tensor.Tensor{randn(205, 2, 2, 5)}, want: spatialMean(false)},
		opCase{op: "global_max_pool", name: "3 spatial axes", inputs: []*tensor.Tensor{randn(206, 1, 2, 2, 3, 2)}, want: spatialMean(true)},
		opCase{op: "global_max_pool", name: "1 spatial axis", inputs: []*tensor.Tensor{randn(207, 2, 2, 5)}, want: spatialMean(true)},
	)
}

func init() {
	// max_unpool against a direct loop: the last of equal indices wins,
	// positions no index names are 0.
	x := randn(77, 6)
	idx := ints([]int{6}, 3, 0, 11, 3, 7, 5)
	register(opCase{op: "max_unpool", name: "direct, [3, 4], a repeated index",
		attrs:  map[string]ir.AttrValue{"shape": ir.IntList(3, 4)},
		inputs: []*tensor.Tensor{x, idx},
		want: func(in []*tensor.Tensor) []*tensor.Tensor {
			y := tensor.New(lang.F32, []int{3, 4})
			for k := range in[0].Len() {
				y.SetFlat(int(in[1].I[k]), in[0].Flat(k))
			}
			return []*tensor.Tensor{y}
		}})
}
