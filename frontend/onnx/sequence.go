package onnx

// Sequences whose length is known at import are lists of tensors: a
// sequence value holds its elements, Identity passes it on, and a graph
// input or output that is a sequence is one model input or output per
// element (Options.Sequences gives an input sequence's elements).

// convSplitToSequence splits the input along axis into a sequence: in
// chunks of split (a scalar; the last may be smaller), of the sizes split
// lists, or of one each without split (the axis then removed unless
// keepdims).
func convSplitToSequence(c *nodeCtx) {
	x := c.must(0)
	axis := c.axis(c.intAttr("axis", 0), rank(x))
	extent := c.extent(x, int(axis))
	var sizes []int64
	switch split := c.in(1); {
	case split == nil:
		sizes = ones(int(extent))
	case rank(split) == 0:
		chunk := c.knownInts(1, "split")[0]
		if chunk <= 0 {
			c.fail("split = %d", chunk)
		}
		for start := int64(0); start < extent; start += chunk {
			sizes = append(sizes, min(chunk, extent-start))
		}
	default:
		sizes = c.knownInts(1, "split")
	}
	parts := c.splitAlong(x, axis, sizes)
	if c.in(1) == nil && c.intAttr("keepdims", 1) == 0 {
		for i, p := range parts {
			parts[i] = c.call1("squeeze", []attr{intsA("axes", []int64{axis})}, p)
		}
	}
	c.out(0, &value{seq: parts})
}
