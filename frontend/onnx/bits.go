package onnx

import "strings"

// convBitShift maps BitShift to stdlib shift_left or shift_right
// (direction LEFT or RIGHT; ONNX defines it on unsigned integers, where
// RIGHT is logical).
func convBitShift(c *nodeCtx) {
	x, n := c.must(0), c.must(1)
	switch dir := strings.ToUpper(c.stringAttr("direction", "")); dir {
	case "LEFT":
		c.out(0, c.call1("shift_left", nil, x, n))
	case "RIGHT":
		c.out(0, c.call1("shift_right", nil, x, n))
	default:
		c.fail("direction %q (LEFT or RIGHT)", c.stringAttr("direction", ""))
	}
}

// convBitCast maps BitCast (opset 26) to stdlib bitcast_T: the bits of
// each element read as dtype to, of the same width.
func convBitCast(c *nodeCtx) {
	x := c.must(0)
	to, err := DType(int32(c.intAttr("to", 0)))
	if err != nil {
		c.fail("%v", err)
	}
	from := x.typ.DType
	if from.Bits() != to.Bits() {
		c.fail("from %s to %s: the widths differ (%d and %d bits)", from, to, from.Bits(), to.Bits())
	}
	if from == to {
		c.out(0, x)
		return
	}
	op := "bitcast_" + to.String()
	if c.imp.prog.StdOps()[op] == nil {
		c.fail("bit casts to %s are not supported", to)
	}
	c.out(0, c.call1(op, nil, x))
}
