package stdlib_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/runtime/tensor"
)

// Interpreter cases for grid_taps and grid_gather1d/2d/3d (stdlib/resize.tdl)
// composed as the ONNX GridSample converter composes them, against a direct
// Go evaluation of ONNX GridSample: every mode, padding mode and
// align_corners, over 1, 2 and 3 spatial axes, at grid points inside, on
// the edges of and far outside [-1, 1] (several reflections); and
// affine_grid2d/3d against a direct AffineGrid.

// refGridSample is ONNX GridSample of x [N, C, *S] at grid [N, *O, r].
func refGridSample(x, grid *tensor.Tensor, mode, padding string, align bool) *tensor.Tensor {
	r := len(x.Shape) - 2
	dims := x.Shape[2:]
	outs := grid.Shape[1 : 1+r]
	y := tensor.New(x.DType, append([]int{x.Shape[0], x.Shape[1]}, outs...))
	bounds := func(d int) (float64, float64) {
		if align {
			return 0, float64(d - 1)
		}
		return -0.5, float64(d) - 0.5
	}
	reflect := func(v, lo, hi float64) float64 {
		span := hi - lo
		if span == 0 {
			return lo
		}
		switch {
		case v < lo:
			n := math.Floor((lo - v) / span)
			rest := lo - v - n*span
			if int(n)%2 == 0 {
				return lo + rest
			}
			return hi - rest
		case v > hi:
			n := math.Floor((v - hi) / span)
			rest := v - hi - n*span
			if int(n)%2 == 0 {
				return hi - rest
			}
			return lo + rest
		}
		return v
	}
	// pixel reads x[n, c] at integer indices by the padding mode.
	pixel := func(n, c int, at []int) float64 {
		idx := []int{n, c}
		for a, i := range at {
			switch padding {
			case "zeros":
				if i < 0 || i >= dims[a] {
					return 0
				}
			case "border":
				i = min(max(i, 0), dims[a]-1)
			case "reflection":
				lo, hi := bounds(dims[a])
				i = int(reflect(float64(i), lo, hi))
			}
			idx = append(idx, i)
		}
		return x.At(idx...)
	}
	cubic := func(d float64) float64 {
		const a = -0.75
		d = math.Abs(d)
		if d <= 1 {
			return ((a+2)*d-(a+3))*d*d + 1
		}
		return ((a*d-5*a)*d+8*a)*d - 4*a
	}
	tensor.ForEachIndex(y.Shape, func(_ int, idx []int) {
		n, c, o := idx[0], idx[1], idx[2:]
		coords := make([]float64, r)
		for a := range r {
			g := grid.At(append(append([]int{n}, o...), r-1-a)...)
			d := float64(dims[a])
			v := ((g+1)*d - 1) / 2
			if align {
				v = (g + 1) / 2 * (d - 1)
			}
			if mode == "nearest" {
				v = math.RoundToEven(v)
			}
			if lo, hi := bounds(dims[a]); v < lo || v > hi {
				switch padding {
				case "border":
					v = min(max(v, 0), d-1)
				case "reflection":
					v = reflect(v, lo, hi)
				}
			}
			coords[a] = v
		}
		// Sum over every combination of the axes' taps.
		taps := map[string]int{"nearest": 1, "linear": 2, "cubic": 4}[mode]
		total := 0.0
		combos := make([]int, r)
		for i := range r {
			combos[i] = taps
		}
		tensor.ForEachIndex(combos, func(_ int, ts []int) {
			w := 1.0
			at := make([]int, r)
			for a, t := range ts {
				f := math.Floor(coords[a])
				switch mode {
				case "nearest":
					at[a] = int(coords[a])
				case "linear":
					at[a] = int(f) + t
					w *= 1 - math.Abs(coords[a]-float64(at[a]))
				case "cubic":
					at[a] = int(f) - 1 + t
					w *= cubic(coords[a] - float64(at[a]))
				}
			}
			total += w * pixel(n, c, at)
		})
		y.Set(total, idx...)
	})
	return y
}

// gridSample evaluates the stdlib composition.
func gridSample(t *testing.T, x, grid *tensor.Tensor, mode, padding string, align bool) *tensor.Tensor {
	r := len(x.Shape) - 2
	args := []*tensor.Tensor{x}
	for a := range r {
		args = append(args, eval(t, "grid_taps", map[string]ir.AttrValue{"size": aInt(int64(x.Shape[2+a])), "comp": aInt(int64(r - 1 - a)),
			"mode": aStr(mode), "padding_mode": aStr(padding), "align_corners": aBool(align)}, grid)...)
	}
	return eval(t, fmt.Sprintf("grid_gather%dd", r), nil, args...)[0]
}

// gridPoints is a grid [N, *outs, r] of coordinates: random ones in
// [-1.4, 1.4], the corners and half-way points exactly, and some far
// outside.
func gridPoints(seed uint64, n int, outs []int) *tensor.Tensor {
	rng := rand.New(rand.NewPCG(seed, 3))
	g := tensor.New(lang.F32, append(append([]int{n}, outs...), len(outs)))
	special := []float64{-1, 1, 0, -0.5, 0.5, 3.7, -4.2, 1.05, -1.1, 7.3}
	for i := range g.Len() {
		if rng.IntN(3) == 0 {
			g.SetFlat(i, special[rng.IntN(len(special))])
		} else {
			g.SetFlat(i, rng.Float64()*2.8-1.4)
		}
	}
	return g
}

func TestGridSample(t *testing.T) {
	type shape struct{ x, outs []int }
	shapes := []shape{
		{[]int{2, 1, 5}, []int{7}},
		{[]int{1, 2, 3, 4}, []int{5, 6}},
		{[]int{1, 1, 1, 3}, []int{2, 4}}, // an axis of extent 1
		{[]int{2, 1, 2, 3, 4}, []int{3, 2, 3}},
	}
	for _, mode := range []string{"nearest", "linear", "cubic"} {
		for _, padding := range []string{"zeros", "border", "reflection"} {
			for _, align := range []bool{false, true} {
				for si, s := range shapes {
					t.Run(fmt.Sprintf("%s/%s/align_corners=%v/x%v", mode, padding, align, s.x), func(t *testing.T) {
						x := randn(uint64(90+si), s.x...)
						grid := gridPoints(uint64(si), s.x[0], s.outs)
						assertClose(t, "grid sample", gridSample(t, x, grid, mode, padding, align), refGridSample(x, grid, mode, padding, align), 1e-5)
					})
				}
			}
		}
	}
}

func init() {
	s := func(dims ...int) []int { return dims }
	register(opCase{op: "grid_taps", name: "by hand: linear, zeros, corners and centre of 4",
		attrs:  map[string]ir.AttrValue{"size": aInt(4), "mode": aStr("linear")},
		inputs: []*tensor.Tensor{floats(s(1, 3, 1), -1, 0, 1)},
		want: func([]*tensor.Tensor) []*tensor.Tensor {
			// ((g + 1) * 4 - 1) / 2: -0.5, 1.5, 3.5.
			return []*tensor.Tensor{ints(s(1, 3, 2), -1, 0, 1, 2, 3, 4), floats(s(1, 3, 2), 0.5, 0.5, 0.5, 0.5, 0.5, 0.5)}
		}},
		opCase{op: "grid_taps", name: "by hand: cubic, reflection, align_corners, past both ends of 3",
			attrs:  map[string]ir.AttrValue{"size": aInt(3), "mode": aStr("cubic"), "padding_mode": aStr("reflection"), "align_corners": aBool(true)},
			inputs: []*tensor.Tensor{floats(s(1, 2, 1), -1.5, 2)},
			want: func([]*tensor.Tensor) []*tensor.Tensor {
				// (g + 1) * 1: -0.5 reflects to 0.5 (taps -1..2 read 1, 0, 1, 2); 3 to 1 (taps 0..3 read 0, 1, 2, 1).
				k := func(d float64) float64 { return keys(-0.75)(math.Abs(d)) }
				return []*tensor.Tensor{ints(s(1, 2, 4), 1, 0, 1, 2, 0, 1, 2, 1), floats(s(1, 2, 4), k(1.5), k(0.5), k(0.5), k(1.5), k(1), k(0), k(1), k(2))}
			}},
		opCase{op: "grid_gather1d", name: "by hand: two taps, one outside reads 0",
			inputs: []*tensor.Tensor{floats(s(1, 1, 3), 1, 2, 4), ints(s(1, 2, 2), -1, 0, 1, 2), floats(s(1, 2, 2), 0.5, 0.5, 0.25, 0.75)},
			want:   spConst(floats(s(1, 1, 2), 0.5, 3.5))},
		opCase{op: "grid_gather2d", name: "by hand: bilinear weights",
			inputs: []*tensor.Tensor{floats(s(1, 1, 2, 2), 1, 2, 3, 4), ints(s(1, 1, 2), 0, 1), floats(s(1, 1, 2), 0.5, 0.5), ints(s(1, 1, 2), 0, 5), floats(s(1, 1, 2), 1, 1)},
			want:   spConst(floats(s(1, 1, 1), 2))},
		opCase{op: "grid_gather3d", name: "by hand: one tap per axis",
			inputs: []*tensor.Tensor{spSeq(1, 1, 2, 2, 2), ints(s(1, 1, 1), 1), floats(s(1, 1, 1), 1), ints(s(1, 1, 1), 0), floats(s(1, 1, 1), 1), ints(s(1, 1, 1), 1), floats(s(1, 1, 1), 2)},
			want:   spConst(floats(s(1, 1, 1), 12))}, // x[0, 0, 1, 0, 1] = 6, weight 2
	)
}

// refAffineGrid is ONNX AffineGrid of theta [N, r, r + 1] over the
// spatial extents dims: theta times the base point (x, y, (z,) 1), its
// coordinates in the reverse order of dims.
func refAffineGrid(theta *tensor.Tensor, dims []int, align bool) *tensor.Tensor {
	r := len(dims)
	n := theta.Shape[0]
	y := tensor.New(theta.DType, append(append([]int{n}, dims...), r))
	base := func(i, s int) float64 {
		if align {
			if s == 1 {
				return -1
			}
			return -1 + 2*float64(i)/float64(s-1)
		}
		return (2*float64(i)+1)/float64(s) - 1
	}
	tensor.ForEachIndex(y.Shape, func(_ int, idx []int) {
		b, at, k := idx[0], idx[1:1+r], idx[1+r]
		v := theta.At(b, k, r)
		for j := range r {
			// Component j of the base point runs along spatial axis r - 1 - j.
			v += theta.At(b, k, j) * base(at[r-1-j], dims[r-1-j])
		}
		y.Set(v, idx...)
	})
	return y
}

func init() {
	theta2, theta3 := randn(41, 2, 2, 3), randn(42, 2, 3, 4)
	for _, align := range []bool{false, true} {
		for _, hw := range [][]int{{3, 4}, {1, 5}} {
			register(opCase{op: "affine_grid2d", name: fmt.Sprintf("direct, %v, align_corners %v", hw, align),
				attrs:  map[string]ir.AttrValue{"H": aInt(int64(hw[0])), "W": aInt(int64(hw[1])), "align_corners": aBool(align)},
				inputs: []*tensor.Tensor{theta2}, tol: 1e-6,
				want: func(in []*tensor.Tensor) []*tensor.Tensor {
					return []*tensor.Tensor{refAffineGrid(in[0], hw, align)}
				}})
		}
		for _, dhw := range [][]int{{2, 3, 4}, {3, 1, 2}} {
			register(opCase{op: "affine_grid3d", name: fmt.Sprintf("direct, %v, align_corners %v", dhw, align),
				attrs:  map[string]ir.AttrValue{"D": aInt(int64(dhw[0])), "H": aInt(int64(dhw[1])), "W": aInt(int64(dhw[2])), "align_corners": aBool(align)},
				inputs: []*tensor.Tensor{theta3}, tol: 1e-6,
				want: func(in []*tensor.Tensor) []*tensor.Tensor {
					return []*tensor.Tensor{refAffineGrid(in[0], dhw, align)}
				}})
		}
	}
}
