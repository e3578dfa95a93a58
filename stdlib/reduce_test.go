package stdlib_test

import (
	"fmt"
	"math"
	"sort"
	"tofuc/lang/ir"

	"tofuc/lang"
	"tofuc/runtime/tensor"
)

// refReduce folds x over axes (negative ones count from the end, none
// means all) in row-major order of the reduced indices: f gets the
// values of one output element.
func refReduce(x *tensor.Tensor, axes []int, keep bool, f func(vals []float64) float64) *tensor.Tensor {
	r := x.Rank()
	red := make([]bool, r)
	for _, a := range axes {
		red[(a+r)%r] = true
	}
	if len(axes) == 0 {
		for i := range red {
			red[i] = true
		}
	}
	var outShape, keptShape []int
	for d, n := range x.Shape {
		switch {
		case !red[d]:
			outShape = append(outShape, n)
			keptShape = append(keptShape, n)
		case keep:
			outShape = append(outShape, 1)
			keptShape = append(keptShape, 1)
		default:
			keptShape = append(keptShape, 1)
		}
	}
	vals := map[int][]float64{}
	spEach(x.Shape, func(i []int) {
		o := 0
		for d := range r {
			if !red[d] {
				o = o*x.Shape[d] + i[d]
			}
		}
		vals[o] = append(vals[o], x.At(i...))
	})
	out := tensor.New(lang.F32, outShape)
	for o := range out.Len() {
		out.SetFlat(o, f(vals[o]))
	}
	return out
}

func init() {
	fold := func(init float64, step func(acc, v float64) float64) func([]float64) float64 {
		return func(vs []float64) float64 {
			acc := init
			for _, v := range vs {
				acc = step(acc, v)
			}
			return acc
		}
	}
	sum := fold(0, func(a, v float64) float64 { return a + v })
	refs := map[string]func([]float64) float64{
		"reduce_sum":  sum,
		"reduce_mean": func(vs []float64) float64 { return sum(vs) / float64(len(vs)) },
		"reduce_max":  fold(math.Inf(-1), math.Max),
		"reduce_min":  fold(math.Inf(1), math.Min),
		"reduce_prod": fold(1, func(a, v float64) float64 { return a * v }),
		"reduce_l1":   fold(0, func(a, v float64) float64 { return a + math.Abs(v) }),
		"reduce_l2": func(vs []float64) float64 {
			return math.Sqrt(fold(0, func(a, v float64) float64 { return a + v*v })(vs))
		},
		"reduce_sum_square": fold(0, func(a, v float64) float64 { return a + v*v }),
		"reduce_log_sum":    func(vs []float64) float64 { return math.Log(sum(vs)) },
		// The naive formula; the operator subtracts the maximum first.
		"reduce_logsumexp": func(vs []float64) float64 {
			return math.Log(fold(0, func(a, v float64) float64 { return a + math.Exp(v) })(vs))
		},
	}
	x := randn(300, 2, 3, 4)
	xpos := spF32([]int{2, 3, 4}, func(i []int) float64 { return math.Abs(x.At(i...)) + 0.1 })
	configs := []struct {
		name string
		axes []int64
		keep bool
	}{
		{"axes [1] keepdims", []int64{1}, true},
		{"axes [-1] no keepdims", []int64{-1}, false},
		{"axes [0, 2] keepdims", []int64{0, 2}, true},
		{"axes [-3, -2] no keepdims", []int64{-3, -2}, false},
		{"axes [] (all) keepdims", nil, true},
		{"axes [] (all) no keepdims", nil, false},
		{"axes [2, 0] unsorted", []int64{2, 0}, false},
	}
	ops := make([]string, 0, len(refs))
	for op := range refs {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	for _, op := range ops {
		ref := refs[op]
		in := x
		if op == "reduce_log_sum" {
			in = xpos
		}
		for _, c := range configs {
			axes := make([]int, len(c.axes))
			for i, a := range c.axes {
				axes[i] = int(a)
			}
			tol := 0.0
			if op == "reduce_logsumexp" || len(axes) == 2 && axes[0] > axes[1] {
				// Another formula, or maybe another order of the additions.
				tol = 1e-6
			}
			register(opCase{op: op, name: c.name, attrs: spA("axes", ir.IntList(c.axes...), "keepdims", aBool(c.keep)),
				inputs: []*tensor.Tensor{in}, tol: tol,
				want: spOne(func(in []*tensor.Tensor) *tensor.Tensor { return refReduce(in[0], axes, c.keep, ref) })})
		}
	}
	m23 := floats([]int{2, 3}, 1, 2, 3, 4, 5, 6)
	register(
		opCase{op: "reduce_sum", name: "hand axes [0] no keepdims", attrs: spA("axes", ir.IntList(0), "keepdims", aBool(false)),
			inputs: []*tensor.Tensor{m23}, want: spConst(floats([]int{3}, 5, 7, 9))},
		opCase{op: "reduce_sum", name: "hand defaults (all, keepdims)", inputs: []*tensor.Tensor{m23}, want: spConst(floats([]int{1, 1}, 21))},
		opCase{op: "reduce_mean", name: "hand axes [1]", attrs: spA("axes", ir.IntList(1)), inputs: []*tensor.Tensor{m23}, want: spConst(floats([]int{2, 1}, 2, 5))},
		opCase{op: "reduce_prod", name: "hand axes [-1]", attrs: spA("axes", ir.IntList(-1)), inputs: []*tensor.Tensor{m23}, want: spConst(floats([]int{2, 1}, 6, 120))},
		opCase{op: "reduce_logsumexp", name: "large values do not overflow", attrs: spA("axes", ir.IntList(1), "keepdims", aBool(false)),
			inputs: []*tensor.Tensor{floats([]int{2, 2}, 1000, 1000, -1000, -1000)},
			want:   spConst(floats([]int{2}, 1000+math.Ln2, -1000+math.Ln2))},
	)

	// argmax / argmin: the first extremum along axis.
	argRef := func(isMax bool, axis int, keep bool) func([]*tensor.Tensor) []*tensor.Tensor {
		return spOne(func(in []*tensor.Tensor) *tensor.Tensor {
			x := in[0]
			r := x.Rank()
			a := (axis + r) % r
			var shape []int
			for d, n := range x.Shape {
				if d != a {
					shape = append(shape, n)
				} else if keep {
					shape = append(shape, 1)
				}
			}
			return spI64(shape, func(o []int) float64 {
				full := make([]int, r)
				j := 0
				for d := range r {
					if d == a {
						if keep {
							j++
						}
						continue
					}
					full[d] = o[j]
					j++
				}
				best, at := 0.0, -1
				for k := range x.Shape[a] {
					full[a] = k
					v := x.At(full...)
					if at < 0 || isMax && v > best || !isMax && v < best {
						best, at = v, k
					}
				}
				return float64(at)
			})
		})
	}
	ties := floats([]int{2, 3}, 1, 3, 3, 2, 2, 1)
	xr := randn(301, 3, 4, 2)
	register(
		opCase{op: "argmax", name: "hand ties take the first", attrs: spA("axis", aInt(1)), inputs: []*tensor.Tensor{ties},
			want: spConst(ints([]int{2, 1}, 1, 0))},
		opCase{op: "argmin", name: "hand ties take the first", attrs: spA("axis", aInt(1)), inputs: []*tensor.Tensor{ties},
			want: spConst(ints([]int{2, 1}, 0, 2))},
		opCase{op: "argmax", name: "hand axis 0 no keepdims", attrs: spA("keepdims", aBool(false)), inputs: []*tensor.Tensor{ties},
			want: spConst(ints([]int{3}, 1, 0, 0))},
		opCase{op: "argmin", name: "hand axis 0 no keepdims", attrs: spA("keepdims", aBool(false)), inputs: []*tensor.Tensor{ties},
			want: spConst(ints([]int{3}, 0, 1, 1))},
	)
	for _, axis := range []int{0, 1, -1} {
		for _, keep := range []bool{true, false} {
			name := fmt.Sprintf("random axis %d keepdims %v", axis, keep)
			for _, op := range []string{"argmax", "argmin"} {
				register(opCase{op: op, name: name, attrs: spA("axis", aInt(int64(axis)), "keepdims", aBool(keep)),
					inputs: []*tensor.Tensor{xr}, want: argRef(op == "argmax", axis, keep)})
			}
		}
	}

	// cumsum
	c24 := floats([]int{2, 4}, 1, 2, 3, 4, 5, 6, 7, 8)
	cum := func(name string, axis, excl, rev int64, want *tensor.Tensor) opCase {
		return opCase{op: "cumsum", name: name, attrs: spA("axis", aInt(axis), "exclusive", aInt(excl), "reverse", aInt(rev)),
			inputs: []*tensor.Tensor{c24}, want: spConst(want)}
	}
	register(
		cum("hand axis 1", 1, 0, 0, floats([]int{2, 4}, 1, 3, 6, 10, 5, 11, 18, 26)),
		cum("hand axis -1 exclusive", -1, 1, 0, floats([]int{2, 4}, 0, 1, 3, 6, 0, 5, 11, 18)),
		cum("hand axis 1 reverse", 1, 0, 1, floats([]int{2, 4}, 10, 9, 7, 4, 26, 21, 15, 8)),
		cum("hand axis 1 reverse exclusive", 1, 1, 1, floats([]int{2, 4}, 9, 7, 4, 0, 21, 15, 8, 0)),
		cum("hand axis 0", 0, 0, 0, floats([]int{2, 4}, 1, 2, 3, 4, 6, 8, 10, 12)),
		cum("hand axis -2 reverse exclusive", -2, 1, 1, floats([]int{2, 4}, 5, 6, 7, 8, 0, 0, 0, 0)),
		opCase{op: "reduce_sum", name: "rank 1 to a scalar", attrs: spA("keepdims", aBool(false)), inputs: []*tensor.Tensor{floats([]int{4}, 1, 2, 3, 4)},
			want: spConst(floats(nil, 10))},
		opCase{op: "reduce_max", name: "i64 stays i64", attrs: spA("axes", ir.IntList(0), "keepdims", aBool(false)), inputs: []*tensor.Tensor{ints([]int{2, 2}, 3, -7, 1, 9)},
			want: spConst(ints([]int{2}, 3, 9))},
		opCase{op: "cumsum", name: "random axis 1 vs loop", attrs: spA("axis", aInt(1)), inputs: []*tensor.Tensor{randn(302, 2, 5, 3)},
			want: spOne(func(in []*tensor.Tensor) *tensor.Tensor {
				x := in[0]
				return spF32(x.Shape, func(o []int) float64 {
					s := 0.0
					for k := 0; k <= o[1]; k++ {
						s += x.At(o[0], k, o[2])
					}
					return s
				})
			})},
	)

	register(
		opCase{op: "cumprod", name: "hand axis 1", attrs: spA("axis", aInt(1)), inputs: []*tensor.Tensor{c24},
			want: spConst(floats([]int{2, 4}, 1, 2, 6, 24, 5, 30, 210, 1680))},
		opCase{op: "cumprod", name: "hand axis 1 reverse exclusive", attrs: spA("axis", aInt(1), "exclusive", aInt(1), "reverse", aInt(1)),
			inputs: []*tensor.Tensor{c24}, want: spConst(floats([]int{2, 4}, 24, 12, 4, 1, 336, 56, 8, 1))},
		opCase{op: "cumprod", name: "integers axis 0 exclusive", attrs: spA("axis", aInt(0), "exclusive", aInt(1)),
			inputs: []*tensor.Tensor{ints([]int{2, 3}, 2, -3, 4, 5, 6, -7)}, want: spConst(ints([]int{2, 3}, 1, 1, 1, 2, -3, 4))},
	)

	xi := spRandInt(306, -9, 9, 2, 4, 3)
	for _, excl := range []int64{0, 1} {
		for _, rev := range []int64{0, 1} {
			register(opCase{op: "cumsum", name: fmt.Sprintf("integers axis -2 exclusive %d reverse %d vs loop", excl, rev),
				attrs: spA("axis", aInt(-2), "exclusive", aInt(excl), "reverse", aInt(rev)), inputs: []*tensor.Tensor{xi},
				want: spOne(func(in []*tensor.Tensor) *tensor.Tensor {
					x := in[0]
					return spF32(x.Shape, func(o []int) float64 {
						s := 0.0
						for k := range x.Shape[1] {
							before := k < o[1]
							if rev == 1 {
								before = k > o[1]
							}
							if before || excl == 0 && k == o[1] {
								s += x.At(o[0], k, o[2])
							}
						}
						return s
					})
				})})
		}
	}

	// top_k, sort, argsort: a stable sort of every lane along axis.
	lanes := func(x *tensor.Tensor, axis int, f func(vals []float64, idx []int) ([]float64, []int), k int, idxOut bool) *tensor.Tensor {
		r := x.Rank()
		a := (axis + r) % r
		shape := append([]int{}, x.Shape...)
		shape[a] = k
		dt := lang.F32
		if idxOut {
			dt = lang.I64
		}
		out := tensor.New(dt, shape)
		lane := append([]int{}, x.Shape...)
		lane[a] = 1
		spEach(lane, func(base []int) {
			n := x.Shape[a]
			vals, idx := make([]float64, n), make([]int, n)
			at := append([]int{}, base...)
			for i := range n {
				at[a] = i
				vals[i], idx[i] = x.At(at...), i
			}
			sv, si := f(vals, idx)
			for i := range k {
				at[a] = i
				if idxOut {
					out.Set(float64(si[i]), at...)
				} else {
					out.Set(sv[i], at...)
				}
			}
		})
		return out
	}
	sorter := func(desc bool) func([]float64, []int) ([]float64, []int) {
		return func(vals []float64, idx []int) ([]float64, []int) {
			sort.SliceStable(idx, func(i, j int) bool {
				if desc {
					return vals[idx[i]] > vals[idx[j]]
				}
				return vals[idx[i]] < vals[idx[j]]
			})
			sv := make([]float64, len(idx))
			for i, j := range idx {
				sv[i] = vals[j]
			}
			return sv, idx
		}
	}
	topk := func(name string, x *tensor.Tensor, k, axis int, largest bool) opCase {
		return opCase{op: "top_k", name: name, attrs: spA("k", aInt(int64(k)), "axis", aInt(int64(axis)), "largest", aInt(map[bool]int64{false: 0, true: 1}[largest])),
			inputs: []*tensor.Tensor{x},
			want: func(in []*tensor.Tensor) []*tensor.Tensor {
				return []*tensor.Tensor{lanes(in[0], axis, sorter(largest), k, false), lanes(in[0], axis, sorter(largest), k, true)}
			}}
	}
	sorting := func(op, name string, x *tensor.Tensor, axis int, desc bool) opCase {
		return opCase{op: op, name: name, attrs: spA("axis", aInt(int64(axis)), "descending", aInt(map[bool]int64{false: 0, true: 1}[desc])),
			inputs: []*tensor.Tensor{x},
			want: spOne(func(in []*tensor.Tensor) *tensor.Tensor {
				return lanes(in[0], axis, sorter(desc), in[0].Shape[(axis+in[0].Rank())%in[0].Rank()], op == "argsort")
			})}
	}
	tk := floats([]int{2, 5}, 3, 1, 3, 2, 5, 0, 0, -1, 4, 4)
	xs := spRandInt(303, -2, 2, 3, 6, 2) // many ties
	register(
		opCase{op: "top_k", name: "hand largest k 3, ties in index order", attrs: spA("k", aInt(3)), inputs: []*tensor.Tensor{tk},
			want: spConst(floats([]int{2, 3}, 5, 3, 3, 4, 4, 0), ints([]int{2, 3}, 4, 0, 2, 3, 4, 0))},
		opCase{op: "top_k", name: "hand smallest k 2", attrs: spA("k", aInt(2), "largest", aInt(0)), inputs: []*tensor.Tensor{tk},
			want: spConst(floats([]int{2, 2}, 1, 2, -1, 0), ints([]int{2, 2}, 1, 3, 2, 0))},
		topk("random ties axis 1 largest", xs, 4, 1, true),
		topk("random ties axis -2 smallest", xs, 3, -2, false),
		topk("random axis 0", randn(304, 4, 3), 2, 0, true),
		opCase{op: "sort", name: "hand", inputs: []*tensor.Tensor{tk},
			want: spConst(floats([]int{2, 5}, 1, 2, 3, 3, 5, -1, 0, 0, 4, 4))},
		opCase{op: "argsort", name: "hand, stable", inputs: []*tensor.Tensor{tk},
			want: spConst(ints([]int{2, 5}, 1, 3, 0, 2, 4, 2, 0, 1, 3, 4))},
		opCase{op: "argsort", name: "hand descending, stable", attrs: spA("descending", aInt(1)), inputs: []*tensor.Tensor{tk},
			want: spConst(ints([]int{2, 5}, 4, 0, 2, 3, 1, 3, 4, 0, 1, 2))},
		sorting("sort", "random ties axis 1", xs, 1, false),
		sorting("sort", "random ties axis 0 descending", xs, 0, true),
		sorting("argsort", "random ties axis 1", xs, 1, false),
		sorting("argsort", "random ties axis -1 descending", xs, -1, true),
		sorting("sort", "random axis -1 descending", randn(305, 3, 7), -1, true),
	)
}
