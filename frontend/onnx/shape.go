package onnx

import (
	"tofuc/lang"
	"tofuc/runtime/tensor"
)

// Converters of the shape, indexing and reduction operators.

func convFlatten(c *nodeCtx) {
	x := c.must(0)
	axis := c.intAttr("axis", 1)
	if axis != int64(rank(x)) {
		axis = c.axis(axis, rank(x))
	}
	c.out(0, c.call1("flatten", []attr{intA("axis", axis)}, x))
}

func convReshape(c *nodeCtx) {
	x := c.must(0)
	var shape []int64
	if s := c.in(1); s != nil && s.sym != nil && c.opset() >= 5 {
		shape = c.reshapeTarget(x, s.sym)
	} else {
		shape = c.intsMoved("shape", 1, 5)
	}
	if c.intAttr("allowzero", 0) == 1 {
		for _, d := range shape {
			if d == 0 {
				c.fail("allowzero = 1 with a zero extent in the shape")
			}
		}
	}
	c.out(0, c.call1("reshape", []attr{intsA("shape", shape)}, x))
}

func convTranspose(c *nodeCtx) {
	x := c.must(0)
	perm := c.intsAttr("perm", []int64{})
	c.out(0, c.call1("transpose", []attr{intsA("perm", c.axes(perm, rank(x)))}, x))
}

// convConcat joins the inputs with concat, concat3 and concat4, in groups
// of at most four.
func convConcat(c *nodeCtx) {
	var ins []*value
	for i := range c.numIn() {
		ins = append(ins, c.must(i))
	}
	if len(ins) == 0 {
		c.fail("no inputs")
	}
	defaultAxis := int64(1) // Concat-1: axis was optional, default 1
	if c.opset() >= 4 {
		defaultAxis = 0
	}
	c.out(0, c.concatAll(ins, c.axis(c.intAttr("axis", defaultAxis), rank(ins[0]))))
}

// concatAll joins ins along axis with concat, concat3 and concat4, in
// groups of four.
func (c *nodeCtx) concatAll(ins []*value, axis int64) *value {
	ops := map[int]string{2: "concat", 3: "concat3", 4: "concat4"}
	for len(ins) > 1 {
		k := min(len(ins), 4)
		joined := c.call1(ops[k], []attr{intA("axis", axis)}, ins[:k]...)
		ins = append([]*value{joined}, ins[k:]...)
	}
	return ins[0]
}

// convSplit slices each output along axis.
func convSplit(c *nodeCtx) {
	x := c.must(0)
	axis := c.axis(c.intAttr("axis", 0), rank(x))
	extent := c.extent(x, int(axis))
	sizes := c.intsMoved("split", 1, 13)
	n := int64(len(c.node.GetOutput()))
	if sizes == nil {
		if num := c.intAttr("num_outputs", 0); num > 0 {
			n = num
		}
		if n == 0 {
			c.fail("no outputs")
		}
		if c.opset() < 18 && extent%n != 0 {
			c.fail("extent %d does not split into %d equal parts", extent, n)
		}
		chunk := (extent + n - 1) / n
		for start := int64(0); start < extent || int64(len(sizes)) < n; start += chunk {
			sizes = append(sizes, max(min(chunk, extent-start), 0))
		}
	}
	if int64(len(sizes)) != n {
		c.fail("split sizes %v do not give %d outputs", sizes, n)
	}
	for i, part := range c.splitAlong(x, axis, sizes) {
		c.out(i, part)
	}
}

// splitAlong slices x along axis into parts of the given sizes, which
// must add up to its extent.
func (c *nodeCtx) splitAlong(x *value, axis int64, sizes []int64) []*value {
	var total int64
	for _, s := range sizes {
		total += s
	}
	if extent := c.extent(x, int(axis)); total != extent {
		c.fail("split sizes %v do not divide extent %d", sizes, extent)
	}
	parts := make([]*value, len(sizes))
	start := int64(0)
	for i, s := range sizes {
		parts[i] = c.call1("slice", []attr{intsA("starts", []int64{start}), intsA("ends", []int64{start + s}), intsA("axes", []int64{axis})}, x)
		start += s
	}
	return parts
}

func convSlice(c *nodeCtx) {
	x := c.must(0)
	var starts, ends, axes, steps []int64
	if c.opset() < 10 {
		starts, ends, axes = c.intsAttr("starts", nil), c.intsAttr("ends", nil), c.intsAttr("axes", nil)
	} else {
		starts, ends = c.knownInts(1, "starts"), c.knownInts(2, "ends")
		axes, steps = c.knownInts(3, "axes"), c.knownInts(4, "steps")
	}
	for i := range starts {
		starts[i] = clampInt64(starts[i])
	}
	for i := range ends {
		ends[i] = clampInt64(ends[i])
	}
	if axes == nil {
		axes = []int64{}
	}
	if steps == nil {
		steps = []int64{}
	}
	attrs := []attr{intsA("starts", starts), intsA("ends", ends), intsA("axes", c.axes(axes, rank(x))), intsA("steps", steps)}
	c.out(0, c.call1("slice", attrs, x))
}

func convSqueeze(c *nodeCtx) {
	x := c.must(0)
	axes := c.intsMoved("axes", 1, 13)
	if axes == nil {
		for i, d := range c.dims(x) {
			if d == 1 {
				axes = append(axes, int64(i))
			}
		}
	}
	axes = c.axes(axes, rank(x))
	for _, a := range axes {
		if n, ok := x.typ.Shape[a].IsConst(); ok && n != 1 {
			c.fail("axis %d has extent %d, not 1", a, n)
		}
	}
	c.out(0, c.call1("squeeze", []attr{intsA("axes", axes)}, x))
}

func convUnsqueeze(c *nodeCtx) {
	x := c.must(0)
	axes := c.intsMoved("axes", 1, 13)
	c.out(0, c.call1("unsqueeze", []attr{intsA("axes", c.axes(axes, rank(x)+len(axes)))}, x))
}

// convPad maps constant padding to pad, and edge and reflect padding of
// the last two axes to pad_edge2d and pad_reflect2d.
func convPad(c *nodeCtx) {
	x := c.must(0)
	r := rank(x)
	pads, value := c.intsAttr("pads", nil), c.floatAttr("value", 0)
	if c.opset() >= 11 {
		pads, value = c.knownInts(1, "pads"), c.knownFloat(2, "constant value", 0)
	}
	if axes := c.knownInts(3, "axes"); axes != nil {
		pads = c.scatterPads(pads, c.axes(axes, r), r)
	}
	if len(pads) != 2*r {
		c.fail("%d pads for rank %d", len(pads), r)
	}
	switch mode := c.stringAttr("mode", "constant"); mode {
	case "constant":
		c.out(0, c.call1("pad", []attr{intsA("pads", pads), floatA("value", value)}, x))
	case "edge", "reflect", "wrap":
		for i := range 2 * r {
			if pads[i] < 0 {
				c.fail("mode %q cannot crop (pad %d)", mode, pads[i])
			}
		}
		if c.lastTwoPadded(x, pads, mode) {
			p := []int64{pads[r-2], pads[r-1], pads[2*r-2], pads[2*r-1]}
			c.out(0, c.call1("pad_"+mode+"2d", []attr{intsA("pads", p)}, x))
			return
		}
		// Any axes: one pad_axis per padded axis.
		y := x
		for a := range r {
			if pads[a] == 0 && pads[r+a] == 0 {
				continue
			}
			if c.extent(x, a) == 0 {
				c.fail("mode %q cannot pad an empty axis", mode)
			}
			y = c.call1("pad_axis", []attr{intA("axis", int64(a)), intA("before", pads[a]), intA("after", pads[r+a]), stringA("mode", mode)}, y)
		}
		c.out(0, y)
	default:
		c.fail("mode %q is not supported", mode)
	}
}

// lastTwoPadded reports whether pad_edge2d or pad_reflect2d does the
// padding: only the last two axes padded, reflect by less than their
// extents.
func (c *nodeCtx) lastTwoPadded(x *value, pads []int64, mode string) bool {
	r := rank(x)
	if mode == "wrap" || r < 2 {
		return false
	}
	for i := range r - 2 {
		if pads[i] != 0 || pads[r+i] != 0 {
			return false
		}
	}
	for k, a := range []int{r - 2, r - 1, 2*r - 2, 2*r - 1} {
		n, ok := x.typ.Shape[(r-2)+k%2].IsConst()
		if !ok || mode == "reflect" && pads[a] > n-1 {
			return false
		}
	}
	return true
}

// scatterPads expands pads given for some axes to every axis.
func (c *nodeCtx) scatterPads(pads, axes []int64, r int) []int64 {
	if len(pads) != 2*len(axes) {
		c.fail("%d pads for %d axes", len(pads), len(axes))
	}
	full := make([]int64, 2*r)
	for i, a := range axes {
		full[a], full[int(a)+r] = pads[i], pads[len(axes)+i]
	}
	return full
}

func convTile(c *nodeCtx) {
	c.out(0, c.call1("tile", []attr{intsA("repeats", c.knownInts(1, "repeats"))}, c.must(0)))
}

func convExpand(c *nodeCtx) {
	c.out(0, c.call1("expand", []attr{intsA("shape", c.knownInts(1, "shape"))}, c.must(0)))
}

func convTrilu(c *nodeCtx) {
	k := int64(0)
	if c.in(1) != nil {
		k = int64(c.knownFloat(1, "k", 0))
	}
	op := "triu"
	if c.intAttr("upper", 1) == 0 {
		op = "tril"
	}
	c.out(0, c.call1(op, []attr{intA("k", k)}, c.must(0)))
}

// convTopK maps TopK (k the attribute before opset 10, input 1 since)
// to stdlib top_k; its output is sorted whatever sorted says, and equal
// values keep their order, as ONNX asks.
func convTopK(c *nodeCtx) {
	x := c.must(0)
	var k int64
	if c.opset() < 10 {
		k = c.intAttr("k", 0)
	} else if ks := c.knownInts(1, "K"); len(ks) == 1 {
		k = ks[0]
	} else {
		c.fail("K (input 1) must be one integer")
	}
	axis := c.axis(c.intAttr("axis", -1), rank(x))
	if k < 0 || k > c.extent(x, int(axis)) {
		c.fail("K = %d is outside [0, %d]", k, c.extent(x, int(axis)))
	}
	outs := c.call("top_k", []attr{intA("k", k), intA("axis", axis), intA("largest", c.intAttr("largest", 1))}, x)
	c.out(0, outs[0])
	if c.wants(1) {
		c.out(1, outs[1])
	}
}

// scatterOp is the stdlib scatter of the node's reduction: plain without
// one, else prefix and the reduction's name (scatter_add).
func (c *nodeCtx) scatterOp(plain, prefix string) string {
	switch reduction := c.stringAttr("reduction", "none"); reduction {
	case "none":
		return plain
	case "add", "mul", "max", "min":
		return prefix + reduction
	default:
		c.fail("reduction %q is none of none, add, mul, max, min", reduction)
		return ""
	}
}

// convScatterElements maps ScatterElements (and Scatter, its name
// before opset 11) to the stdlib scatter of its reduction.
func convScatterElements(c *nodeCtx) {
	op := c.scatterOp("scatter_elements", "scatter_")
	data := c.must(0)
	c.out(0, c.call1(op, []attr{intA("axis", c.axis(c.intAttr("axis", 0), rank(data)))}, data, c.must(1), c.must(2)))
}

// convScatterND maps ScatterND: the index tuples become row-major
// positions (stdlib nd_positions), the indices and updates flattened
// over their batch of tuples, then the stdlib scatter_nd of the
// reduction.
func convScatterND(c *nodeCtx) {
	op := c.scatterOp("scatter_nd", "scatter_nd_")
	data, indices, updates := c.must(0), c.must(1), c.must(2)
	idx := c.dims(indices)
	depth := idx[len(idx)-1]
	shape := c.dims(data)
	if depth < 1 || depth > int64(len(shape)) {
		c.fail("index tuples of %d entries into a tensor of rank %d", depth, len(shape))
	}
	positions := c.ndPositions(indices, shape[:depth])
	tuples := c.dims(positions)[0]
	rows := c.call1("reshape", []attr{intsA("shape", append([]int64{tuples}, shape[depth:]...))}, updates)
	c.out(0, c.call1(op, []attr{intA("depth", depth)}, data, positions, rows))
}

// convOneHot maps OneHot (depth known at import) to stdlib
// one_hot_values; float indices are truncated to integers first.
func convOneHot(c *nodeCtx) {
	indices, values := c.must(0), c.must(2)
	if indices.typ.DType.IsFloat() {
		indices = c.cast(indices, lang.I64)
	}
	depth := int64(c.knownFloat(1, "depth", 0))
	if depth <= 0 {
		c.fail("depth %d is not positive", depth)
	}
	axis := c.axis(c.intAttr("axis", -1), rank(indices)+1)
	c.out(0, c.call1("one_hot_values", []attr{intA("depth", depth), intA("axis", axis)}, indices, values))
}

// convGatherND maps GatherND with batch_dims 0: the index tuples as
// row-major positions (stdlib nd_positions), then a gather along the
// data's leading axes flattened into one.
func convGatherND(c *nodeCtx) {
	if c.intAttr("batch_dims", 0) != 0 {
		c.fail("batch_dims other than 0 is not supported")
	}
	data, indices := c.must(0), c.must(1)
	idx, shape := c.dims(indices), c.dims(data)
	depth := idx[len(idx)-1]
	if depth < 1 || depth > int64(len(shape)) {
		c.fail("index tuples of %d entries into a tensor of rank %d", depth, len(shape))
	}
	positions := c.ndPositions(indices, shape[:depth])
	lead := int64(1)
	for _, n := range shape[:depth] {
		lead *= n
	}
	rows := c.call1("reshape", []attr{intsA("shape", append([]int64{lead}, shape[depth:]...))}, data)
	at := c.call1("reshape", []attr{intsA("shape", idx[:len(idx)-1])}, positions)
	c.out(0, c.call1("gather", []attr{intA("axis", 0)}, rows, at))
}

// ndPositions are the row-major positions (stdlib nd_positions) of
// the index tuples along the last axis of indices in a tensor whose
// leading extents are dims, one per tuple, flattened.
func (c *nodeCtx) ndPositions(indices *value, dims []int64) *value {
	idx := c.dims(indices)
	tuples := int64(1)
	for _, n := range idx[:len(idx)-1] {
		tuples *= n
	}
	strides := make([]int64, len(dims))
	for d, step := len(dims)-1, int64(1); d >= 0; d-- {
		strides[d] = step
		step *= dims[d]
	}
	konst := func(vals []int64) *value {
		return constValue("", tensor.FromInts(lang.I64, []int{len(vals)}, vals), false)
	}
	flat := c.call1("reshape", []attr{intsA("shape", []int64{tuples, int64(len(dims))})}, indices)
	return c.call1("nd_positions", nil, flat, konst(dims), konst(strides))
}

// cumulative maps CumSum and CumProd (stdlib cumsum, cumprod), whose
// axis is an input known at import.
func cumulative(op string) func(*nodeCtx) {
	return func(c *nodeCtx) {
		x := c.must(0)
		axis := c.axis(int64(c.knownFloat(1, "axis", 0)), rank(x))
		attrs := []attr{intA("axis", axis), intA("exclusive", c.intAttr("exclusive", 0)), intA("reverse", c.intAttr("reverse", 0))}
		c.out(0, c.call1(op, attrs, x))
	}
}

// argReduce maps ArgMax and ArgMin. select_last_index = 1 reverses the
// axis, takes the first extreme, and maps the index back.
func argReduce(op string) func(*nodeCtx) {
	return func(c *nodeCtx) {
		x := c.must(0)
		axis := c.axis(c.intAttr("axis", 0), rank(x))
		attrs := []attr{intA("axis", axis), boolA("keepdims", c.intAttr("keepdims", 1) != 0)}
		if c.intAttr("select_last_index", 0) == 0 {
			c.out(0, c.call1(op, attrs, x))
			return
		}
		n := c.dims(x)[axis]
		rev := c.call1("slice", []attr{intsA("starts", []int64{-1}), intsA("ends", []int64{-clampInt64(1 << 62)}), intsA("axes", []int64{axis}), intsA("steps", []int64{-1})}, x)
		idx := c.call1(op, attrs, rev)
		c.out(0, c.call1("sub", nil, scalar(idx.typ.DType, float64(n-1)), idx))
	}
}

// reduce maps the Reduce operators; axesInput is the opset from which the
// axes are an input rather than an attribute.
func reduce(op string, axesInput int64) func(*nodeCtx) {
	return func(c *nodeCtx) {
		x := c.must(0)
		axes := c.intsMoved("axes", 1, axesInput)
		if len(axes) == 0 && c.intAttr("noop_with_empty_axes", 0) == 1 {
			c.out(0, x)
			return
		}
		if axes == nil {
			axes = []int64{}
		}
		attrs := []attr{intsA("axes", c.axes(axes, rank(x))), boolA("keepdims", c.intAttr("keepdims", 1) != 0)}
		c.out(0, c.call1(op, attrs, x))
	}
}

// convReverseSequence maps ReverseSequence onto reverse_sequence, whose
// time axis comes first: batch-major input is transposed around it.
func convReverseSequence(c *nodeCtx) {
	x, lens := c.must(0), c.must(1)
	batch, time := c.intAttr("batch_axis", 1), c.intAttr("time_axis", 0)
	switch {
	case batch == 1 && time == 0:
		c.out(0, c.call1("reverse_sequence", nil, x, lens))
	case batch == 0 && time == 1:
		perm := make([]int64, rank(x))
		for i := range perm {
			perm[i] = int64(i)
		}
		perm[0], perm[1] = 1, 0
		swap := []attr{intsA("perm", perm)}
		c.out(0, c.call1("transpose", swap, c.call1("reverse_sequence", nil, c.call1("transpose", swap, x), lens)))
	default:
		c.fail("batch_axis = %d and time_axis = %d (one must be 0, the other 1)", batch, time)
	}
}

// convEyeLike maps EyeLike to stdlib eye_like, cast to dtype when given.
func convEyeLike(c *nodeCtx) {
	x := c.must(0)
	if rank(x) != 2 {
		c.fail("the input must be 2-D, found rank %d", rank(x))
	}
	y := c.call1("eye_like", []attr{intA("k", c.intAttr("k", 0))}, x)
	if c.has("dtype") {
		dt, err := DType(int32(c.intAttr("dtype", 0)))
		if err != nil {
			c.fail("%v", err)
		}
		y = c.cast(y, dt)
	}
	c.out(0, y)
}
