package onnx

import (
	"slices"

	"tofuc/lang"
)

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
	c.out(0, seqValue(parts))
}

// seqIn is input i, which must be a sequence.
func (c *nodeCtx) seqIn(i int) []*value {
	v := c.must(i)
	if !v.isSeq() {
		c.fail("input %d is not a sequence", i)
	}
	return v.seq
}

// position reads the position input i (default def), counted from the
// back when negative, checked against 0 <= p < n + extra (extra 1 for an
// insertion, which may append).
func (c *nodeCtx) position(i int, def int64, n, extra int) int {
	p := def
	if c.in(i) != nil {
		ps := c.knownInts(i, "position")
		if len(ps) != 1 {
			c.fail("its position has %d elements", len(ps))
		}
		p = ps[0]
	}
	if p < 0 {
		p += int64(n)
	}
	if p < 0 || p >= int64(n+extra) {
		c.fail("position %d is out of range for a sequence of %d", p, n)
	}
	return int(p)
}

// seqValue is a sequence of the elements (never nil, so that an empty
// sequence is one).
func seqValue(elems []*value) *value {
	return &value{seq: append([]*value{}, elems...)}
}

// tensorIn is input i, which must be a tensor.
func (c *nodeCtx) tensorIn(i int) *value {
	v := c.must(i)
	if v.isSeq() || v.opt {
		c.fail("input %d is %s; a tensor is expected", i, describe(v))
	}
	return v
}

func convSequenceEmpty(c *nodeCtx) { c.out(0, seqValue(nil)) }

func convSequenceConstruct(c *nodeCtx) {
	var elems []*value
	for i := range c.numIn() {
		elems = append(elems, c.tensorIn(i))
	}
	c.out(0, seqValue(elems))
}

// convSequenceInsert inserts the tensor at position (default: at the back).
func convSequenceInsert(c *nodeCtx) {
	seq := c.seqIn(0)
	x := c.tensorIn(1)
	p := c.position(2, int64(len(seq)), len(seq), 1)
	c.out(0, seqValue(slices.Insert(slices.Clone(seq), p, x)))
}

func convSequenceAt(c *nodeCtx) {
	seq := c.seqIn(0)
	if c.in(1) == nil {
		c.fail("input 1 (position) is required")
	}
	c.out(0, seq[c.position(1, 0, len(seq), 0)])
}

// convSequenceErase removes the element at position (default: the last).
func convSequenceErase(c *nodeCtx) {
	seq := c.seqIn(0)
	p := c.position(1, int64(len(seq))-1, len(seq), 0)
	c.out(0, seqValue(slices.Delete(slices.Clone(seq), p, p+1)))
}

func convSequenceLength(c *nodeCtx) {
	c.out(0, scalar(lang.I64, float64(len(c.seqIn(0)))))
}

// convConcatFromSequence concatenates the elements along axis, or with
// new_axis = 1 stacks them along a new axis.
func convConcatFromSequence(c *nodeCtx) {
	seq := c.seqIn(0)
	if len(seq) == 0 {
		c.fail("the sequence is empty")
	}
	r := rank(seq[0])
	newAxis := c.intAttr("new_axis", 0)
	if newAxis != 0 {
		r++
	}
	if !c.has("axis") {
		c.fail("attribute axis is required")
	}
	axis := c.axis(c.intAttr("axis", 0), r)
	if newAxis != 0 {
		c.out(0, c.stack(seq, axis, false))
		return
	}
	c.out(0, c.concatAll(slices.Clone(seq), axis))
}

// convSequenceMap applies the body to each position of the input
// sequence: the sequence inputs give their element there (they must be
// of one length), the tensor inputs themselves; each body output makes a
// sequence.
func convSequenceMap(c *nodeCtx) {
	body := c.graphAttr("body")
	n := len(c.seqIn(0))
	for i := 1; i < c.numIn(); i++ {
		if v := c.must(i); v.isSeq() && len(v.seq) != n {
			c.fail("its sequences have lengths %d and %d", n, len(v.seq))
		}
	}
	outs := make([][]*value, len(body.GetOutput()))
	for k := range n {
		ins := make([]*value, c.numIn())
		for i := range ins {
			ins[i] = c.must(i)
			if ins[i].isSeq() {
				ins[i] = ins[i].seq[k]
			}
		}
		for j, v := range c.subgraph("body", body, ins) {
			outs[j] = append(outs[j], v)
		}
	}
	for j, elems := range outs {
		c.out(j, seqValue(elems))
	}
}

// Optional values whose presence is known at import: an optional holds
// its element, or nothing.

// convOptional wraps its input, or makes an empty optional without one.
func convOptional(c *nodeCtx) {
	x := c.in(0)
	if x != nil && x.opt {
		c.fail("its input is an optional; an optional of an optional is not supported")
	}
	c.out(0, &value{opt: true, elem: x})
}

// convOptionalHasElement: whether the optional holds an element; a
// tensor or sequence input holds one, an absent input none.
func convOptionalHasElement(c *nodeCtx) {
	x := c.in(0)
	c.out(0, boolScalar(x != nil && (!x.opt || x.elem != nil)))
}

// convOptionalGetElement: the optional's element; a tensor or sequence
// input is itself.
func convOptionalGetElement(c *nodeCtx) {
	x := c.must(0)
	if !x.opt {
		c.out(0, x)
		return
	}
	if x.elem == nil {
		c.fail("the optional is empty (ONNX fails at run time)")
	}
	c.out(0, x.elem)
}
