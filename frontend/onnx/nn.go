package onnx

import (
	"strings"

	"tofuc/frontend/onnx/onnxpb"
	"tofuc/lang"
	"tofuc/runtime/tensor"
)

// Converters of the convolution, pooling, matrix and normalisation
// operators.

// window holds the spatial attributes of a convolution or pooling node.
type window struct {
	kernel, strides, pads, dilations []int64
}

// window reads kernel_shape, strides, pads, dilations and auto_pad for
// the spatial axes of x (all but the first two), with kernel the
// kernel's spatial extents.
func (c *nodeCtx) window(x *value, kernel []int64) window {
	n := rank(x) - 2
	if n < 1 {
		c.fail("the input has rank %d; it needs a batch, a channel and spatial axes", rank(x))
	}
	w := window{
		kernel:    kernel,
		strides:   c.intsAttr("strides", ones(n)),
		dilations: c.intsAttr("dilations", ones(n)),
		pads:      c.intsAttr("pads", make([]int64, 2*n)),
	}
	if len(w.strides) != n || len(w.dilations) != n || len(w.pads) != 2*n || len(kernel) != n {
		c.fail("strides, dilations, pads or kernel_shape do not match %d spatial axes", n)
	}
	switch pad := c.stringAttr("auto_pad", "NOTSET"); pad {
	case "NOTSET":
	case "VALID":
		w.pads = make([]int64, 2*n)
	case "SAME_UPPER", "SAME_LOWER":
		dims := c.dims(x)[2:]
		for i := range n {
			out := (dims[i] + w.strides[i] - 1) / w.strides[i]
			total := max((out-1)*w.strides[i]+(kernel[i]-1)*w.dilations[i]+1-dims[i], 0)
			small, large := total/2, total-total/2
			if pad == "SAME_UPPER" {
				w.pads[i], w.pads[n+i] = small, large
			} else {
				w.pads[i], w.pads[n+i] = large, small
			}
		}
	default:
		c.fail("auto_pad = %q", pad)
	}
	return w
}

func ones(n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = 1
	}
	return out
}

func (w window) attrs() []attr {
	return []attr{intsA("strides", w.strides), intsA("pads", w.pads), intsA("dilations", w.dilations)}
}

// convConv maps Conv of 1 to 3 spatial axes; a 2-D convolution with a
// bias is conv2d_bias, the others add the bias with bias_add.
func convConv(c *nodeCtx) {
	x, w, b := c.must(0), c.must(1), c.in(2)
	if b != nil && rank(x) == 4 {
		c.out(0, c.call1("conv2d_bias", c.convAttrs(x, w), x, w, b))
		return
	}
	y := c.conv(x, w)
	if b != nil {
		y = c.call1("bias_add", []attr{intA("axis", 1)}, y, b)
	}
	c.out(0, y)
}

// conv is the node's convolution of x by w, without a bias.
func (c *nodeCtx) conv(x, w *value) *value {
	ops := map[int]string{3: "conv1d", 4: "conv2d", 5: "conv3d"}
	op, ok := ops[rank(x)]
	if !ok {
		c.fail("%d-D convolution is not supported", rank(x)-2)
	}
	return c.call1(op, c.convAttrs(x, w), x, w)
}

// convAttrs are the stdlib convolution's attributes from the node's.
func (c *nodeCtx) convAttrs(x, w *value) []attr {
	return append(c.window(x, c.kernel(w)).attrs(), intA("group", c.intAttr("group", 1)))
}

// kernel is kernel_shape, or the spatial extents of the weight w.
func (c *nodeCtx) kernel(w *value) []int64 {
	if k := c.intsAttr("kernel_shape", nil); k != nil {
		return k
	}
	if rank(w) < 3 {
		c.fail("the weight has rank %d; it needs output and input channels and spatial axes", rank(w))
	}
	return c.dims(w)[2:]
}

// convConvTranspose maps 2-D ConvTranspose. output_shape, or auto_pad
// SAME_UPPER/SAME_LOWER (output = input * stride), sets the padding: the
// total is split with the larger half at the end for SAME_UPPER and at
// the start otherwise, as the ONNX specification says.
func convConvTranspose(c *nodeCtx) {
	x, w, b := c.must(0), c.must(1), c.in(2)
	if rank(x) != 4 {
		c.fail("%d-D transposed convolution is not supported (only 2-D)", rank(x)-2)
	}
	kernel := c.kernel(w)
	strides, dilations := c.intsAttr("strides", ones(2)), c.intsAttr("dilations", ones(2))
	outPad := c.intsAttr("output_padding", make([]int64, 2))
	pads := c.intsAttr("pads", make([]int64, 4))
	shape := c.intsAttr("output_shape", nil)
	if len(kernel) != 2 || len(strides) != 2 || len(dilations) != 2 || len(outPad) != 2 || len(pads) != 4 || shape != nil && len(shape) < 2 {
		c.fail("kernel_shape, strides, dilations, output_padding, pads or output_shape do not match 2 spatial axes")
	}
	autoPad := c.stringAttr("auto_pad", "NOTSET")
	switch {
	case autoPad == "VALID":
		pads = make([]int64, 4)
	case shape != nil || autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER":
		dims := c.dims(x)[2:]
		if shape == nil {
			shape = []int64{dims[0] * strides[0], dims[1] * strides[1]}
		}
		shape = shape[len(shape)-2:]
		pads = make([]int64, 4)
		for i := range 2 {
			total := strides[i]*(dims[i]-1) + outPad[i] + (kernel[i]-1)*dilations[i] + 1 - shape[i]
			if total < 0 {
				c.fail("output_shape %v is larger than the transposed convolution's output", shape)
			}
			small, large := total/2, total-total/2
			if autoPad == "SAME_UPPER" {
				pads[i], pads[2+i] = small, large
			} else {
				pads[i], pads[2+i] = large, small
			}
		}
	}
	attrs := []attr{intsA("strides", strides), intsA("pads", pads), intsA("dilations", dilations),
		intsA("output_padding", outPad), intA("group", c.intAttr("group", 1))}
	y := c.call1("conv_transpose2d", attrs, x, w)
	if b != nil {
		y = c.call1("bias_add", []attr{intA("axis", 1)}, y, b)
	}
	c.out(0, y)
}

// poolAttrs are the attributes of a 2-D pooling call.
func poolAttrs(w window, ceil int64, extra []attr) []attr {
	attrs := append([]attr{intsA("kernel_shape", w.kernel)}, w.attrs()...)
	return append(append(attrs, intA("ceil_mode", ceil)), extra...)
}

// pool applies the 2-D pooling operator op2d to x of 1 to 3 spatial axes:
// a 1-D pool is a 2-D one over a unit axis; a 3-D one is separable (a box
// window's maximum, sum and count factor over its axes), a 2-D pool over
// (H, W) and then one over D.
func (c *nodeCtx) pool(op2d string, x *value, extra []attr) *value {
	w := c.window(x, c.intsAttr("kernel_shape", nil))
	ceil := c.intAttr("ceil_mode", 0)
	switch rank(x) {
	case 4:
		return c.call1(op2d, poolAttrs(w, ceil, extra), x)
	case 3:
		unit := window{kernel: []int64{1, w.kernel[0]}, strides: []int64{1, w.strides[0]},
			pads: []int64{0, w.pads[0], 0, w.pads[1]}, dilations: []int64{1, w.dilations[0]}}
		y := c.call1(op2d, poolAttrs(unit, ceil, extra), c.call1("unsqueeze", []attr{intsA("axes", []int64{2})}, x))
		return c.call1("squeeze", []attr{intsA("axes", []int64{2})}, y)
	case 5:
		d := c.dims(x)
		hw := window{kernel: w.kernel[1:], strides: w.strides[1:], pads: []int64{w.pads[1], w.pads[2], w.pads[4], w.pads[5]}, dilations: w.dilations[1:]}
		y := c.call1("reshape", []attr{intsA("shape", []int64{d[0], d[1] * d[2], d[3], d[4]})}, x)
		y = c.call1(op2d, poolAttrs(hw, ceil, extra), y)
		h, wd := c.dims(y)[2], c.dims(y)[3]
		y = c.call1("reshape", []attr{intsA("shape", []int64{d[0], d[1], d[2], h * wd})}, y)
		depth := window{kernel: []int64{w.kernel[0], 1}, strides: []int64{w.strides[0], 1}, pads: []int64{w.pads[0], 0, w.pads[3], 0}, dilations: []int64{w.dilations[0], 1}}
		y = c.call1(op2d, poolAttrs(depth, ceil, extra), y)
		return c.call1("reshape", []attr{intsA("shape", []int64{d[0], d[1], c.dims(y)[2], h, wd})}, y)
	}
	c.fail("%d-D pooling is not supported", rank(x)-2)
	return nil
}

func convMaxPool(c *nodeCtx) {
	x := c.must(0)
	if !c.wants(1) {
		c.out(0, c.pool("max_pool2d", x, nil))
		return
	}
	if c.intAttr("storage_order", 0) != 0 || rank(x) != 4 {
		c.fail("indices are supported for 2-D pooling with storage_order = 0 only")
	}
	w := c.window(x, c.intsAttr("kernel_shape", nil))
	outs := c.call("max_pool2d_with_indices", poolAttrs(w, c.intAttr("ceil_mode", 0), nil), x)
	c.out(0, outs[0])
	c.out(1, outs[1])
}

func convAveragePool(c *nodeCtx) {
	c.out(0, c.pool("avg_pool2d", c.must(0), []attr{intA("count_include_pad", c.intAttr("count_include_pad", 0))}))
}

// convLpPool maps LpPool: the p-th root of each window's sum
// (sum_pool2d, through pool's 1-D and 3-D forms) of |x|^p.
func convLpPool(c *nodeCtx) {
	x := c.must(0)
	p := c.intAttr("p", 2)
	if p <= 0 {
		c.fail("p = %d is not positive", p)
	}
	power := func(v *value, e float64) *value {
		k := constValue("", tensor.FromFloats(v.typ.DType, nil, []float64{e}), false)
		return c.call1("pow", nil, v, k)
	}
	sums := c.pool("sum_pool2d", power(c.call1("abs", nil, x), float64(p)), nil)
	c.out(0, power(sums, 1/float64(p)))
}

func convGemm(c *nodeCtx) {
	attrs := []attr{floatA("alpha", c.floatAttr("alpha", 1)), intA("transA", c.intAttr("transA", 0)), intA("transB", c.intAttr("transB", 0))}
	if cc := c.in(2); cc != nil {
		attrs = append(attrs, floatA("beta", c.floatAttr("beta", 1)))
		c.out(0, c.call1("gemm", attrs, c.must(0), c.must(1), cc))
		return
	}
	c.out(0, c.call1("gemm_noc", attrs, c.must(0), c.must(1)))
}

// convMatMul maps MatMul with NumPy's rules: a 1-D operand gets a unit
// axis that is removed from the result.
func convMatMul(c *nodeCtx) { c.out(0, c.matmul(c.must(0), c.must(1))) }

// matmul is ONNX's MatMul of a and b: `matmul` for 2-D, `linear_nobias`
// for a batch of a times a 2-D b (a layer's weights: b is then read at
// its own indices only, so that the batch is the product's rows, not
// a batch of products of one row each: a ViT's projections were 197
// products of a row, 19 ms a launch), `matmul_broadcast` for other
// batches, 1-D operands given a unit axis that is squeezed away.
func (c *nodeCtx) matmul(a, b *value) *value {
	var drop []int64
	if rank(a) == 1 {
		a = c.call1("unsqueeze", []attr{intsA("axes", []int64{0})}, a)
		drop = append(drop, -2)
	}
	if rank(b) == 1 {
		b = c.call1("unsqueeze", []attr{intsA("axes", []int64{1})}, b)
		drop = append(drop, -1)
	}
	var y *value
	switch {
	case rank(a) == 2 && rank(b) == 2:
		y = c.call1("matmul", nil, a, b)
	case rank(b) == 2:
		y = c.call1("linear_nobias", nil, a, b)
	default:
		y = c.call1("matmul_broadcast", nil, a, b)
	}
	if len(drop) > 0 {
		y = c.call1("squeeze", []attr{intsA("axes", c.axes(drop, rank(y)))}, y)
	}
	return y
}

// convEinsum maps one- and two-operand einsums onto the stdlib einsum
// "Z I K, Z K J -> Z I J": ellipses become letters, repeated letters in
// one operand take diagonals, letters in one operand only are summed out;
// then letters in both operands and the output are batch (Z), in both but
// not the output contracted (K), in one and the output free (I, J).
func convEinsum(c *nodeCtx) {
	eq := strings.ReplaceAll(c.stringAttr("equation", ""), " ", "")
	lhs, out, explicit := strings.Cut(eq, "->")
	terms := strings.Split(lhs, ",")
	if len(terms) > 2 || len(terms) != c.numIn() {
		c.fail("equation %q (only one or two operands)", eq)
	}
	ops := make([]*value, len(terms))
	for i := range terms {
		ops[i] = c.must(i)
	}
	ell := c.expandEllipses(eq, terms, ops)
	if !explicit {
		out = ell + implicitOutput(terms, ell)
	}
	out = strings.ReplaceAll(out, "...", ell)
	for i, t := range terms {
		if len(t) != rank(ops[i]) {
			c.fail("operand %d has rank %d, the equation gives it %d letters", i, rank(ops[i]), len(t))
		}
		ops[i], terms[i] = c.diagonals(ops[i], t)
	}
	for i, t := range terms {
		x := ops[i]
		other := out
		if len(terms) == 2 {
			other += terms[1-i]
		}
		ops[i], terms[i] = c.sumOnly(x, t, other)
	}
	if len(terms) == 1 {
		c.out(0, c.permuteTo(ops[0], terms[0], out))
		return
	}
	ta, tb := terms[0], terms[1]
	var z, i, k, j string
	for _, l := range ta {
		switch {
		case strings.ContainsRune(tb, l) && strings.ContainsRune(out, l):
			z += string(l)
		case strings.ContainsRune(tb, l):
			k += string(l)
		default:
			i += string(l)
		}
	}
	for _, l := range tb {
		if !strings.ContainsRune(ta, l) {
			j += string(l)
		}
	}
	a := c.permuteTo(ops[0], ta, z+i+k)
	b := c.permuteTo(ops[1], tb, z+k+j)
	y := c.call1("einsum", []attr{intA("batch", int64(len(z))), intA("contract", int64(len(k)))}, a, b)
	c.out(0, c.permuteTo(y, z+i+j, out))
}

// expandEllipses replaces "..." in each term by letters unused in eq,
// one per axis it stands for, aligned to the right across operands as
// NumPy broadcasts them; it returns the letters of the longest.
func (c *nodeCtx) expandEllipses(eq string, terms []string, ops []*value) string {
	var free []byte
	for l := byte('A'); l <= 'z'; l++ {
		if (l <= 'Z' || l >= 'a') && !strings.ContainsRune(eq, rune(l)) {
			free = append(free, l)
		}
	}
	longest := 0
	for i, t := range terms {
		if strings.Contains(t, "...") {
			longest = max(longest, rank(ops[i])-(len(t)-3))
		}
	}
	if longest > len(free) || longest < 0 {
		c.fail("equation %q has too many axes under its ellipses", eq)
	}
	ell := string(free[:longest])
	for i, t := range terms {
		if strings.Contains(t, "...") {
			n := max(rank(ops[i])-(len(t)-3), 0)
			terms[i] = strings.Replace(t, "...", ell[longest-n:], 1)
		}
	}
	return ell
}

// diagonals takes the diagonal of every letter repeated in t: the pair
// is moved last and the stdlib diagonal keeps one of them.
func (c *nodeCtx) diagonals(x *value, t string) (*value, string) {
	for {
		l, ok := repeated(t)
		if !ok {
			return x, t
		}
		first := strings.IndexByte(t, l)
		second := first + 1 + strings.IndexByte(t[first+1:], l)
		rest := t[:first] + t[first+1:second] + t[second+1:]
		var perm []int64 // positions: the rest in order, then the pair
		for i := range len(t) {
			if i != first && i != second {
				perm = append(perm, int64(i))
			}
		}
		if perm = append(perm, int64(first), int64(second)); !isIdentity(perm) {
			x = c.call1("transpose", []attr{intsA("perm", perm)}, x)
		}
		x = c.call1("diagonal", nil, x)
		t = rest + string(l)
	}
}

func isIdentity(perm []int64) bool {
	for i, p := range perm {
		if p != int64(i) {
			return false
		}
	}
	return true
}

func repeated(t string) (byte, bool) {
	for i := range len(t) {
		if strings.IndexByte(t[i+1:], t[i]) >= 0 {
			return t[i], true
		}
	}
	return 0, false
}

// implicitOutput is the output of an einsum without "->": the letters
// that appear once, in alphabetical order, after the ellipsis letters.
func implicitOutput(terms []string, ell string) string {
	count := map[rune]int{}
	for _, t := range terms {
		for _, l := range t {
			count[l]++
		}
	}
	var out []byte
	for l := 'A'; l <= 'z'; l++ {
		if count[l] == 1 && !strings.ContainsRune(ell, l) {
			out = append(out, byte(l))
		}
	}
	return string(out)
}

// sumOnly sums x (with letters t) over the letters not in keep, returning
// the result and its letters.
func (c *nodeCtx) sumOnly(x *value, t, keep string) (*value, string) {
	var axes []int64
	var rest string
	for i, l := range t {
		if strings.ContainsRune(keep, l) {
			rest += string(l)
		} else {
			axes = append(axes, int64(i))
		}
	}
	if len(axes) == 0 {
		return x, t
	}
	return c.call1("reduce_sum", []attr{intsA("axes", axes), boolA("keepdims", false)}, x), rest
}

// permuteTo transposes x from letters from to letters to.
func (c *nodeCtx) permuteTo(x *value, from, to string) *value {
	if from == to {
		return x
	}
	if len(from) != len(to) {
		c.fail("einsum output %q does not use the letters %q", to, from)
	}
	perm := make([]int64, len(to))
	for i, l := range to {
		perm[i] = int64(strings.IndexRune(from, l))
		if perm[i] < 0 {
			c.fail("einsum output letter %c is not in the operands", l)
		}
	}
	return c.call1("transpose", []attr{intsA("perm", perm)}, x)
}

// convBatchNorm maps inference to batch_norm and training mode (batch
// statistics; outputs the running mean and variance) to batch_norm_train.
func convBatchNorm(c *nodeCtx) {
	if c.opset() < 9 && c.intAttr("spatial", 1) == 0 {
		c.fail("spatial = 0 is not supported")
	}
	ins := []*value{c.must(0), c.must(1), c.must(2), c.must(3), c.must(4)}
	eps := floatA("epsilon", c.floatAttr("epsilon", 1e-5))
	if c.intAttr("training_mode", 0) == 0 && !c.wants(1) {
		c.out(0, c.call1("batch_norm", []attr{eps}, ins...))
		return
	}
	if c.opset() < 14 {
		c.fail("training outputs before opset 14 are not supported")
	}
	outs := c.call("batch_norm_train", []attr{eps, floatA("momentum", c.floatAttr("momentum", 0.9))}, ins...)
	c.out(0, outs[0])
	c.out(1, outs[3])
	c.out(2, outs[4])
}

// convLayerNorm maps LayerNormalization; without a bias it adds zeros,
// and the optional mean and inverse standard deviation outputs come from
// layer_norm_stats.
func convLayerNorm(c *nodeCtx) {
	x, scale := c.must(0), c.must(1)
	axis := c.axis(c.intAttr("axis", -1), rank(x))
	bias := c.in(2)
	if bias == nil {
		bias = c.call1("zeros_like", nil, scale)
	}
	attrs := []attr{intA("axis", axis), floatA("epsilon", c.floatAttr("epsilon", 1e-5))}
	if !c.wants(1) && !c.wants(2) {
		c.out(0, c.call1("layer_norm", attrs, x, scale, bias))
		return
	}
	outs := c.call("layer_norm_stats", attrs, x, scale, bias)
	for i := range 3 {
		c.out(i, outs[i])
	}
}

func convRMSNorm(c *nodeCtx) {
	x := c.must(0)
	attrs := []attr{intA("axis", c.axis(c.intAttr("axis", -1), rank(x))), floatA("epsilon", c.floatAttr("epsilon", 1e-5))}
	c.out(0, c.call1("rms_norm", attrs, x, c.must(1)))
}

func convLRN(c *nodeCtx) {
	attrs := []attr{intA("size", c.intAttr("size", 0)), floatA("alpha", c.floatAttr("alpha", 1e-4)),
		floatA("beta", c.floatAttr("beta", 0.75)), floatA("bias", c.floatAttr("bias", 1))}
	c.out(0, c.call1("lrn", attrs, c.must(0)))
}

// convMVN is ONNX's definition: (x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9)
// over axes (default 0, 2, 3).
func convMVN(c *nodeCtx) {
	x := c.must(0)
	axes := []attr{intsA("axes", c.axes(c.intsAttr("axes", []int64{0, 2, 3}), rank(x))), boolA("keepdims", true)}
	mean := c.call1("reduce_mean", axes, x)
	meanSq := c.call1("reduce_mean", axes, c.call1("mul", nil, x, x))
	variance := c.call1("sub", nil, meanSq, c.call1("mul", nil, mean, mean))
	std := c.call1("add", nil, c.call1("sqrt", nil, variance), scalar(x.typ.DType, 1e-9))
	c.out(0, c.call1("div", nil, c.call1("sub", nil, x, mean), std))
}

// convNLLLoss maps NegativeLogLikelihoodLoss: each element's loss
// (stdlib nll_loss_elements), then its reduction: none, sum, or mean,
// the sum divided by the sum of the elements' weights (those not
// ignored), as the operator defines it.
func convNLLLoss(c *nodeCtx) {
	c.out(0, c.nllLoss(c.must(0), c.must(1), c.in(2)))
}

// convSoftmaxCrossEntropyLoss maps SoftmaxCrossEntropyLoss: the
// negative log-likelihood of the log-softmax along the classes (axis
// 1), which is its second output.
func convSoftmaxCrossEntropyLoss(c *nodeCtx) {
	logp := c.call1("log_softmax", []attr{intA("axis", 1)}, c.must(0))
	c.out(0, c.nllLoss(logp, c.must(1), c.in(2)))
	if c.wants(1) {
		c.out(1, logp)
	}
}

// nllLoss is the negative log-likelihood of log-probabilities logp
// [N, C, *D] at target [N, *D], weighted per class by weight (nil: all
// 1), with the node's ignore_index and reduction.
func (c *nodeCtx) nllLoss(logp, target, weight *value) *value {
	if rank(logp) < 2 {
		c.fail("the input has rank %d; it needs a batch and a class axis", rank(logp))
	}
	if weight == nil {
		n := c.extent(logp, 1)
		vals := make([]float64, n)
		for i := range vals {
			vals[i] = 1
		}
		weight = constValue("", tensor.FromFloats(logp.typ.DType, []int{int(n)}, vals), false)
	}
	attrs := []attr{intA("ignore_index", c.intAttr("ignore_index", 0)), boolA("ignore", c.has("ignore_index"))}
	loss := c.call1("nll_loss_elements", attrs, logp, target, weight)
	total := func(v *value) *value {
		return c.call1("reduce_sum", []attr{intsA("axes", nil), boolA("keepdims", false)}, v)
	}
	switch r := c.stringAttr("reduction", "mean"); r {
	case "none":
		return loss
	case "sum":
		return total(loss)
	case "mean":
		return c.call1("div", nil, total(loss), total(c.call1("nll_loss_weights", attrs, target, weight)))
	default:
		c.fail("reduction %q is none of none, sum, mean", r)
		return nil
	}
}

// convGroupNorm maps GroupNormalization to stdlib group_norm, whose scale
// and bias are per channel as since opset 21; before, they are per group
// and are gathered to the channels.
func convGroupNorm(c *nodeCtx) {
	x, scale, bias := c.must(0), c.must(1), c.must(2)
	if rank(x) < 2 {
		c.fail("the input must have a channel axis, found rank %d", rank(x))
	}
	g := c.intAttr("num_groups", 0)
	ch := c.extent(x, 1)
	if g <= 0 || ch%g != 0 {
		c.fail("num_groups = %d must divide the %d channels", g, ch)
	}
	per := ch // scale and bias per channel (opset 21), or per group before
	if c.opset() < 21 {
		per = g
	}
	for i, p := range []*value{scale, bias} {
		if rank(p) != 1 || c.extent(p, 0) != per {
			c.fail("input %d has shape %s; opset %d needs [%d]", i+1, lang.ShapeString(p.typ.Shape), c.opset(), per)
		}
	}
	if c.opset() < 21 {
		idx := make([]int64, ch)
		for i := range idx {
			idx[i] = int64(i) / (ch / g)
		}
		at := constValue("", tensor.FromInts(lang.I64, []int{len(idx)}, idx), false)
		scale = c.call1("gather", []attr{intA("axis", 0)}, scale, at)
		bias = c.call1("gather", []attr{intA("axis", 0)}, bias, at)
	}
	// Opset 21's stash_type (default FLOAT) is the type the statistics
	// are computed in: a narrower input is normalised in it.
	dt := x.typ.DType
	if c.opset() >= 21 {
		stash, err := DType(int32(c.intAttr("stash_type", int64(onnxpb.TensorProto_FLOAT))))
		if err != nil || !stash.IsFloat() {
			c.fail("stash_type %d is not a float type", c.intAttr("stash_type", 1))
		}
		if stash.Bits() > dt.Bits() {
			x, scale, bias = c.cast(x, stash), c.cast(scale, stash), c.cast(bias, stash)
		}
	}
	y := c.call1("group_norm", []attr{intA("num_groups", g), floatA("epsilon", c.floatAttr("epsilon", 1e-5))}, x, scale, bias)
	c.out(0, c.cast(y, dt))
}

// convDet maps Det on [*, M, M] to M - 1 stdlib det_steps (Gaussian
// elimination with partial pivoting, which keeps the determinant) and
// the product of the triangular result's diagonal.
func convDet(c *nodeCtx) {
	x := c.must(0)
	r := rank(x)
	if r < 2 {
		c.fail("the input must be a matrix or a batch of them, found rank %d", r)
	}
	m := c.extent(x, r-1)
	if c.extent(x, r-2) != m {
		c.fail("the matrices must be square, found %d x %d", c.extent(x, r-2), m)
	}
	if !x.typ.DType.IsFloat() {
		c.fail("the input must be a float tensor, found %s", x.typ.DType)
	}
	for k := int64(0); k+1 < m; k++ {
		x = c.call1("det_step", []attr{intA("k", k)}, x)
	}
	c.out(0, c.call1("diagonal_prod", nil, x))
}
