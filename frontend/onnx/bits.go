package onnx

import (
	"strings"

	"tofuc/lang"
)

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

// convBitCast maps BitCast (opset 26): between integers (and bool, 8
// bits wide) of one width it is a cast, which keeps the bits (wrapping);
// a float goes to or comes from the signed integer of its width through
// stdlib bitcast_F_to_I or bitcast_I_to_F.
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
	bits := map[int]lang.DType{8: lang.I8, 16: lang.I16, 32: lang.I32, 64: lang.I64}[from.Bits()]
	if from.IsFloat() {
		x = c.call1("bitcast_"+from.String()+"_to_"+bits.String(), nil, x)
	}
	if !to.IsFloat() {
		c.out(0, c.cast(x, to))
		return
	}
	x = c.cast(x, bits)
	c.out(0, c.call1("bitcast_"+bits.String()+"_to_"+to.String(), nil, x))
}
