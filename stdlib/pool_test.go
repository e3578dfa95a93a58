package stdlib_test

import (
	"fmt"
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

// refRoiAlign is ONNX RoiAlign as its reference computes it: per region
// and bin, gh x gw bilinear samples (weights and clamped neighbours
// precomputed), averaged or the largest weighted neighbour.
func refRoiAlign(x, rois, batch *tensor.Tensor, oh, ow, ratio int, scale float64, half bool, mode string) *tensor.Tensor {
	h, w := x.Shape[2], x.Shape[3]
	nr, ch := rois.Shape[0], x.Shape[1]
	y := tensor.New(x.DType, []int{nr, ch, oh, ow})
	off := 0.0
	if half {
		off = 0.5
	}
	// axis gives a sample's low and high neighbours and fraction past the
	// low one, or false outside [-1, n].
	axis := func(v float64, n int) (lo, hi int, frac float64, ok bool) {
		if v < -1 || v > float64(n) {
			return 0, 0, 0, false
		}
		v = max(v, 0)
		lo = int(v)
		if lo >= n-1 {
			return n - 1, n - 1, 0, true
		}
		return lo, lo + 1, v - float64(lo), true
	}
	for r := range nr {
		x0, y0 := rois.At(r, 0)*scale-off, rois.At(r, 1)*scale-off
		rw, rh := rois.At(r, 2)*scale-off-x0, rois.At(r, 3)*scale-off-y0
		if !half {
			rw, rh = max(rw, 1), max(rh, 1)
		}
		gh, gw := ratio, ratio
		if ratio == 0 {
			gh, gw = int(math.Ceil(rh/float64(oh))), int(math.Ceil(rw/float64(ow)))
		}
		b := int(batch.Flat(r))
		for c := range ch {
			for p := range oh {
				for q := range ow {
					total, best, seen := 0.0, 0.0, false
					for i := 0; i < gh; i++ {
						for j := 0; j < gw; j++ {
							sy := y0 + float64(p)*rh/float64(oh) + (float64(i)+0.5)*rh/float64(oh)/float64(gh)
							sx := x0 + float64(q)*rw/float64(ow) + (float64(j)+0.5)*rw/float64(ow)/float64(gw)
							yl, yh, ly, oky := axis(sy, h)
							xl, xh, lx, okx := axis(sx, w)
							v := [4]float64{}
							if oky && okx {
								v = [4]float64{(1 - ly) * (1 - lx) * x.At(b, c, yl, xl), (1 - ly) * lx * x.At(b, c, yl, xh),
									ly * (1 - lx) * x.At(b, c, yh, xl), ly * lx * x.At(b, c, yh, xh)}
							}
							total += v[0] + v[1] + v[2] + v[3]
							m := max(v[0], v[1], v[2], v[3])
							if !seen || m > best {
								best, seen = m, true
							}
						}
					}
					if mode == "max" {
						y.Set(best, r, c, p, q)
					} else {
						y.Set(total/float64(max(gh*gw, 1)), r, c, p, q)
					}
				}
			}
		}
	}
	return y
}

func init() {
	x := randn(78, 2, 3, 6, 7)
	// Regions inside, partly outside, past the image, degenerate (x2 < x1), on image 1 and 0.
	rois := floats([]int{5, 4}, 0.5, 1, 4.2, 5.5, -2, -1.5, 3, 2, 5, 4, 9, 8.5, 3, 3, 2.5, 3.2, 0, 0, 6.9, 5.9)
	batch := ints([]int{5}, 0, 1, 1, 0, 1)
	for _, half := range []bool{true, false} {
		for _, mode := range []string{"avg", "max"} {
			for _, ratio := range []int{0, 2} {
				gh, gw := int64(ratio), int64(ratio)
				if ratio == 0 {
					gh, gw = 4, 4 // above ceil(extent / bins) for these regions
				}
				register(opCase{op: "roi_align", name: fmt.Sprintf("direct, half_pixel %v, %s, sampling_ratio %d", half, mode, ratio),
					attrs: map[string]ir.AttrValue{"OH": aInt(3), "OW": aInt(2), "grid_h": aInt(gh), "grid_w": aInt(gw),
						"sampling_ratio": aInt(int64(ratio)), "spatial_scale": aFloat(0.8), "half_pixel": aBool(half), "mode": aStr(mode)},
					inputs: []*tensor.Tensor{x, rois, batch}, tol: 1e-5,
					want: func(in []*tensor.Tensor) []*tensor.Tensor {
						return []*tensor.Tensor{refRoiAlign(in[0], in[1], in[2], 3, 2, ratio, 0.8, half, mode)}
					}})
			}
		}
	}
}
