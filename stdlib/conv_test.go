package stdlib_test

import (
	"fmt"
	"math"
	"testing"

	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/runtime/tensor"
)

// refConv is a direct N-d convolution (cross-correlation) of x [N, C, *S]
// with w [O, C / group, *K], ONNX attributes, rounded to f32; it sums over
// (c, *k) in row-major order like the operators.
func refConv(x, w *tensor.Tensor, strides, pads, dil []int, group int) *tensor.Tensor {
	y := refConvF64(x, w, strides, pads, dil, group)
	return spF32(y.Shape, func(i []int) float64 { return y.At(i...) })
}

// refConvF64 is refConv unrounded (f64).
func refConvF64(x, w *tensor.Tensor, strides, pads, dil []int, group int) *tensor.Tensor {
	d := x.Rank() - 2
	n, c, o := x.Shape[0], x.Shape[1], w.Shape[0]
	cg, og := c/group, o/group
	out := []int{n, o}
	for a := range d {
		in, k := x.Shape[2+a], w.Shape[2+a]
		out = append(out, (in+pads[a]+pads[d+a]-dil[a]*(k-1)-1)/strides[a]+1)
	}
	kshape := w.Shape[2:]
	return spBuild(lang.F64, out, func(oi []int) float64 {
		b, oc := oi[0], oi[1]
		g := oc / og
		s := 0.0
		for ci := range cg {
			spEach(kshape, func(k []int) {
				xi := []int{b, g*cg + ci}
				for a := range d {
					p := oi[2+a]*strides[a] + k[a]*dil[a] - pads[a]
					if p < 0 || p >= x.Shape[2+a] {
						return
					}
					xi = append(xi, p)
				}
				s += x.At(xi...) * w.At(spIdx(oc, ci, k)...)
			})
		}
		return s
	})
}

// refConvTranspose2d scatters every input element through the kernel:
// out[n, g*OG + og, h*s - pad + kh*d, ...] += x[n, c, h, w] * w[c, og, kh, kw].
func refConvTranspose2d(x, w *tensor.Tensor, strides, pads, dil, outPad []int, group int) *tensor.Tensor {
	n, c, h, wd := x.Shape[0], x.Shape[1], x.Shape[2], x.Shape[3]
	og, kh, kw := w.Shape[1], w.Shape[2], w.Shape[3]
	oh := (h-1)*strides[0] - pads[0] - pads[2] + dil[0]*(kh-1) + 1 + outPad[0]
	ow := (wd-1)*strides[1] - pads[1] - pads[3] + dil[1]*(kw-1) + 1 + outPad[1]
	acc := tensor.New(lang.F64, []int{n, og * group, oh, ow})
	cg := c / group
	spEach(x.Shape, func(xi []int) {
		g := xi[1] / cg
		for o := range og {
			for a := range kh {
				for b := range kw {
					y := xi[2]*strides[0] - pads[0] + a*dil[0]
					z := xi[3]*strides[1] - pads[1] + b*dil[1]
					if y < 0 || y >= oh || z < 0 || z >= ow {
						continue
					}
					off := acc.Offset(xi[0], g*og+o, y, z)
					acc.F[off] += x.At(xi...) * w.At(xi[1], o, a, b)
				}
			}
		}
	})
	return spF32(acc.Shape, func(i []int) float64 { return acc.At(i...) })
}

func init() {
	ints64 := func(v ...int) []int64 {
		out := make([]int64, len(v))
		for i, x := range v {
			out[i] = int64(x)
		}
		return out
	}
	// conv builds a case of op against refConv.
	conv := func(op, name string, x, w *tensor.Tensor, strides, pads, dil []int, group int) opCase {
		return opCase{op: op, name: name,
			attrs:  spA("strides", ir.IntList(ints64(strides...)...), "pads", ir.IntList(ints64(pads...)...), "dilations", ir.IntList(ints64(dil...)...), "group", aInt(int64(group))),
			inputs: []*tensor.Tensor{x, w},
			want: spOne(func(in []*tensor.Tensor) *tensor.Tensor {
				return refConv(in[0], in[1], strides, pads, dil, group)
			})}
	}
	oneHot := func(kh, kw, i, j int) *tensor.Tensor {
		return spF32([]int{1, 1, kh, kw}, func(o []int) float64 {
			if o[2] == i && o[3] == j {
				return 1
			}
			return 0
		})
	}
	xs := randn(100, 1, 1, 5, 6)

	register(
		opCase{op: "conv2d", name: "one-hot filter shifts the input", inputs: []*tensor.Tensor{xs, oneHot(3, 3, 0, 2)},
			want: spOne(func(in []*tensor.Tensor) *tensor.Tensor {
				return spF32([]int{1, 1, 3, 4}, func(o []int) float64 { return in[0].At(0, 0, o[2], o[3]+2) })
			})},
		opCase{op: "conv2d", name: "one-hot filter with padding shifts in zeros", attrs: spA("pads", ir.IntList(1, 1, 1, 1)),
			inputs: []*tensor.Tensor{xs, oneHot(3, 3, 2, 0)},
			want: spOne(func(in []*tensor.Tensor) *tensor.Tensor {
				return spF32([]int{1, 1, 5, 6}, func(o []int) float64 {
					i, j := o[2]+1, o[3]-1
					if i >= 5 || j < 0 {
						return 0
					}
					return in[0].At(0, 0, i, j)
				})
			})},
		opCase{op: "conv2d", name: "hand 3x3 ones kernel", inputs: []*tensor.Tensor{spSeq(1, 1, 3, 3), floats([]int{1, 1, 2, 2}, 1, 1, 1, 1)},
			want: spConst(floats([]int{1, 1, 2, 2}, 12, 16, 24, 28))},
		conv("conv1d", "defaults", randn(101, 2, 3, 7), randn(102, 4, 3, 3), []int{1}, []int{0, 0}, []int{1}, 1),
		conv("conv1d", "stride, asymmetric pads, dilation, groups", randn(103, 2, 4, 9), randn(104, 6, 2, 3), []int{2}, []int{2, 1}, []int{2}, 2),
		conv("conv1d", "depthwise", randn(105, 1, 3, 8), randn(106, 3, 1, 3), []int{1}, []int{1, 1}, []int{1}, 3),
		conv("conv2d", "defaults", randn(107, 1, 2, 4, 5), randn(108, 3, 2, 2, 2), []int{1, 1}, []int{0, 0, 0, 0}, []int{1, 1}, 1),
		conv("conv2d", "stride, asymmetric pads, dilation, groups", randn(109, 2, 4, 7, 6), randn(110, 4, 2, 3, 2), []int{2, 1}, []int{1, 0, 2, 1}, []int{1, 2}, 2),
		conv("conv2d", "depthwise (group = C = O)", randn(111, 1, 3, 5, 5), randn(112, 3, 1, 3, 3), []int{1, 1}, []int{1, 1, 1, 1}, []int{1, 1}, 3),
		conv("conv2d", "depthwise multiplier 2, stride 2", randn(113, 1, 3, 6, 5), randn(114, 6, 1, 3, 3), []int{2, 2}, []int{1, 1, 0, 0}, []int{1, 1}, 3),
		conv("conv2d", "pads larger than the kernel reach", randn(115, 1, 2, 3, 3), randn(116, 2, 2, 2, 2), []int{3, 2}, []int{2, 0, 3, 1}, []int{2, 1}, 1),
		conv("conv3d", "defaults", randn(117, 1, 2, 3, 4, 3), randn(118, 2, 2, 2, 2, 2), []int{1, 1, 1}, []int{0, 0, 0, 0, 0, 0}, []int{1, 1, 1}, 1),
		conv("conv3d", "stride, asymmetric pads, dilation, groups", randn(119, 1, 2, 4, 5, 4), randn(120, 4, 1, 2, 3, 2), []int{1, 2, 1}, []int{1, 0, 1, 0, 1, 1}, []int{2, 1, 1}, 2),
		opCase{op: "conv2d_bias", name: "strided, padded, grouped, plus bias",
			attrs:  spA("strides", ir.IntList(2, 2), "pads", ir.IntList(1, 0, 0, 1), "group", aInt(2)),
			inputs: []*tensor.Tensor{randn(121, 2, 4, 5, 5), randn(122, 2, 2, 3, 3), randn(123, 2)},
			want: spOne(func(in []*tensor.Tensor) *tensor.Tensor {
				// The bias is added before the rounding to f32, as in the operator.
				c := refConvF64(in[0], in[1], []int{2, 2}, []int{1, 0, 0, 1}, []int{1, 1}, 2)
				return spF32(c.Shape, func(i []int) float64 { return c.At(i...) + in[2].At(i[1]) })
			})},
		opCase{op: "bias_add", name: "NCHW channel axis", inputs: []*tensor.Tensor{randn(124, 2, 3, 2, 2), floats([]int{3}, 10, 20, 30)},
			want: spOne(func(in []*tensor.Tensor) *tensor.Tensor {
				return spF32(in[0].Shape, func(i []int) float64 { return in[0].At(i...) + float64(10*(i[1]+1)) })
			})},
		opCase{op: "bias_add", name: "axis -1", attrs: spA("axis", aInt(-1)), inputs: []*tensor.Tensor{spSeq(2, 3), floats([]int{3}, 10, 20, 30)},
			want: spConst(floats([]int{2, 3}, 11, 22, 33, 14, 25, 36))},
	)

	ct := func(name string, x, w *tensor.Tensor, strides, pads, dil, outPad []int, group int) opCase {
		return opCase{op: "conv_transpose2d", name: name,
			attrs: spA("strides", ir.IntList(ints64(strides...)...), "pads", ir.IntList(ints64(pads...)...), "dilations", ir.IntList(ints64(dil...)...),
				"output_padding", ir.IntList(ints64(outPad...)...), "group", aInt(int64(group))),
			inputs: []*tensor.Tensor{x, w},
			want: spOne(func(in []*tensor.Tensor) *tensor.Tensor {
				return refConvTranspose2d(in[0], in[1], strides, pads, dil, outPad, group)
			}),
			tol: 1e-5} // the scatter adds in another order
	}
	register(
		ct("defaults", randn(130, 1, 2, 3, 3), randn(131, 2, 3, 2, 2), []int{1, 1}, []int{0, 0, 0, 0}, []int{1, 1}, []int{0, 0}, 1),
		ct("stride 2, pads, output_padding", randn(132, 2, 2, 3, 4), randn(133, 2, 3, 3, 3), []int{2, 2}, []int{1, 0, 0, 1}, []int{1, 1}, []int{1, 1}, 1),
		ct("stride (2, 3), dilation 2, groups", randn(134, 1, 4, 3, 3), randn(135, 4, 2, 2, 3), []int{2, 3}, []int{1, 2, 1, 0}, []int{2, 1}, []int{1, 2}, 2),
		opCase{op: "conv_transpose2d", name: "hand stride 2", attrs: spA("strides", ir.IntList(2, 2)),
			inputs: []*tensor.Tensor{floats([]int{1, 1, 2, 2}, 1, 2, 3, 4), floats([]int{1, 1, 2, 2}, 1, 10, 100, 1000)},
			want: spConst(floats([]int{1, 1, 4, 4},
				1, 10, 2, 20,
				100, 1000, 200, 2000,
				3, 30, 4, 40,
				300, 3000, 400, 4000))},
	)
}

// refCol2Im is ONNX Col2Im of x [N, C · prod(block), L] into an image
// of extents image: every column entry added at its image position.
func refCol2Im(x *tensor.Tensor, image, block, strides, dilations, pads []int) *tensor.Tensor {
	r := len(image)
	kernel := 1
	for _, k := range block {
		kernel *= k
	}
	blocks := make([]int, r)
	for a := range r {
		blocks[a] = (image[a]+pads[a]+pads[a+r]-dilations[a]*(block[a]-1)-1)/strides[a] + 1
	}
	n, ch := x.Shape[0], x.Shape[1]/kernel
	y := tensor.New(x.DType, append([]int{n, ch}, image...))
	tensor.ForEachIndex(x.Shape, func(_ int, idx []int) {
		b, col, l := idx[0], idx[1], idx[2]
		k := unravelInts(col%kernel, block)
		o := unravelInts(l, blocks)
		at := []int{b, col / kernel}
		for a := range r {
			p := o[a]*strides[a] + k[a]*dilations[a] - pads[a]
			if p < 0 || p >= image[a] {
				return
			}
			at = append(at, p)
		}
		y.Set(y.At(at...)+x.At(idx...), at...)
	})
	return y
}

func unravelInts(i int, dims []int) []int {
	out := make([]int, len(dims))
	for a := len(dims) - 1; a >= 0; a-- {
		out[a] = i % dims[a]
		i /= dims[a]
	}
	return out
}

// TestCol2Im composes reshape, transpose and col2im_axis as the ONNX
// converter does and compares with refCol2Im: 1-, 2- and 3-D, with
// strides, dilations, pads, overlapping and gapped blocks.
func TestCol2Im(t *testing.T) {
	cases := []struct{ image, block, strides, dilations, pads []int }{
		{[]int{7}, []int{3}, []int{2}, []int{1}, []int{1, 0}},
		{[]int{5, 5}, []int{2, 3}, []int{1, 1}, []int{1, 1}, []int{0, 0, 0, 0}},
		{[]int{6, 5}, []int{2, 2}, []int{2, 3}, []int{2, 1}, []int{1, 0, 1, 2}},
		{[]int{3, 4, 5}, []int{2, 1, 3}, []int{1, 2, 1}, []int{1, 1, 2}, []int{0, 1, 1, 1, 0, 2}},
	}
	for i, c := range cases {
		t.Run(fmt.Sprint(c.image, c.block, c.strides, c.dilations, c.pads), func(t *testing.T) {
			r := len(c.image)
			kernel, total := 1, 1
			var blocks []int64
			for a := range r {
				kernel *= c.block[a]
				nb := (c.image[a]+c.pads[a]+c.pads[a+r]-c.dilations[a]*(c.block[a]-1)-1)/c.strides[a] + 1
				blocks = append(blocks, int64(nb))
				total *= nb
			}
			x := randn(uint64(60+i), 2, 3*kernel, total)
			shape := []int64{0, 3}
			for _, k := range c.block {
				shape = append(shape, int64(k))
			}
			y := eval(t, "reshape", map[string]ir.AttrValue{"shape": ir.IntList(append(shape, blocks...)...)}, x)[0]
			perm := []int64{0, 1}
			for a := range r {
				perm = append(perm, int64(2+a), int64(2+r+a))
			}
			y = eval(t, "transpose", map[string]ir.AttrValue{"perm": ir.IntList(perm...)}, y)[0]
			for a := range r {
				y = eval(t, "col2im_axis", map[string]ir.AttrValue{"axis": aInt(int64(2 + a)), "size": aInt(int64(c.image[a])),
					"stride": aInt(int64(c.strides[a])), "dilation": aInt(int64(c.dilations[a])), "pad": aInt(int64(c.pads[a]))}, y)[0]
			}
			assertClose(t, "col2im", y, refCol2Im(x, c.image, c.block, c.strides, c.dilations, c.pads), 1e-5)
		})
	}
}

func init() {
	s := func(dims ...int) []int { return dims }
	register(opCase{op: "col2im_axis", name: "by hand: kernel 2, stride 2, pad 1 over 4",
		attrs:  map[string]ir.AttrValue{"size": aInt(4), "stride": aInt(2), "pad": aInt(1)},
		inputs: []*tensor.Tensor{floats(s(2, 3), 1, 2, 3, 10, 20, 30)},
		// p + 1 = 2l + k: p 0 is (k 1, l 0), p 1 (k 0, l 1), p 2 (k 1, l 1), p 3 (k 0, l 2).
		want: spConst(floats(s(4), 10, 2, 20, 3))})
}

// refDeformConv2d is ONNX DeformConv in 2-D without bias as its
// reference computes it: each tap bilinearly sampled (0 outside x) at
// its regular position plus its offset, times its mask and weight.
func refDeformConv2d(x, w, offset, mask *tensor.Tensor, strides, pads, dil []int, group, og int) *tensor.Tensor {
	n, ch, h, wd := x.Shape[0], x.Shape[1], x.Shape[2], x.Shape[3]
	o, cg, kh, kw := w.Shape[0], w.Shape[1], w.Shape[2], w.Shape[3]
	oh, ow := offset.Shape[2], offset.Shape[3]
	y := tensor.New(x.DType, []int{n, o, oh, ow})
	at := func(b, c, i, j int) float64 {
		if i < 0 || i >= h || j < 0 || j >= wd {
			return 0
		}
		return x.At(b, c, i, j)
	}
	for b := range n {
		for oc := range o {
			for p := range oh {
				for q := range ow {
					sum := 0.0
					for cc := range cg {
						cin := oc/(o/group)*cg + cc
						g := cin / (ch / og)
						for i := range kh {
							for j := range kw {
								k := (g*kh+i)*kw + j
								sh := float64(p*strides[0]-pads[0]+i*dil[0]) + offset.At(b, 2*k, p, q)
								sw := float64(q*strides[1]-pads[1]+j*dil[1]) + offset.At(b, 2*k+1, p, q)
								fh, fw := math.Floor(sh), math.Floor(sw)
								lh, lw := sh-fh, sw-fw
								hi, wi := int(fh), int(fw)
								v := (1-lh)*(1-lw)*at(b, cin, hi, wi) + (1-lh)*lw*at(b, cin, hi, wi+1) +
									lh*(1-lw)*at(b, cin, hi+1, wi) + lh*lw*at(b, cin, hi+1, wi+1)
								sum += w.At(oc, cc, i, j) * mask.At(b, k, p, q) * v
							}
						}
					}
					y.Set(sum, b, oc, p, q)
				}
			}
		}
	}
	return y
}

func init() {
	x := randn(91, 2, 4, 5, 6)
	w := randn(92, 6, 2, 2, 3)                                                            // group 2: 6 outputs of 2 input channels each
	offset := mapF(randn(93, 2, 2*2*6, 3, 2), func(v float64) float64 { return 1.5 * v }) // offset_group 2, outputs 3 x 2
	mask := mapF(randn(94, 2, 2*6, 3, 2), math.Abs)
	strides, pads, dil := []int{2, 3}, []int{1, 0, 1, 2}, []int{1, 2}
	register(opCase{op: "deform_conv2d", name: "direct, group 2, offset_group 2, strides, pads, dilations, mask",
		attrs: map[string]ir.AttrValue{"strides": ir.IntList(2, 3), "pads": ir.IntList(1, 0, 1, 2), "dilations": ir.IntList(1, 2),
			"group": aInt(2), "offset_group": aInt(2)},
		inputs: []*tensor.Tensor{x, w, offset, mask}, tol: 1e-5,
		want: func(in []*tensor.Tensor) []*tensor.Tensor {
			return []*tensor.Tensor{refDeformConv2d(in[0], in[1], in[2], in[3], strides, pads, dil, 2, 2)}
		}})
}
