package onnx

import (
	"fmt"
	"math"

	"tofuc/lang"
	"tofuc/runtime/tensor"
)

var negInf, posInf = math.Inf(-1), math.Inf(1)

// convConstant binds the value attribute in any of its forms.
func convConstant(c *nodeCtx) {
	var t *tensor.Tensor
	switch {
	case c.has("value"):
		var err error
		t, err = Tensor(c.attribute("value").GetT(), c.imp.model.Dir())
		if err != nil {
			c.fail("value: %v", err)
		}
	case c.has("value_float"):
		t = tensor.Scalar(lang.F32, c.floatAttr("value_float", 0))
	case c.has("value_floats"):
		fs := c.attribute("value_floats").GetFloats()
		vals := make([]float64, len(fs))
		for i, f := range fs {
			vals[i] = float64(f)
		}
		t = tensor.FromFloats(lang.F32, []int{len(vals)}, vals)
	case c.has("value_int"):
		t = tensor.FromInts(lang.I64, nil, []int64{c.intAttr("value_int", 0)})
	case c.has("value_ints"):
		is := c.intsAttr("value_ints", nil)
		t = tensor.FromInts(lang.I64, []int{len(is)}, is)
	default:
		c.fail("only tensor, float and int values are supported")
	}
	c.out(0, constValue("", t, false))
}

func convConstantOfShape(c *nodeCtx) {
	shape := c.knownInts(0, "shape")
	dims, n, err := tensorShape(shape)
	if err == nil && int64(n) > c.imp.foldLimit() {
		err = fmt.Errorf("%d elements are more than %d", n, c.imp.foldLimit())
	}
	if err != nil {
		c.fail("shape: %v", err)
	}
	fill := tensor.Scalar(lang.F32, 0)
	if c.has("value") {
		fill, err = Tensor(c.attribute("value").GetT(), c.imp.model.Dir())
		if err != nil || fill.Len() != 1 {
			c.fail("value must be a one-element tensor")
		}
	}
	t := tensor.New(fill.DType, dims)
	for i := range t.Len() {
		t.SetFlat(i, fill.Flat(0))
	}
	c.out(0, constValue("", t, false))
}

// convShape folds the shape of a tensor
// (a symbolic extent makes a symbolic shape value).
func convShape(c *nodeCtx) {
	dims := c.must(0).typ.Shape
	r := int64(len(dims))
	start, end := c.intAttr("start", 0), c.intAttr("end", r)
	start, end = clampAxis(start, r), clampAxis(end, r)
	if start >= end {
		start, end = 0, 0
	}
	c.out(0, symValue(dims[start:end], false))
}

// clampAxis resolves a negative Shape bound and clamps it to [0, r].
func clampAxis(a, r int64) int64 {
	if a < 0 {
		a += r
	}
	return min(max(a, 0), r)
}

func convSize(c *nodeCtx) {
	n := lang.Const(1)
	for _, d := range c.must(0).typ.Shape {
		n = n.Mul(d)
	}
	c.out(0, symValue([]lang.Dim{n}, true))
}

// convRange folds Range, whose inputs are known scalars.
func convRange(c *nodeCtx) {
	start, limit, delta := c.known(0, "start"), c.known(1, "limit"), c.known(2, "delta")
	if start.Len() != 1 || limit.Len() != 1 || delta.Len() != 1 || delta.Flat(0) == 0 {
		c.fail("start, limit and delta must be scalars, delta nonzero")
	}
	s, l, d := start.Flat(0), limit.Flat(0), delta.Flat(0)
	n := max(math.Ceil((l-s)/d), 0)
	if math.IsNaN(n) || math.IsInf(s, 0) || math.IsInf(d, 0) {
		c.fail("start %v, limit %v and delta %v do not give a finite range", s, l, d)
	}
	if n > float64(c.imp.foldLimit()) {
		c.fail("%.0f elements are too many", n)
	}
	t := tensor.New(start.DType, []int{int(n)})
	for i := range int(n) {
		t.SetFlat(i, s+float64(i)*d)
	}
	c.out(0, constValue("", t, false))
}

func convCast(c *nodeCtx) { c.out(0, c.castTo(c.must(0), int32(c.intAttr("to", 0)))) }

// convCastLike casts to the element type of input 1, which, for a narrow
// type, is not its carrier's (narrow.go).
func convCastLike(c *nodeCtx) {
	c.out(0, c.castTo(c.must(0), c.elemTypeOf(1)))
}

// castTensor converts t to dt as ONNX Cast does: floats to integers
// truncate, anything nonzero is true.
func castTensor(t *tensor.Tensor, dt lang.DType) *tensor.Tensor {
	if !t.DType.IsFloat() && !dt.IsFloat() {
		return tensor.FromInts(dt, t.Shape, t.I)
	}
	vals := make([]float64, t.Len())
	for i := range vals {
		vals[i] = t.Flat(i)
	}
	return tensor.FromFloats(dt, t.Shape, vals)
}

// convDropout is the identity at inference, and in training with a
// ratio of 0 (torchvision's Swin calls F.dropout(p=0.0)); its mask is
// all true.
func convDropout(c *nodeCtx) {
	if c.in(2) != nil && c.knownFloat(2, "training_mode", 0) != 0 {
		if ratio := c.knownFloat(1, "ratio", 0.5); ratio != 0 {
			c.fail("training_mode = true with ratio %g draws random numbers (only inference, or a ratio of 0, is supported)", ratio)
		}
	}
	if c.intAttr("is_test", 1) == 0 && c.opset() < 7 {
		c.fail("is_test = 0 (training) is not supported")
	}
	x := c.must(0)
	c.out(0, x)
	if c.wants(1) {
		c.out(1, c.dropoutMask(x))
	}
}

func (c *nodeCtx) dropoutMask(x *value) *value {
	return c.cast(c.call("dropout_with_mask", nil, x)[1], lang.Bool)
}
