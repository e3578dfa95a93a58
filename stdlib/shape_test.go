package stdlib_test

import (
	"fmt"
	"math"
	"testing"
	"tofuc/lang/ir"

	"tofuc/lang"
	"tofuc/runtime/tensor"
)

// refReshape keeps the row-major data of x under a new shape.
func refReshape(x *tensor.Tensor, shape ...int) *tensor.Tensor {
	if tensor.NumElements(shape) != x.Len() {
		panic(fmt.Sprintf("refReshape %v to %v", x.Shape, shape))
	}
	out := x.Clone()
	out.Shape = append([]int{}, shape...)
	return out
}

// refTranspose: output axis i is input axis perm[i].
func refTranspose(x *tensor.Tensor, perm ...int) *tensor.Tensor {
	shape := make([]int, len(perm))
	for i, p := range perm {
		shape[i] = x.Shape[p]
	}
	out := tensor.New(x.DType, shape)
	src := make([]int, len(perm))
	k := 0
	spEach(shape, func(o []int) {
		for i, p := range perm {
			src[p] = o[i]
		}
		out.SetFlat(k, x.At(src...))
		k++
	})
	return out
}

// refPick selects the positions pos along axis.
func refPick(x *tensor.Tensor, axis int, pos []int) *tensor.Tensor {
	shape := append([]int{}, x.Shape...)
	shape[axis] = len(pos)
	out := tensor.New(x.DType, shape)
	k := 0
	spEach(shape, func(o []int) {
		src := append([]int{}, o...)
		src[axis] = pos[o[axis]]
		out.SetFlat(k, x.At(src...))
		k++
	})
	return out
}

func spRange(lo, hi int) []int {
	var r []int
	for i := lo; i < hi; i++ {
		r = append(r, i)
	}
	return r
}

// refConcat joins ts along axis.
func refConcat(axis int, ts ...*tensor.Tensor) *tensor.Tensor {
	shape := append([]int{}, ts[0].Shape...)
	shape[axis] = 0
	for _, t := range ts {
		shape[axis] += t.Shape[axis]
	}
	out := tensor.New(ts[0].DType, shape)
	k := 0
	spEach(shape, func(o []int) {
		src := append([]int{}, o...)
		for _, t := range ts {
			if src[axis] < t.Shape[axis] {
				out.SetFlat(k, t.At(src...))
				break
			}
			src[axis] -= t.Shape[axis]
		}
		k++
	})
	return out
}

// refSlicePositions is ONNX Slice on one axis of extent dim.
func refSlicePositions(dim, start, end, step int) []int {
	clamp := func(v, lo, hi int) int { return max(lo, min(v, hi)) }
	if start < 0 {
		start += dim
	}
	if end < 0 {
		end += dim
	}
	var pos []int
	if step > 0 {
		start, end = clamp(start, 0, dim), clamp(end, 0, dim)
		for i := start; i < end; i += step {
			pos = append(pos, i)
		}
	} else {
		start, end = clamp(start, 0, dim-1), clamp(end, -1, dim-1)
		for i := start; i > end; i += step {
			pos = append(pos, i)
		}
	}
	return pos
}

func init() {
	x := randn(500, 2, 3, 4)
	seq := spSeq(2, 3, 4)
	same := func(f func(x *tensor.Tensor) *tensor.Tensor) func([]*tensor.Tensor) []*tensor.Tensor {
		return spOne(func(in []*tensor.Tensor) *tensor.Tensor { return f(in[0]) })
	}

	// transpose, reshape, flatten, squeeze, unsqueeze
	register(
		opCase{op: "transpose", name: "hand 2-d, empty perm", inputs: []*tensor.Tensor{spSeq(2, 3)},
			want: spConst(floats([]int{3, 2}, 1, 4, 2, 5, 3, 6))},
		opCase{op: "transpose", name: "perm [2, 0, 1]", attrs: spA("perm", ir.IntList(2, 0, 1)), inputs: []*tensor.Tensor{x},
			want: spOne(func(in []*tensor.Tensor) *tensor.Tensor {
				return spF32([]int{4, 2, 3}, func(o []int) float64 { return in[0].At(o[1], o[2], o[0]) })
			})},
		opCase{op: "transpose", name: "empty perm reverses", inputs: []*tensor.Tensor{x},
			want: same(func(x *tensor.Tensor) *tensor.Tensor { return refTranspose(x, 2, 1, 0) })},
		opCase{op: "transpose", name: "perm [0, 2, 1, 3]", attrs: spA("perm", ir.IntList(0, 2, 1, 3)), inputs: []*tensor.Tensor{randn(501, 2, 3, 2, 2)},
			want: same(func(x *tensor.Tensor) *tensor.Tensor { return refTranspose(x, 0, 2, 1, 3) })},
		opCase{op: "reshape", name: "[0, -1]", attrs: spA("shape", ir.IntList(0, -1)), inputs: []*tensor.Tensor{seq},
			want: same(func(x *tensor.Tensor) *tensor.Tensor { return refReshape(x, 2, 12) })},
		opCase{op: "reshape", name: "[4, 0, -1]", attrs: spA("shape", ir.IntList(4, 0, -1)), inputs: []*tensor.Tensor{seq},
			want: same(func(x *tensor.Tensor) *tensor.Tensor { return refReshape(x, 4, 3, 2) })},
		opCase{op: "reshape", name: "default [-1]", inputs: []*tensor.Tensor{seq},
			want: same(func(x *tensor.Tensor) *tensor.Tensor { return refReshape(x, 24) })},
		opCase{op: "reshape", name: "[3, -1, 2, 2]", attrs: spA("shape", ir.IntList(3, -1, 2, 2)), inputs: []*tensor.Tensor{x},
			want: same(func(x *tensor.Tensor) *tensor.Tensor { return refReshape(x, 3, 2, 2, 2) })},
		opCase{op: "reshape", name: "hand [3, 2]", attrs: spA("shape", ir.IntList(3, 2)), inputs: []*tensor.Tensor{spSeq(2, 3)},
			want: spConst(floats([]int{3, 2}, 1, 2, 3, 4, 5, 6))},
	)
	for _, c := range []struct {
		axis  int64
		shape []int
	}{{1, []int{2, 12}}, {0, []int{1, 24}}, {3, []int{24, 1}}, {-1, []int{6, 4}}, {2, []int{6, 4}}} {
		register(opCase{op: "flatten", name: fmt.Sprintf("axis %d", c.axis), attrs: spA("axis", aInt(c.axis)), inputs: []*tensor.Tensor{x},
			want: same(func(x *tensor.Tensor) *tensor.Tensor { return refReshape(x, c.shape...) })})
	}
	x1312 := randn(502, 1, 3, 1, 2)
	x32 := randn(503, 3, 2)
	register(
		opCase{op: "squeeze", name: "axes [0, 2]", attrs: spA("axes", ir.IntList(0, 2)), inputs: []*tensor.Tensor{x1312},
			want: same(func(x *tensor.Tensor) *tensor.Tensor { return refReshape(x, 3, 2) })},
		opCase{op: "squeeze", name: "axes [-2]", attrs: spA("axes", ir.IntList(-2)), inputs: []*tensor.Tensor{x1312},
			want: same(func(x *tensor.Tensor) *tensor.Tensor { return refReshape(x, 1, 3, 2) })},
		opCase{op: "squeeze", name: "default axes [0]", inputs: []*tensor.Tensor{x1312},
			want: same(func(x *tensor.Tensor) *tensor.Tensor { return refReshape(x, 3, 1, 2) })},
		opCase{op: "unsqueeze", name: "axes [0, 3]", attrs: spA("axes", ir.IntList(0, 3)), inputs: []*tensor.Tensor{x32},
			want: same(func(x *tensor.Tensor) *tensor.Tensor { return refReshape(x, 1, 3, 2, 1) })},
		opCase{op: "unsqueeze", name: "axes [1]", attrs: spA("axes", ir.IntList(1)), inputs: []*tensor.Tensor{x32},
			want: same(func(x *tensor.Tensor) *tensor.Tensor { return refReshape(x, 3, 1, 2) })},
		opCase{op: "unsqueeze", name: "axes [-1]", attrs: spA("axes", ir.IntList(-1)), inputs: []*tensor.Tensor{x32},
			want: same(func(x *tensor.Tensor) *tensor.Tensor { return refReshape(x, 3, 2, 1) })},
		opCase{op: "unsqueeze", name: "axes [3, 0] unsorted", attrs: spA("axes", ir.IntList(3, 0)), inputs: []*tensor.Tensor{x32},
			want: same(func(x *tensor.Tensor) *tensor.Tensor { return refReshape(x, 1, 3, 2, 1) })},
		opCase{op: "unsqueeze", name: "axes [-1, 1]", attrs: spA("axes", ir.IntList(-1, 1)), inputs: []*tensor.Tensor{x32},
			want: same(func(x *tensor.Tensor) *tensor.Tensor { return refReshape(x, 3, 1, 2, 1) })},
		opCase{op: "squeeze", name: "axes [2, 0] unsorted", attrs: spA("axes", ir.IntList(2, 0)), inputs: []*tensor.Tensor{x1312},
			want: same(func(x *tensor.Tensor) *tensor.Tensor { return refReshape(x, 3, 2) })},
		opCase{op: "unsqueeze", name: "default axes [0]", inputs: []*tensor.Tensor{x32},
			want: same(func(x *tensor.Tensor) *tensor.Tensor { return refReshape(x, 1, 3, 2) })},
	)

	// Joining and splitting.
	cat := func(op string, axis int, ts ...*tensor.Tensor) opCase {
		return opCase{op: op, name: fmt.Sprintf("axis %d", axis), attrs: spA("axis", aInt(int64(axis))), inputs: ts,
			want: spOne(func(in []*tensor.Tensor) *tensor.Tensor {
				a := (axis + in[0].Rank()) % in[0].Rank()
				return refConcat(a, in...)
			})}
	}
	register(
		opCase{op: "concat", name: "hand axis 1", attrs: spA("axis", aInt(1)), inputs: []*tensor.Tensor{floats([]int{2, 1}, 1, 2), floats([]int{2, 2}, 3, 4, 5, 6)},
			want: spConst(floats([]int{2, 3}, 1, 3, 4, 2, 5, 6))},
		cat("concat", 0, randn(510, 2, 3), randn(511, 1, 3)),
		cat("concat", 1, randn(512, 2, 1, 3), randn(513, 2, 2, 3)),
		cat("concat", -1, randn(514, 2, 2), randn(515, 2, 3)),
		cat("concat3", 0, randn(516, 1, 2), randn(517, 2, 2), randn(518, 3, 2)),
		cat("concat3", -2, randn(519, 2, 1, 2), randn(520, 2, 3, 2), randn(521, 2, 2, 2)),
		cat("concat4", 1, randn(522, 2, 1), randn(523, 2, 2), randn(524, 2, 1), randn(525, 2, 3)),
		cat("concat4", 0, randn(526, 1, 2), randn(527, 1, 2), randn(528, 2, 2), randn(529, 1, 2)),
	)
	a23, b23 := spSeq(2, 3), spF32([]int{2, 3}, func(i []int) float64 { return float64(-10*i[0] - i[1]) })
	// numpy.stack: a negative axis counts from the end of the output.
	for _, ax := range []int{0, 1, 2, -1, -2, -3} {
		axis := (ax + 3) % 3
		register(opCase{op: "stack", name: fmt.Sprintf("axis %d", ax), attrs: spA("axis", aInt(int64(ax))), inputs: []*tensor.Tensor{a23, b23},
			want: spOne(func(in []*tensor.Tensor) *tensor.Tensor {
				shape := spIdx(in[0].Shape[:axis], 2, in[0].Shape[axis:])
				return spF32(shape, func(o []int) float64 {
					src := spIdx(o[:axis], o[axis+1:])
					return in[o[axis]].At(src...)
				})
			})})
	}
	parts := func(x *tensor.Tensor, axis int, cuts ...int) []*tensor.Tensor {
		a := (axis + x.Rank()) % x.Rank()
		var out []*tensor.Tensor
		lo := 0
		for _, c := range append(cuts, x.Shape[a]) {
			out = append(out, refPick(x, a, spRange(lo, c)))
			lo = c
		}
		return out
	}
	split := func(op, name string, x *tensor.Tensor, axis int, at []int64, cuts ...int) opCase {
		attrs := spA("axis", aInt(int64(axis)))
		if op == "split" {
			attrs["at"] = aInt(at[0])
		} else {
			attrs["at"] = ir.IntList(at...)
		}
		return opCase{op: op, name: name, attrs: attrs, inputs: []*tensor.Tensor{x},
			want: func(in []*tensor.Tensor) []*tensor.Tensor { return parts(in[0], axis, cuts...) }}
	}
	x25 := randn(530, 2, 5)
	register(
		opCase{op: "stack", name: "hand axis -1", attrs: spA("axis", aInt(-1)), inputs: []*tensor.Tensor{floats([]int{2}, 1, 2), floats([]int{2}, 3, 4)},
			want: spConst(floats([]int{2, 2}, 1, 3, 2, 4))},
		opCase{op: "stack", name: "scalars", inputs: []*tensor.Tensor{floats(nil, 1), floats(nil, 3)},
			want: spConst(floats([]int{2}, 1, 3))},
		split("split", "at 0 halves (first larger)", x25, 1, []int64{0}, 3),
		split("split", "at 2", x25, 1, []int64{2}, 2),
		split("split", "axis -1 at 4", x25, -1, []int64{4}, 4),
		split("split", "axis 0 at 1", x25, 0, []int64{1}, 1),
		split("split3", "thirds of 7", randn(531, 7, 2), 0, nil, 3, 6),
		split("split3", "at [1, 4]", randn(532, 7, 2), 0, []int64{1, 4}, 1, 4),
		split("split3", "axis -1 thirds of 6", randn(533, 2, 6), -1, nil, 2, 4),
		opCase{op: "split", name: "hand", inputs: []*tensor.Tensor{floats([]int{3}, 1, 2, 3)},
			want: spConst(floats([]int{2}, 1, 2), floats([]int{1}, 3))},
	)

	// slice
	slice := func(name string, x *tensor.Tensor, starts, ends, axes, steps []int64) opCase {
		return opCase{op: "slice", name: name, attrs: spA("starts", ir.IntList(starts...), "ends", ir.IntList(ends...), "axes", ir.IntList(axes...), "steps", ir.IntList(steps...)),
			inputs: []*tensor.Tensor{x},
			want: same(func(x *tensor.Tensor) *tensor.Tensor {
				for i := range starts {
					a := i
					if len(axes) > 0 {
						a = (int(axes[i]) + x.Rank()) % x.Rank()
					}
					step := 1
					if len(steps) > 0 {
						step = int(steps[i])
					}
					x = refPick(x, a, refSlicePositions(x.Shape[a], int(starts[i]), int(ends[i]), step))
				}
				return x
			})}
	}
	x56 := spSeq(5, 6)
	register(
		slice("negative start and end", x56, []int64{-4}, []int64{-1}, []int64{1}, nil),
		slice("reverse with clamped end", x56, []int64{-1}, []int64{-1000}, []int64{0}, []int64{-1}),
		slice("two axes, steps -2 and 2, end clamps", x56, []int64{4, 1}, []int64{0, 100}, []int64{0, 1}, []int64{-2, 2}),
		slice("axes empty, steps empty", x56, []int64{1, 2}, []int64{3, 5}, nil, nil),
		slice("negative axis, start beyond the end clamps", x56, []int64{10}, []int64{-7}, []int64{-1}, []int64{-3}),
		slice("start below zero clamps", seq, []int64{-10, 1}, []int64{2, 3}, []int64{2, 0}, []int64{1, 1}),
		opCase{op: "slice", name: "hand", attrs: spA("starts", ir.IntList(1), "ends", ir.IntList(-1), "axes", ir.IntList(1)), inputs: []*tensor.Tensor{spSeq(2, 4)},
			want: spConst(floats([]int{2, 2}, 2, 3, 6, 7))},
		opCase{op: "slice", name: "hand reverse", attrs: spA("starts", ir.IntList(-1), "ends", ir.IntList(-9), "steps", ir.IntList(-2)), inputs: []*tensor.Tensor{spSeq(5)},
			want: spConst(floats([]int{3}, 5, 3, 1))},
	)

	// Padding.
	pad := func(name string, x *tensor.Tensor, value float64, pads ...int) opCase {
		p := make([]int64, len(pads))
		for i, v := range pads {
			p[i] = int64(v)
		}
		return opCase{op: "pad", name: name, attrs: spA("pads", ir.IntList(p...), "value", aFloat(value)), inputs: []*tensor.Tensor{x},
			want: same(func(x *tensor.Tensor) *tensor.Tensor {
				r := x.Rank()
				shape := make([]int, r)
				for d := range r {
					shape[d] = x.Shape[d] + pads[d] + pads[r+d]
				}
				return spF32(shape, func(o []int) float64 {
					src := make([]int, r)
					for d := range r {
						src[d] = o[d] - pads[d]
						if src[d] < 0 || src[d] >= x.Shape[d] {
							return value
						}
					}
					return x.At(src...)
				})
			})}
	}
	pad2 := func(op, name string, x *tensor.Tensor, pads ...int) opCase {
		return opCase{op: op, name: name, attrs: spA("pads", ir.IntList(int64(pads[0]), int64(pads[1]), int64(pads[2]), int64(pads[3]))),
			inputs: []*tensor.Tensor{x},
			want: same(func(x *tensor.Tensor) *tensor.Tensor {
				r := x.Rank()
				h, w := x.Shape[r-2], x.Shape[r-1]
				fix := func(i, n int) int {
					if op == "pad_edge2d" {
						return max(0, min(i, n-1))
					}
					if i < 0 {
						return -i
					}
					if i >= n {
						return 2*(n-1) - i
					}
					return i
				}
				shape := spIdx(x.Shape[:r-2], h+pads[0]+pads[2], w+pads[1]+pads[3])
				return spF32(shape, func(o []int) float64 {
					return x.At(spIdx(o[:r-2], fix(o[r-2]-pads[0], h), fix(o[r-1]-pads[1], w))...)
				})
			})}
	}
	register(
		opCase{op: "pad", name: "hand", attrs: spA("pads", ir.IntList(1, 0, 0, 2), "value", aFloat(9)), inputs: []*tensor.Tensor{spSeq(2, 2)},
			want: spConst(floats([]int{3, 4}, 9, 9, 9, 9, 1, 2, 9, 9, 3, 4, 9, 9))},
		pad("3-d with value", x, -2.5, 1, 0, 2, 0, 1, 1),
		pad("negative pads crop", seq, 0, 0, -1, 1, 1, 0, -2),
		pad("default value 0", randn(540, 3), 0, 2, 1),
		opCase{op: "pad_edge2d", name: "hand", attrs: spA("pads", ir.IntList(1, 1, 0, 2)), inputs: []*tensor.Tensor{spSeq(2, 2)},
			want: spConst(floats([]int{3, 5}, 1, 1, 2, 2, 2, 1, 1, 2, 2, 2, 3, 3, 4, 4, 4))},
		opCase{op: "pad_reflect2d", name: "hand", attrs: spA("pads", ir.IntList(1, 2, 1, 1)), inputs: []*tensor.Tensor{spSeq(2, 3)},
			want: spConst(floats([]int{4, 6}, 6, 5, 4, 5, 6, 5, 3, 2, 1, 2, 3, 2, 6, 5, 4, 5, 6, 5, 3, 2, 1, 2, 3, 2))},
		pad2("pad_edge2d", "batch of 2, wide pads", randn(541, 2, 3, 4), 2, 3, 1, 4),
		pad2("pad_reflect2d", "batch of 2", randn(542, 2, 3, 4), 2, 3, 1, 2),
		pad2("pad_reflect2d", "rank 2, no pads", randn(543, 3, 4), 0, 0, 0, 0),
	)

	// tile, expand
	register(
		opCase{op: "tile", name: "hand [2, 3]", attrs: spA("repeats", ir.IntList(2, 3)), inputs: []*tensor.Tensor{floats([]int{1, 2}, 1, 2)},
			want: spConst(floats([]int{2, 6}, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2))},
		opCase{op: "tile", name: "3-d", attrs: spA("repeats", ir.IntList(1, 3, 2)), inputs: []*tensor.Tensor{x},
			want: same(func(x *tensor.Tensor) *tensor.Tensor {
				return spF32([]int{2, 9, 8}, func(o []int) float64 { return x.At(o[0], o[1]%3, o[2]%4) })
			})},
		opCase{op: "expand", name: "[3, 1] to [2, 1, 4]", attrs: spA("shape", ir.IntList(2, 1, 4)), inputs: []*tensor.Tensor{floats([]int{3, 1}, 1, 2, 3)},
			want: spOne(func([]*tensor.Tensor) *tensor.Tensor {
				return spF32([]int{2, 3, 4}, func(o []int) float64 { return float64(o[1] + 1) })
			})},
		opCase{op: "expand", name: "[3] by [2, 1]", attrs: spA("shape", ir.IntList(2, 1)), inputs: []*tensor.Tensor{floats([]int{3}, 1, 2, 3)},
			want: spConst(floats([]int{2, 3}, 1, 2, 3, 1, 2, 3))},
		opCase{op: "expand", name: "shorter shape keeps x", attrs: spA("shape", ir.IntList(4)), inputs: []*tensor.Tensor{x},
			want: same(func(x *tensor.Tensor) *tensor.Tensor { return x })},
	)

	// Indexing.
	d43 := spSeq(4, 3)
	register(
		opCase{op: "gather", name: "axis 0, 2-d indices, negative", inputs: []*tensor.Tensor{d43, ints([]int{2, 2}, 0, -1, 2, 1)},
			want: spConst(floats([]int{2, 2, 3}, 1, 2, 3, 10, 11, 12, 7, 8, 9, 4, 5, 6))},
		opCase{op: "gather", name: "axis 1, negative", attrs: spA("axis", aInt(1)), inputs: []*tensor.Tensor{d43, ints([]int{2}, -3, 2)},
			want: spConst(floats([]int{4, 2}, 1, 3, 4, 6, 7, 9, 10, 12))},
		opCase{op: "gather", name: "axis -1, scalar index", attrs: spA("axis", aInt(-1)), inputs: []*tensor.Tensor{x, ints(nil, -2)},
			want: same(func(x *tensor.Tensor) *tensor.Tensor {
				return spF32([]int{2, 3}, func(o []int) float64 { return x.At(o[0], o[1], 2) })
			})},
		opCase{op: "gather", name: "axis 1 of 3-d, 2-d indices", attrs: spA("axis", aInt(1)), inputs: []*tensor.Tensor{x, ints([]int{2, 2}, 2, 0, -1, 1)},
			want: same(func(x *tensor.Tensor) *tensor.Tensor {
				idx := []int{2, 0, 2, 1}
				return spF32([]int{2, 2, 2, 4}, func(o []int) float64 { return x.At(o[0], idx[o[1]*2+o[2]], o[3]) })
			})},
		opCase{op: "gather_elements", name: "ONNX example axis 1", attrs: spA("axis", aInt(1)),
			inputs: []*tensor.Tensor{floats([]int{2, 2}, 1, 2, 3, 4), ints([]int{2, 2}, 0, 0, 1, 0)},
			want:   spConst(floats([]int{2, 2}, 1, 1, 4, 3))},
		opCase{op: "gather_elements", name: "ONNX example axis 0, negative index",
			inputs: []*tensor.Tensor{spSeq(3, 3), ints([]int{2, 3}, 1, 2, 0, -1, 0, 0)},
			want:   spConst(floats([]int{2, 3}, 4, 8, 3, 7, 2, 3))},
		opCase{op: "gather_elements", name: "axis -1 of 3-d vs loop", attrs: spA("axis", aInt(-1)),
			inputs: []*tensor.Tensor{x, ints([]int{2, 3, 2}, 3, 0, 1, 1, -1, 2, 0, 0, 3, 2, 1, -4)},
			want: spOne(func(in []*tensor.Tensor) *tensor.Tensor {
				return spF32([]int{2, 3, 2}, func(o []int) float64 {
					k := int(in[1].At(o...))
					if k < 0 {
						k += 4
					}
					return in[0].At(o[0], o[1], k)
				})
			})},
		opCase{op: "scatter_elements", name: "ONNX example axis 0",
			inputs: []*tensor.Tensor{floats([]int{3, 3}, 0, 0, 0, 0, 0, 0, 0, 0, 0), ints([]int{2, 3}, 1, 0, 2, 0, 2, 1), floats([]int{2, 3}, 1.0, 1.1, 1.2, 2.0, 2.1, 2.2)},
			want:   spConst(floats([]int{3, 3}, 2.0, 1.1, 0.0, 1.0, 0.0, 2.2, 0.0, 2.1, 1.2))},
		opCase{op: "scatter_elements", name: "ONNX example axis 1, negative index", attrs: spA("axis", aInt(1)),
			inputs: []*tensor.Tensor{floats([]int{1, 5}, 1, 2, 3, 4, 5), ints([]int{1, 2}, 1, -2), floats([]int{1, 2}, 1.1, 2.1)},
			want:   spConst(floats([]int{1, 5}, 1.0, 1.1, 3.0, 2.1, 5.0))},
		opCase{op: "scatter_elements", name: "duplicates: the last wins", attrs: spA("axis", aInt(1)),
			inputs: []*tensor.Tensor{floats([]int{2, 3}, 1, 2, 3, 4, 5, 6), ints([]int{2, 3}, 0, 0, 2, 1, -2, 1), floats([]int{2, 3}, 10, 20, 30, 40, 50, 60)},
			want:   spConst(floats([]int{2, 3}, 20, 2, 30, 4, 60, 6))},
		opCase{op: "scatter_elements", name: "axis -1 of 3-d vs loop", attrs: spA("axis", aInt(-1)),
			inputs: []*tensor.Tensor{x, ints([]int{2, 3, 1}, 3, 0, -1, 1, 2, -4), spSeq(2, 3, 1)},
			want: spOne(func(in []*tensor.Tensor) *tensor.Tensor {
				out := in[0].Clone()
				spEach(in[1].Shape, func(i []int) {
					k := (int(in[1].At(i...)) + 4) % 4
					out.Set(in[2].At(i...), i[0], i[1], k)
				})
				return out
			})},
		opCase{op: "scatter_add", name: "ONNX example, duplicates add", attrs: spA("axis", aInt(1)),
			inputs: []*tensor.Tensor{floats([]int{1, 5}, 1, 2, 3, 4, 5), ints([]int{1, 2}, 1, 1), floats([]int{1, 2}, 1.1, 2.1)},
			want: spOne(func(in []*tensor.Tensor) *tensor.Tensor {
				u := in[2]
				return floats([]int{1, 5}, 1, 2+(u.Flat(0)+u.Flat(1)), 3, 4, 5)
			})},
		scatterVsLoop("scatter_add", func(old, u float64) float64 { return old + u }),
		opCase{op: "nd_positions", name: "pairs into [3, 4], negative entries from the end",
			inputs: []*tensor.Tensor{ints([]int{3, 2}, 0, 1, 2, -1, -3, 0), ints([]int{2}, 3, 4), ints([]int{2}, 4, 1)},
			want:   spConst(ints([]int{3}, 1, 11, 0))},
		opCase{op: "one_hot_values", name: "axis 1 of [2, 2], a negative index, one out of range", attrs: spA("depth", aInt(3), "axis", aInt(1)),
			inputs: []*tensor.Tensor{ints([]int{2, 2}, 0, -1, 2, 5), floats([]int{2}, -1, 7)},
			want:   spConst(floats([]int{2, 3, 2}, 7, -1, -1, -1, -1, 7, -1, -1, -1, -1, 7, -1))},
		scatterNDVsLoop("scatter_nd", func(_, u float64) float64 { return u }),
		scatterNDVsLoop("scatter_nd_add", func(old, u float64) float64 { return old + u }),
		scatterNDVsLoop("scatter_nd_mul", func(old, u float64) float64 { return old * u }),
		scatterNDVsLoop("scatter_nd_max", math.Max),
		scatterNDVsLoop("scatter_nd_min", math.Min),
		scatterVsLoop("scatter_mul", func(old, u float64) float64 { return old * u }),
		scatterVsLoop("scatter_max", math.Max),
		scatterVsLoop("scatter_min", math.Min),
		// Steps [T = 3, B = 2, 2]: batch 0 reverses its first 2 steps,
		// batch 1 all 3; step 2 of batch 0 stays.
		opCase{op: "reverse_sequence", name: "lengths 2 and 3", inputs: []*tensor.Tensor{
			floats([]int{3, 2, 2}, 1, 2, 10, 20, 3, 4, 30, 40, 5, 6, 50, 60), tensor.FromInts(lang.I32, []int{2}, []int64{2, 3})},
			want: spConst(floats([]int{3, 2, 2}, 3, 4, 50, 60, 1, 2, 30, 40, 5, 6, 10, 20))},
		opCase{op: "sequence_mask", name: "lengths 2 and 0 over 3 steps", attrs: spA("steps", aInt(3)),
			inputs: []*tensor.Tensor{tensor.FromInts(lang.I32, []int{2}, []int64{2, 0})},
			want:   spConst(tensor.FromInts(lang.Bool, []int{3, 2, 1}, []int64{1, 0, 1, 0, 0, 0}))},
		opCase{op: "embedding", name: "2-d ids", inputs: []*tensor.Tensor{d43, ints([]int{2, 2}, 1, 3, 0, 1)},
			want: spConst(floats([]int{2, 2, 3}, 4, 5, 6, 10, 11, 12, 1, 2, 3, 4, 5, 6))},
		opCase{op: "gather", name: "i64 data, i32 indices", inputs: []*tensor.Tensor{ints([]int{3}, 7, 8, 9), tensor.FromInts(lang.I32, []int{2}, []int64{-1, 0})},
			want: spConst(ints([]int{2}, 9, 7))},
		opCase{op: "transpose", name: "bool", inputs: []*tensor.Tensor{tensor.FromInts(lang.Bool, []int{2, 2}, []int64{1, 1, 0, 1})},
			want: spConst(tensor.FromInts(lang.Bool, []int{2, 2}, []int64{1, 0, 1, 1}))},
		opCase{op: "embedding", name: "1-d ids", inputs: []*tensor.Tensor{d43, ints([]int{3}, 2, 2, 0)},
			want: spConst(floats([]int{3, 3}, 7, 8, 9, 7, 8, 9, 1, 2, 3))},
		opCase{op: "take", name: "axis 1 index -1", attrs: spA("axis", aInt(1), "index", aInt(-1)), inputs: []*tensor.Tensor{x},
			want: same(func(x *tensor.Tensor) *tensor.Tensor {
				return spF32([]int{2, 4}, func(o []int) float64 { return x.At(o[0], 2, o[1]) })
			})},
		opCase{op: "take", name: "axis 0 index 1", attrs: spA("index", aInt(1)), inputs: []*tensor.Tensor{d43},
			want: spConst(floats([]int{3}, 4, 5, 6))},
		opCase{op: "take", name: "axis -1 index 0", attrs: spA("axis", aInt(-1)), inputs: []*tensor.Tensor{d43},
			want: spConst(floats([]int{4}, 1, 4, 7, 10))},
		opCase{op: "one_hot", name: "negative index, on and off values", attrs: spA("depth", aInt(3), "on_value", aFloat(5), "off_value", aFloat(0.5)),
			inputs: []*tensor.Tensor{ints([]int{3}, 0, 2, -1)},
			want:   spConst(floats([]int{3, 3}, 5, 0.5, 0.5, 0.5, 0.5, 5, 0.5, 0.5, 5))},
		opCase{op: "one_hot", name: "2-d indices, out of range is all off", attrs: spA("depth", aInt(4)),
			inputs: []*tensor.Tensor{ints([]int{2, 2}, 3, 1, 4, -4)},
			want: spConst(floats([]int{2, 2, 4},
				0, 0, 0, 1, 0, 1, 0, 0,
				0, 0, 0, 0, 1, 0, 0, 0))},
	)

	tri := func(op string, k int) opCase {
		return opCase{op: op, name: fmt.Sprintf("k %d", k), attrs: spA("k", aInt(int64(k))), inputs: []*tensor.Tensor{x},
			want: same(func(x *tensor.Tensor) *tensor.Tensor {
				return spF32(x.Shape, func(o []int) float64 {
					if d := o[2] - o[1]; op == "tril" && d <= k || op == "triu" && d >= k {
						return x.At(o...)
					}
					return 0
				})
			})}
	}
	register(
		opCase{op: "tril", name: "hand", inputs: []*tensor.Tensor{spSeq(3, 3)}, want: spConst(floats([]int{3, 3}, 1, 0, 0, 4, 5, 0, 7, 8, 9))},
		opCase{op: "triu", name: "hand k 1", attrs: spA("k", aInt(1)), inputs: []*tensor.Tensor{spSeq(3, 3)}, want: spConst(floats([]int{3, 3}, 0, 2, 3, 0, 0, 6, 0, 0, 0))},
		tri("tril", 0), tri("tril", 1), tri("tril", -1), tri("triu", 0), tri("triu", 2), tri("triu", -1),
	)

	// Heads, resampling, depth/space.
	xh := randn(560, 2, 3, 8)
	register(
		opCase{op: "split_heads", name: "heads 2 vs formula", attrs: spA("heads", aInt(2)), inputs: []*tensor.Tensor{xh},
			want: same(func(x *tensor.Tensor) *tensor.Tensor {
				return spF32([]int{2, 2, 3, 4}, func(o []int) float64 { return x.At(o[0], o[2], o[1]*4+o[3]) })
			})},
		opCase{op: "split_heads", name: "heads 4 is reshape then transpose", attrs: spA("heads", aInt(4)), inputs: []*tensor.Tensor{xh},
			want: same(func(x *tensor.Tensor) *tensor.Tensor { return refTranspose(refReshape(x, 2, 3, 4, 2), 0, 2, 1, 3) })},
		opCase{op: "merge_heads", name: "reshape of transpose", inputs: []*tensor.Tensor{randn(561, 2, 4, 3, 2)},
			want: same(func(x *tensor.Tensor) *tensor.Tensor { return refReshape(refTranspose(x, 0, 2, 1, 3), 2, 3, 8) })},
		opCase{op: "merge_heads", name: "round trip after split_heads", inputs: []*tensor.Tensor{xh},
			check: func(t *testing.T, in, _ []*tensor.Tensor) {
				for _, h := range []int64{1, 2, 4, 8} {
					s := eval(t, "split_heads", spA("heads", aInt(h)), in[0])
					m := eval(t, "merge_heads", nil, s[0])
					assertClose(t, fmt.Sprintf("heads %d", h), m[0], in[0], 0)
				}
			}},
		opCase{op: "upsample_nearest2d", name: "hand scales [2, 3]", attrs: spA("scales", ir.IntList(2, 3)), inputs: []*tensor.Tensor{spSeq(1, 2, 2)},
			want: spConst(floats([]int{1, 4, 6},
				1, 1, 1, 2, 2, 2,
				1, 1, 1, 2, 2, 2,
				3, 3, 3, 4, 4, 4,
				3, 3, 3, 4, 4, 4))},
		opCase{op: "upsample_nearest2d", name: "default, 4-d", inputs: []*tensor.Tensor{randn(562, 2, 2, 3, 2)},
			want: same(func(x *tensor.Tensor) *tensor.Tensor {
				return spF32([]int{2, 2, 6, 4}, func(o []int) float64 { return x.At(o[0], o[1], o[2]/2, o[3]/2) })
			})},
	)
	// ONNX DepthToSpace: DCR reshapes to [N, b, b, C/b², H, W] and
	// transposes by [0, 3, 4, 1, 5, 2]; CRD reshapes to [N, C/b², b, b, H, W]
	// and transposes by [0, 1, 4, 2, 5, 3]. SpaceToDepth reshapes to
	// [N, C, H/b, b, W/b, b] and transposes by [0, 3, 5, 1, 2, 4].
	d2s := func(x *tensor.Tensor, b int, crd bool) *tensor.Tensor {
		n, c, h, w := x.Shape[0], x.Shape[1], x.Shape[2], x.Shape[3]
		if crd {
			return refReshape(refTranspose(refReshape(x, n, c/(b*b), b, b, h, w), 0, 1, 4, 2, 5, 3), n, c/(b*b), h*b, w*b)
		}
		return refReshape(refTranspose(refReshape(x, n, b, b, c/(b*b), h, w), 0, 3, 4, 1, 5, 2), n, c/(b*b), h*b, w*b)
	}
	s2d := func(x *tensor.Tensor, b int) *tensor.Tensor {
		n, c, h, w := x.Shape[0], x.Shape[1], x.Shape[2], x.Shape[3]
		return refReshape(refTranspose(refReshape(x, n, c, h/b, b, w/b, b), 0, 3, 5, 1, 2, 4), n, c*b*b, h/b, w/b)
	}
	x8 := spSeq(2, 8, 2, 3)
	register(
		opCase{op: "depth_to_space", name: "DCR default, b 2", inputs: []*tensor.Tensor{x8},
			want: same(func(x *tensor.Tensor) *tensor.Tensor { return d2s(x, 2, false) })},
		opCase{op: "depth_to_space", name: "CRD, b 2", attrs: spA("mode", spStr("CRD")), inputs: []*tensor.Tensor{x8},
			want: same(func(x *tensor.Tensor) *tensor.Tensor { return d2s(x, 2, true) })},
		opCase{op: "depth_to_space", name: "DCR, b 3", attrs: spA("blocksize", aInt(3), "mode", spStr("DCR")), inputs: []*tensor.Tensor{spSeq(1, 18, 1, 2)},
			want: same(func(x *tensor.Tensor) *tensor.Tensor { return d2s(x, 3, false) })},
		opCase{op: "depth_to_space", name: "hand DCR, one channel out", inputs: []*tensor.Tensor{spSeq(1, 4, 1, 1)},
			want: spConst(floats([]int{1, 1, 2, 2}, 1, 2, 3, 4))},
		opCase{op: "space_to_depth", name: "b 2", inputs: []*tensor.Tensor{spSeq(2, 2, 4, 6)},
			want: same(func(x *tensor.Tensor) *tensor.Tensor { return s2d(x, 2) })},
		opCase{op: "space_to_depth", name: "b 3", attrs: spA("blocksize", aInt(3)), inputs: []*tensor.Tensor{spSeq(1, 2, 3, 6)},
			want: same(func(x *tensor.Tensor) *tensor.Tensor { return s2d(x, 3) })},
		opCase{op: "space_to_depth", name: "inverts DCR depth_to_space", inputs: []*tensor.Tensor{x8},
			check: func(t *testing.T, in, _ []*tensor.Tensor) {
				d := eval(t, "depth_to_space", nil, in[0])
				s := eval(t, "space_to_depth", nil, d[0])
				assertClose(t, "space_to_depth(depth_to_space(x))", s[0], in[0], 0)
			}},
	)

	// Creation.
	register(
		opCase{op: "full", name: "[2, 3] of 2.5", attrs: spA("shape", ir.IntList(2, 3), "value", aFloat(2.5)),
			want: spConst(floats([]int{2, 3}, 2.5, 2.5, 2.5, 2.5, 2.5, 2.5))},
		opCase{op: "full", name: "scalar default", want: spConst(floats(nil, 0))},
		opCase{op: "zeros", name: "[2, 1, 2]", attrs: spA("shape", ir.IntList(2, 1, 2)), want: spConst(tensor.New(lang.F32, []int{2, 1, 2}))},
		opCase{op: "ones", name: "[3]", attrs: spA("shape", ir.IntList(3)), want: spConst(floats([]int{3}, 1, 1, 1))},
		opCase{op: "ones", name: "[2, 2]", attrs: spA("shape", ir.IntList(2, 2)), want: spConst(floats([]int{2, 2}, 1, 1, 1, 1))},
		opCase{op: "arange", name: "2 to 9 by 3", attrs: spA("start", aInt(2), "limit", aInt(9), "delta", aInt(3)), want: spConst(ints([]int{3}, 2, 5, 8))},
		opCase{op: "arange", name: "-3 to 2", attrs: spA("start", aInt(-3), "limit", aInt(2)), want: spConst(ints([]int{5}, -3, -2, -1, 0, 1))},
		opCase{op: "arange", name: "empty when limit < start", attrs: spA("start", aInt(5), "limit", aInt(2)), want: spConst(ints([]int{0}))},
		opCase{op: "arange", name: "default", want: spConst(ints([]int{1}, 0))},
		opCase{op: "arange", name: "exact end excluded", attrs: spA("limit", aInt(8), "delta", aInt(2)), want: spConst(ints([]int{4}, 0, 2, 4, 6))},
		opCase{op: "eye", name: "n 3", attrs: spA("n", aInt(3)), want: spConst(floats([]int{3, 3}, 1, 0, 0, 0, 1, 0, 0, 0, 1))},
		opCase{op: "eye", name: "n 3 k 1", attrs: spA("n", aInt(3), "k", aInt(1)), want: spConst(floats([]int{3, 3}, 0, 1, 0, 0, 0, 1, 0, 0, 0))},
		opCase{op: "eye", name: "n 4 k -2", attrs: spA("n", aInt(4), "k", aInt(-2)),
			want: spConst(floats([]int{4, 4}, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0))},
	)
}

// scatterVsLoop is a case of a reducing scatter (axis 0, duplicate and
// negative indices) against a loop folding each update into the data
// with fold.
func scatterVsLoop(op string, fold func(old, u float64) float64) opCase {
	return opCase{op: op, name: "axis 0, duplicate and negative indices, vs loop",
		inputs: []*tensor.Tensor{spRandInt(551, -4, 4, 3, 2), ints([]int{4, 2}, 0, 2, -1, 0, 2, -3, 1, 1), spRandInt(552, -5, 5, 4, 2)},
		want: spOne(func(in []*tensor.Tensor) *tensor.Tensor {
			out := in[0].Clone()
			spEach(in[1].Shape, func(i []int) {
				k := int(in[1].At(i...))
				if k < 0 {
					k += 3
				}
				out.Set(fold(out.At(k, i[1]), in[2].At(i...)), k, i[1])
			})
			return out
		})}
}

// scatterNDVsLoop is a case of a ScatterND form with depth 2 into data
// [3, 2, 2] (positions 1 and 4 twice, so duplicates fold in order)
// against a loop folding each update row into the data with fold.
func scatterNDVsLoop(op string, fold func(old, u float64) float64) opCase {
	positions := []int64{4, 1, 4}
	return opCase{op: op, name: "depth 2, a duplicate position, vs loop", attrs: spA("depth", aInt(2)),
		inputs: []*tensor.Tensor{spRandInt(553, -4, 4, 3, 2, 2), ints([]int{3}, positions...), spRandInt(554, -5, 5, 3, 2)},
		want: spOne(func(in []*tensor.Tensor) *tensor.Tensor {
			out := in[0].Clone()
			for k, p := range positions {
				for t := range 2 {
					at := int(p)*2 + t
					out.SetFlat(at, fold(out.Flat(at), in[2].At(k, t)))
				}
			}
			return out
		})}
}
