package onnx

import (
	"tofuc/frontend/onnx/onnxpb"
	"tofuc/lang"
	"tofuc/runtime/tensor"
)

// Linear quantization (QuantizeLinear, DequantizeLinear,
// DynamicQuantizeLinear) and the integer and quantized products
// (MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv), from ONNX's
// definitions. Integer products are computed in f64, exact for any sum
// below 2^53, and requantized with ONNX's rounding (halves to even) and
// saturation.

// intRanges bounds the integer types a quantization can produce (the
// narrow ones are in narrowTypes).
var intRanges = map[onnxpb.TensorProto_DataType][2]int64{
	onnxpb.TensorProto_INT8: {-128, 127}, onnxpb.TensorProto_UINT8: {0, 255},
	onnxpb.TensorProto_INT16: {-32768, 32767}, onnxpb.TensorProto_UINT16: {0, 65535},
	onnxpb.TensorProto_INT32: {-1 << 31, 1<<31 - 1},
}

// quantParam shapes a scale or zero point p to broadcast against x:
// a scalar (or one element) applies to all of x, a 1-D tensor to x's axis,
// and, with a block size, a tensor of x's rank to blocks of that many
// elements along axis (the node's, which only these two read).
func (c *nodeCtx) quantParam(p, x *value, block int64) *value {
	perTensor := rank(p) == 0 || rank(p) == 1 && c.dims(p)[0] == 1
	if block <= 0 && perTensor {
		return p
	}
	axis := c.axis(c.intAttr("axis", 1), rank(x))
	switch {
	case block > 0:
		if rank(p) != rank(x) {
			c.fail("a blocked scale or zero point has rank %d; it needs x's, %d", rank(p), rank(x))
		}
		return c.call1("repeat_blocks", []attr{intA("axis", axis), intA("block_size", block), intA("n", c.extent(x, int(axis)))}, p)
	case rank(p) != 1:
		c.fail("a scale or zero point of rank %d needs block_size (per tensor it is a scalar, per axis 1-D)", rank(p))
	}
	return c.alongAxis(p, rank(x), axis)
}

// alongAxis reshapes the 1-D p to rank r, its extents on axis and 1 on
// every other axis, so that it broadcasts along axis.
func (c *nodeCtx) alongAxis(p *value, r int, axis int64) *value {
	shape := make([]int64, r)
	for i := range shape {
		shape[i] = 1
	}
	shape[axis] = -1
	return c.call1("reshape", []attr{intsA("shape", shape)}, p)
}

// requantize rounds v (a float) to the element type elem, adding the zero
// point zp (already shaped, or nil) as QuantizeLinear does: integers round
// halves to even and saturate; narrow floats round as Cast does.
func (c *nodeCtx) requantize(v, zp *value, elem int32, saturate bool) *value {
	if zp != nil {
		zp = c.cast(zp, v.typ.DType)
	}
	if nt := narrowTypes[onnxpb.TensorProto_DataType(elem)]; nt != nil && nt.carrier == lang.F32 {
		if zp != nil {
			v = c.call1("add", nil, v, zp)
		}
		return c.roundNarrow(v, nt, saturate, 0)
	}
	bounds, ok := intRanges[onnxpb.TensorProto_DataType(elem)]
	dt, _ := DType(elem)
	if nt := narrowTypes[onnxpb.TensorProto_DataType(elem)]; nt != nil {
		bounds, ok = [2]int64{nt.lo, nt.hi}, true
	}
	if !ok {
		c.fail("quantization to %s is not defined", onnxpb.TensorProto_DataType(elem))
	}
	v = c.call1("round", nil, v)
	if zp != nil {
		v = c.call1("add", nil, v, zp)
	}
	v = c.call1("clip", []attr{floatA("min", float64(bounds[0])), floatA("max", float64(bounds[1]))}, v)
	return c.cast(v, dt)
}

// convQuantizeLinear is y = saturate(round(x / scale) + zero_point), per
// tensor, per axis or per block; the division is in the precision
// attribute's type, else x's and the scale's wider.
func convQuantizeLinear(c *nodeCtx) {
	x, scale := c.must(0), c.must(1)
	block := c.intAttr("block_size", 0)
	dt := lang.Promote(x.typ.DType, scale.typ.DType)
	if p := c.intAttr("precision", 0); p != 0 {
		var err error
		if dt, err = DType(int32(p)); err != nil || !dt.IsFloat() {
			c.fail("precision %s is not a float type", onnxpb.TensorProto_DataType(p))
		}
	}
	q := c.call1("div", nil, c.cast(x, dt), c.cast(c.quantParam(scale, x, block), dt))
	var zp *value
	if z := c.in(2); z != nil {
		zp = c.quantParam(z, x, block)
	}
	elem := quantizedElemType(c.node, c.imp.elemType)
	if elem == 0 {
		elem = c.elemTypeOf(2)
	}
	c.out(0, c.requantize(q, zp, elem, c.intAttr("saturate", 1) != 0))
}

// convDequantizeLinear is y = (x - zero_point) * scale, computed in f32
// (f64 for an f64 scale), given in output_dtype or the scale's type.
func convDequantizeLinear(c *nodeCtx) {
	x, scale := c.must(0), c.must(1)
	block := c.intAttr("block_size", 0)
	out := scale.typ.DType
	if od := c.intAttr("output_dtype", 0); od != 0 {
		var err error
		if out, err = DType(int32(od)); err != nil || !out.IsFloat() {
			c.fail("output_dtype %s is not a float type", onnxpb.TensorProto_DataType(od))
		}
	}
	work := lang.F32
	if out == lang.F64 || scale.typ.DType == lang.F64 {
		work = lang.F64
	}
	v := c.cast(x, work)
	if z := c.in(2); z != nil {
		v = c.call1("sub", nil, v, c.cast(c.quantParam(z, x, block), work))
	}
	v = c.call1("mul", nil, v, c.cast(c.quantParam(scale, x, block), work))
	c.out(0, c.cast(v, out))
}

// convDynamicQuantizeLinear quantizes x to uint8 over the range of its
// values and 0: scale = (max - min) / 255, zero point the rounded and
// saturated -min / scale.
func convDynamicQuantizeLinear(c *nodeCtx) {
	x := c.must(0)
	all := []attr{intsA("axes", nil), boolA("keepdims", false)}
	zero := constValue("", tensor.Scalar(x.typ.DType, 0), false)
	lo := c.call1("min", nil, c.call1("reduce_min", all, x), zero)
	hi := c.call1("max", nil, c.call1("reduce_max", all, x), zero)
	scale := c.call1("div", nil, c.call1("sub", nil, hi, lo), constValue("", tensor.Scalar(x.typ.DType, 255), false))
	u8 := int32(onnxpb.TensorProto_UINT8)
	zp := c.requantize(c.call1("div", nil, c.call1("neg", nil, lo), scale), nil, u8, true)
	c.out(0, c.requantize(c.call1("div", nil, x, scale), zp, u8, true))
	c.out(1, scale)
	c.out(2, zp)
}

// centred is v - zp in f64, zp shaped by shape (nil: a scalar).
func (c *nodeCtx) centred(v, zp *value, shape func(*value) *value) *value {
	v = c.cast(v, lang.F64)
	if zp == nil {
		return v
	}
	if shape != nil && rank(zp) > 0 {
		zp = shape(zp)
	}
	return c.call1("sub", nil, v, c.cast(zp, lang.F64))
}

// rowParam shapes a per-row parameter of a matrix product's left operand
// ([M] of a [.., M, K]) to [M, 1]; a scalar or one element stays.
func (c *nodeCtx) rowParam(p *value) *value {
	if rank(p) == 1 && c.dims(p)[0] != 1 {
		return c.call1("unsqueeze", []attr{intsA("axes", []int64{1})}, p)
	}
	return p
}

// convMatMulInteger is (a - a_zero_point) (b - b_zero_point) in i32,
// zero points per tensor, per row of a or per column of b.
func convMatMulInteger(c *nodeCtx) {
	a := c.centred(c.must(0), c.in(2), c.rowParam)
	b := c.centred(c.must(1), c.in(3), nil)
	c.out(0, c.cast(c.matmul(a, b), lang.I32))
}

// convQLinearMatMul requantizes the integer product of the centred
// operands by a_scale b_scale / y_scale (each per tensor, or per row of a
// and per column of b) to y_zero_point's type.
func convQLinearMatMul(c *nodeCtx) {
	a := c.centred(c.must(0), c.in(2), c.rowParam)
	b := c.centred(c.must(3), c.in(5), nil)
	scale := c.call1("div", nil, c.call1("mul", nil, c.rowParam(c.must(1)), c.must(4)), c.must(6))
	y := c.call1("mul", nil, c.matmul(a, b), c.cast(scale, lang.F64))
	c.out(0, c.requantize(y, c.in(7), c.elemTypeOf(7), true))
}

// channelParam shapes a per-output-channel parameter of a convolution
// weight ([M] of [M, C, *K]) to [M, 1, ...] of the weight's rank.
func (c *nodeCtx) channelParam(w *value) func(*value) *value {
	return func(p *value) *value {
		if rank(p) != 1 || c.dims(p)[0] == 1 {
			return p
		}
		return c.alongAxis(p, rank(w), 0)
	}
}

// convConvInteger is the convolution of the centred input and weight in
// i32 (a weight zero point per tensor or per output channel).
func convConvInteger(c *nodeCtx) {
	w := c.must(1)
	x := c.centred(c.must(0), c.in(2), nil)
	c.out(0, c.cast(c.conv(x, c.centred(w, c.in(3), c.channelParam(w))), lang.I32))
}

// convQLinearConv requantizes the integer convolution of the centred
// operands, plus the i32 bias, by x_scale w_scale / y_scale (w_scale per
// tensor or per output channel) to y_zero_point's type.
func convQLinearConv(c *nodeCtx) {
	w := c.must(3)
	x := c.centred(c.must(0), c.in(2), nil)
	y := c.conv(x, c.centred(w, c.in(5), c.channelParam(w)))
	if b := c.in(8); b != nil {
		y = c.call1("bias_add", []attr{intA("axis", 1)}, y, c.cast(b, lang.F64))
	}
	ws := c.must(4)
	if rank(ws) == 1 && c.dims(ws)[0] != 1 {
		ws = c.alongAxis(ws, rank(y)-1, 0) // [M, 1, ...] against y's channels
	}
	scale := c.call1("div", nil, c.call1("mul", nil, c.must(1), ws), c.must(6))
	y = c.call1("mul", nil, y, c.cast(scale, lang.F64))
	c.out(0, c.requantize(y, c.in(7), c.elemTypeOf(7), true))
}
