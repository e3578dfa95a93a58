package onnx

import (
	"fmt"
	"math"
	"slices"

	"tofuc/frontend/onnx/onnxpb"
	"tofuc/lang"
	"tofuc/runtime/tensor"
)

// ONNX's element types narrower than TDL's (float8, float4, e8m0, 4- and
// 2-bit integers) are carried in a TDL dtype that holds every value of
// the type exactly: f32 for the floats, i8 or u8 for the integers. A
// carried tensor holds values of its type only: casts and quantization to
// it round (stdlib/lowbit.tdl), and reads of it decode. It takes the
// carrier's storage, not the type's (docs/decisions.md).

// The element types past FLOAT4E2M1, which onnxpb predates.
const (
	elemFloat8E8M0 onnxpb.TensorProto_DataType = 24
	elemUint2      onnxpb.TensorProto_DataType = 25
	elemInt2       onnxpb.TensorProto_DataType = 26
)

// narrowType is one of ONNX's narrow element types.
type narrowType struct {
	name    string
	carrier lang.DType
	bits    int // per element, as stored in a TensorProto
	// minifloat describes a float type but e8m0; nil for the others.
	minifloat *minifloat
	// lo and hi bound an integer type.
	lo, hi int64
	// decode maps a stored code (bits wide) to its value.
	decode func(code uint8) float64
}

// minifloat is a binary float format with `mantissa` fraction bits and
// normal exponents from minExponent; maxFinite is its largest value.
type minifloat struct {
	mantissa, minExponent int
	maxFinite             float64
	hasInf, hasNaN        bool
}

var narrowTypes = map[onnxpb.TensorProto_DataType]*narrowType{
	onnxpb.TensorProto_FLOAT8E4M3FN:   floatType("FLOAT8E4M3FN", 4, 3, 7, 448, false, func(c uint8) bool { return c&0x7f == 0x7f }),
	onnxpb.TensorProto_FLOAT8E4M3FNUZ: floatType("FLOAT8E4M3FNUZ", 4, 3, 8, 240, false, isFNUZNaN),
	onnxpb.TensorProto_FLOAT8E5M2:     floatType("FLOAT8E5M2", 5, 2, 15, 57344, true, nil),
	onnxpb.TensorProto_FLOAT8E5M2FNUZ: floatType("FLOAT8E5M2FNUZ", 5, 2, 16, 57344, false, isFNUZNaN),
	onnxpb.TensorProto_FLOAT4E2M1:     floatType("FLOAT4E2M1", 2, 1, 1, 6, false, nil),
	elemFloat8E8M0: {name: "FLOAT8E8M0", carrier: lang.F32, bits: 8, decode: func(c uint8) float64 {
		if c == 0xff {
			return math.NaN()
		}
		return math.Ldexp(1, int(c)-127)
	}},
	onnxpb.TensorProto_INT4:  intType("INT4", 4, true),
	onnxpb.TensorProto_UINT4: intType("UINT4", 4, false),
	elemInt2:                 intType("INT2", 2, true),
	elemUint2:                intType("UINT2", 2, false),
}

// isFNUZNaN is the one nan code of the FNUZ types, which have no -0.
func isFNUZNaN(c uint8) bool { return c == 0x80 }

// floatType is a float format of 1 sign, ebits exponent and mbits
// mantissa bits with the given bias. With ieee, an all-ones exponent is
// infinity or nan as in IEEE 754; otherwise isNaN, if any, picks the nan
// codes and every other code is finite.
func floatType(name string, ebits, mbits, bias int, maxFinite float64, ieee bool, isNaN func(uint8) bool) *narrowType {
	bits := 1 + ebits + mbits
	decode := func(c uint8) float64 {
		sign := 1.0
		if c>>(bits-1)&1 == 1 {
			sign = -1
		}
		e := int(c>>mbits) & (1<<ebits - 1)
		m := float64(c & (1<<mbits - 1))
		switch {
		case ieee && e == 1<<ebits-1 && m == 0:
			return math.Inf(int(sign))
		case ieee && e == 1<<ebits-1, isNaN != nil && isNaN(c):
			return math.NaN()
		case e == 0:
			return sign * math.Ldexp(m, 1-bias-mbits)
		}
		return sign * math.Ldexp(1+m/float64(int(1)<<mbits), e-bias)
	}
	mf := &minifloat{mantissa: mbits, minExponent: 1 - bias, maxFinite: maxFinite, hasInf: ieee, hasNaN: ieee || isNaN != nil}
	return &narrowType{name: name, carrier: lang.F32, bits: bits, minifloat: mf, decode: decode}
}

// intType is a signed or unsigned integer of the given width.
func intType(name string, bits int, signed bool) *narrowType {
	lo, hi := int64(0), int64(1)<<bits-1
	if signed {
		lo, hi = -(int64(1) << (bits - 1)), int64(1)<<(bits-1)-1
	}
	carrier := lang.U8
	if signed {
		carrier = lang.I8
	}
	decode := func(c uint8) float64 {
		v := int64(c)
		if signed && v > hi {
			v -= 1 << bits
		}
		return float64(v)
	}
	return &narrowType{name: name, carrier: carrier, bits: bits, lo: lo, hi: hi, decode: decode}
}

// decodeNarrow decodes a tensor of a narrow type from its stored codes:
// packed (4-bit types two to a byte, 2-bit four, low bits first) in
// raw_data or external data, or one byte to each element of int32_data.
func decodeNarrow(tp *onnxpb.TensorProto, nt *narrowType, dir string, shape []int, n int) (*tensor.Tensor, error) {
	size := (n*nt.bits + 7) / 8
	var packed []byte
	switch {
	case tp.GetDataLocation() == onnxpb.TensorProto_EXTERNAL:
		raw, err := externalData(tp, dir, size)
		if err != nil {
			return nil, err
		}
		packed = raw
	case tp.RawData != nil:
		if len(tp.RawData) != size {
			return nil, fmt.Errorf("raw data has %d bytes, shape %v of %s needs %d", len(tp.RawData), shape, nt.name, size)
		}
		packed = tp.RawData
	default:
		if len(tp.Int32Data) != size {
			return nil, fmt.Errorf("tensor %q has %d values in int32_data, shape %v of %s needs %d", tp.GetName(), len(tp.Int32Data), shape, nt.name, size)
		}
		packed = make([]byte, size)
		for i, v := range tp.Int32Data {
			packed[i] = byte(v)
		}
	}
	t := tensor.New(nt.carrier, shape)
	perByte := 8 / nt.bits
	mask := uint8(1<<nt.bits - 1)
	for i := range n {
		code := packed[i/perByte] >> (nt.bits * (i % perByte)) & mask
		t.SetFlat(i, nt.decode(code))
	}
	return t, nil
}

// roundNarrow rounds v, of any dtype, to the narrow type nt as ONNX's Cast
// does; saturate and e8m0Mode are Cast's attributes (e8m0Mode: 0 up, 1
// down, 2 nearest).
func (c *nodeCtx) roundNarrow(v *value, nt *narrowType, saturate bool, e8m0Mode int64) *value {
	switch {
	case nt.minifloat != nil:
		mf := nt.minifloat
		overflow, nanTo := math.NaN(), math.NaN()
		if mf.hasInf {
			overflow = math.Inf(1)
		}
		if !mf.hasNaN {
			// float4 always saturates. Its nan becomes -0 in ONNX's
			// reference, which made the node tests, though ONNX's
			// float4 page says 6; the reference is followed.
			saturate, nanTo = true, 0
		}
		// ONNX rounds through float32 first, as its reference does.
		return c.call1("round_minifloat", []attr{intA("mantissa", int64(mf.mantissa)), intA("min_exponent", int64(mf.minExponent)),
			floatA("max_finite", mf.maxFinite), boolA("saturate", saturate), floatA("overflow", overflow), floatA("nan_to", nanTo)}, c.cast(v, lang.F32))
	case nt.carrier == lang.F32:
		return c.call1("round_e8m0", []attr{intA("mode", e8m0Mode), boolA("saturate", saturate)}, c.cast(v, lang.F32))
	}
	// ONNX's int4 and int2 pages: floats round to the nearest integer,
	// ties to even, and every value then keeps its low bits (wraps).
	if v.typ.DType.IsFloat() {
		v = c.call1("round", nil, v)
	}
	span := constValue("", tensor.Scalar(lang.I64, float64(nt.hi-nt.lo+1)), false)
	lo := constValue("", tensor.Scalar(lang.I64, float64(nt.lo)), false)
	offset := c.call1("sub", nil, c.cast(v, lang.I64), lo)
	return c.cast(c.call1("add", nil, c.call1("mod", []attr{intA("fmod", 0)}, offset, span), lo), nt.carrier)
}

// movesData lists the operators whose output holds elements of their
// first input: a narrow type passes through them.
var movesData = map[string]bool{
	"Identity": true, "Reshape": true, "Transpose": true, "Squeeze": true, "Unsqueeze": true,
	"Flatten": true, "Slice": true, "Gather": true, "GatherElements": true, "GatherND": true,
	"Concat": true, "Expand": true, "Tile": true, "Split": true, "Pad": true, "DepthToSpace": true,
	"SpaceToDepth": true, "ReverseSequence": true, "Compress": true,
}

// elemType is the ONNX element type of the value named name, 0 if unknown:
// as declared (graph inputs and outputs, value_info, initializers), else
// as the node making it gives it (Constant, Cast, CastLike,
// QuantizeLinear, or an operator that moves data, from its input).
func (imp *importer) elemType(name string) int32 {
	if imp.elemTypes == nil {
		imp.indexElemTypes()
	}
	if et, ok := imp.elemTypes[name]; ok {
		return et
	}
	imp.elemTypes[name] = 0 // a cycle, in a malformed graph, ends here
	n := imp.producers[name]
	var et int32
	switch {
	case n == nil:
	case n.GetOpType() == "Constant":
		et = nodeAttribute(n, "value").GetT().GetDataType()
	case n.GetOpType() == "Cast":
		et = int32(nodeAttribute(n, "to").GetI())
	case n.GetOpType() == "CastLike" && len(n.GetInput()) > 1:
		et = imp.elemType(n.GetInput()[1])
	case n.GetOpType() == "QuantizeLinear":
		et = quantizedElemType(n, imp.elemType)
	case movesData[n.GetOpType()] && len(n.GetInput()) > 0:
		et = imp.elemType(n.GetInput()[0])
	case n.GetOpType() == "Where" && len(n.GetInput()) == 3:
		if et = imp.elemType(n.GetInput()[1]); et == 0 {
			et = imp.elemType(n.GetInput()[2])
		}
	default:
		et = imp.branchElemType(n, name)
	}
	imp.elemTypes[name] = et
	return et
}

// branchElemType is the element type of output name of a node with
// subgraphs (If, Loop, Scan): that of the same output of its first
// subgraph that knows it, or 0.
func (imp *importer) branchElemType(n *onnxpb.NodeProto, name string) int32 {
	k := slices.Index(n.GetOutput(), name)
	for _, sub := range subgraphs(n) {
		// Loop's and Scan's body outputs start with the condition (Loop)
		// or the carried values: only If's line up with the node's.
		if n.GetOpType() != "If" || k >= len(sub.GetOutput()) {
			break
		}
		if et := imp.elemType(sub.GetOutput()[k].GetName()); et != 0 {
			return et
		}
	}
	return 0
}

// indexElemTypes records the declared element types and the producing
// node of every value of the graph and of its subgraphs (If branches,
// loop bodies).
func (imp *importer) indexElemTypes() {
	imp.elemTypes, imp.producers = map[string]int32{}, map[string]*onnxpb.NodeProto{}
	var walk func(g *onnxpb.GraphProto)
	walk = func(g *onnxpb.GraphProto) {
		for _, vis := range [][]*onnxpb.ValueInfoProto{g.GetInput(), g.GetOutput(), g.GetValueInfo()} {
			for _, vi := range vis {
				if tt := vi.GetType().GetTensorType(); tt != nil && tt.GetElemType() != 0 {
					imp.elemTypes[vi.GetName()] = tt.GetElemType()
				}
			}
		}
		for _, tp := range g.GetInitializer() {
			imp.elemTypes[tp.GetName()] = tp.GetDataType()
		}
		for _, n := range g.GetNode() {
			for _, out := range n.GetOutput() {
				imp.producers[out] = n
			}
			for _, sub := range subgraphs(n) {
				walk(sub)
			}
		}
	}
	walk(imp.model.Proto.GetGraph())
}

// elemTypeOf is the ONNX element type of input i: as elemType finds it,
// else that of its TDL dtype (a narrow type is found by elemType or not
// at all: an unknown one would be its carrier's).
func (c *nodeCtx) elemTypeOf(i int) int32 {
	if et := c.imp.elemType(c.node.GetInput()[i]); et != 0 {
		return et
	}
	dt := c.must(i).typ.DType
	for et, d := range dtypeOf {
		if d == dt {
			return int32(et)
		}
	}
	return 0
}

// quantizedElemType is QuantizeLinear's output type: output_dtype, else
// the zero point's type (0 when elemType does not know it), else UINT8.
func quantizedElemType(n *onnxpb.NodeProto, elemType func(string) int32) int32 {
	if et := nodeAttribute(n, "output_dtype").GetI(); et != 0 {
		return int32(et)
	}
	if in := n.GetInput(); len(in) > 2 && in[2] != "" {
		return elemType(in[2])
	}
	return int32(onnxpb.TensorProto_UINT8)
}

// castTo converts v to the ONNX element type elem as Cast does.
func (c *nodeCtx) castTo(v *value, elem int32) *value {
	if nt := narrowTypes[onnxpb.TensorProto_DataType(elem)]; nt != nil {
		modes := map[string]int64{"up": 0, "down": 1, "nearest": 2}
		mode, ok := modes[c.stringAttr("round_mode", "up")]
		if !ok {
			c.fail("round_mode %q (only up, down and nearest are defined)", c.stringAttr("round_mode", "up"))
		}
		return c.roundNarrow(v, nt, c.intAttr("saturate", 1) != 0, mode)
	}
	dt, err := DType(elem)
	if err != nil {
		c.fail("%v", err)
	}
	return c.cast(v, dt)
}
