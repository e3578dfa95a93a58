package onnx

import (
	"fmt"
	"math"
	"strconv"

	"tofuc/frontend/onnx/onnxpb"
	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/runtime/tensor"
)

// nodeCtx is what a converter sees of the node it converts. Converters
// stop with fail, which run turns into the node's unsupported reason.
type nodeCtx struct {
	imp  *importer
	node *onnxpb.NodeProto
}

// nodeFailure carries a converter's reason out of run.
type nodeFailure struct{ reason string }

func (c *nodeCtx) run() (reason string) {
	defer func() {
		if r := recover(); r != nil {
			if f, ok := r.(nodeFailure); ok {
				reason = f.reason
			} else {
				// A converter missed a check on malformed input: report it
				// rather than crash.
				reason = fmt.Sprintf("internal error in the %s converter: %v", c.node.GetOpType(), r)
			}
		}
	}()
	if !c.symbolic() {
		converters[c.node.GetOpType()].convert(c)
	}
	for i := range c.node.GetOutput() {
		if c.wants(i) && c.imp.values[c.node.GetOutput()[i]] == nil {
			c.fail("output %d is not supported", i)
		}
	}
	return ""
}

func (c *nodeCtx) fail(format string, args ...any) {
	panic(nodeFailure{fmt.Sprintf(format, args...)})
}

// opset is the model's default-domain opset version.
func (c *nodeCtx) opset() int64 { return c.imp.opset }

// in returns input i, or nil when it is absent or empty.
func (c *nodeCtx) in(i int) *value {
	ins := c.node.GetInput()
	if i >= len(ins) || ins[i] == "" {
		return nil
	}
	return c.imp.values[ins[i]]
}

// must returns input i, failing when it is absent.
func (c *nodeCtx) must(i int) *value {
	v := c.in(i)
	if v == nil {
		c.fail("input %d is required", i)
	}
	return v
}

func (c *nodeCtx) numIn() int { return len(c.node.GetInput()) }

// wants reports whether output i is present and read by a node or the
// graph's output.
func (c *nodeCtx) wants(i int) bool {
	outs := c.node.GetOutput()
	return i < len(outs) && outs[i] != "" && c.imp.used[outs[i]]
}

// out binds output i to v; an unnamed intermediate takes the output's name.
func (c *nodeCtx) out(i int, v *value) {
	if !c.wants(i) {
		return
	}
	name := c.node.GetOutput()[i]
	if v.onnx == "" {
		v.onnx = name
	}
	c.imp.values[name] = v
}

// call adds a call of the stdlib operator op (or folds it).
func (c *nodeCtx) call(op string, attrs []attr, args ...*value) []*value {
	outs, err := c.imp.callStmt(op, attrs, args)
	if err != nil {
		c.fail("%v", err)
	}
	return outs
}

// call1 is call for an operator with one result.
func (c *nodeCtx) call1(op string, attrs []attr, args ...*value) *value {
	return c.call(op, attrs, args...)[0]
}

func (c *nodeCtx) attribute(name string) *onnxpb.AttributeProto { return nodeAttribute(c.node, name) }

// nodeAttribute is n's attribute called name, or nil.
func nodeAttribute(n *onnxpb.NodeProto, name string) *onnxpb.AttributeProto {
	for _, a := range n.GetAttribute() {
		if a.GetName() == name {
			return a
		}
	}
	return nil
}

func (c *nodeCtx) has(name string) bool { return c.attribute(name) != nil }

func (c *nodeCtx) intAttr(name string, def int64) int64 {
	if a := c.attribute(name); a != nil {
		return a.GetI()
	}
	return def
}

func (c *nodeCtx) floatAttr(name string, def float64) float64 {
	if a := c.attribute(name); a != nil {
		return float32Value(a.GetF())
	}
	return def
}

func (c *nodeCtx) intsAttr(name string, def []int64) []int64 {
	if a := c.attribute(name); a != nil {
		return a.GetInts()
	}
	return def
}

// floatsAttr reads a list of floats (nil when absent).
func (c *nodeCtx) floatsAttr(name string) []float64 {
	var out []float64
	if a := c.attribute(name); a != nil {
		for _, f := range a.GetFloats() {
			out = append(out, float32Value(f))
		}
	}
	return out
}

// stringsAttr reads a list of strings (nil when absent).
func (c *nodeCtx) stringsAttr(name string) []string {
	var out []string
	if a := c.attribute(name); a != nil {
		for _, s := range a.GetStrings() {
			out = append(out, string(s))
		}
	}
	return out
}

func (c *nodeCtx) stringAttr(name, def string) string {
	if a := c.attribute(name); a != nil {
		return string(a.GetS())
	}
	return def
}

// float32Value is the float64 whose shortest decimal form is that of the
// float32 f, so that the printed model and the folded constants agree.
func float32Value(f float32) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(float64(f), 'g', -1, 32), 64)
	return v
}

// known returns input i's value, which must be known at import.
func (c *nodeCtx) known(i int, what string) *tensor.Tensor {
	v := c.must(i)
	if v.sym != nil {
		c.fail("its %s (input %d) is the symbolic %s; it must be known at import", what, i, lang.ShapeString(v.sym))
	}
	if v.konst == nil {
		c.fail("its %s (input %d) must be known at import", what, i)
	}
	return v.konst
}

// knownInts returns input i as integers; absent gives nil.
func (c *nodeCtx) knownInts(i int, what string) []int64 {
	return knownEach(c, i, what, func(t *tensor.Tensor, k int) int64 {
		if t.DType.IsFloat() {
			return int64(t.F[k])
		}
		return t.I[k]
	})
}

// knownFloats returns input i as floats; absent gives nil.
func (c *nodeCtx) knownFloats(i int, what string) []float64 {
	return knownEach(c, i, what, (*tensor.Tensor).Flat)
}

// knownEach reads every element of input i, which must be known at
// import, with at; absent gives nil.
func knownEach[T any](c *nodeCtx, i int, what string, at func(t *tensor.Tensor, k int) T) []T {
	if c.in(i) == nil {
		return nil
	}
	t := c.known(i, what)
	out := make([]T, t.Len())
	for k := range out {
		out[k] = at(t, k)
	}
	return out
}

// intsMoved reads a list that was attribute name before opset since and
// is input i from it (Reshape's shape, Squeeze's axes, ...).
func (c *nodeCtx) intsMoved(name string, i int, since int64) []int64 {
	if c.opset() >= since {
		return c.knownInts(i, name)
	}
	return c.intsAttr(name, nil)
}

// knownFloat returns the scalar input i, or def when it is absent.
func (c *nodeCtx) knownFloat(i int, what string, def float64) float64 {
	if c.in(i) == nil {
		return def
	}
	t := c.known(i, what)
	if t.Len() != 1 {
		c.fail("its %s (input %d) must be a scalar", what, i)
	}
	return t.Flat(0)
}

// dims returns v's extents, which must be constants.
func (c *nodeCtx) dims(v *value) []int64 {
	out := make([]int64, rank(v))
	for i := range out {
		out[i] = c.extent(v, i)
	}
	return out
}

// extent is v's extent along axis, which must be a constant.
func (c *nodeCtx) extent(v *value, axis int) int64 {
	if axis < 0 || axis >= rank(v) {
		c.fail("%q has rank %d, no axis %d", v.onnx, rank(v), axis)
	}
	n, ok := v.typ.Shape[axis].IsConst()
	if !ok {
		c.fail("extent %d of %q is symbolic (%s); this conversion needs it known", axis, v.onnx, v.typ.Shape[axis])
	}
	return n
}

func rank(v *value) int { return len(v.typ.Shape) }

// axis normalises a possibly negative axis of a tensor of rank r.
func (c *nodeCtx) axis(a int64, r int) int64 {
	if a < -int64(r) || a >= int64(r) {
		c.fail("axis %d is out of range for rank %d", a, r)
	}
	if a < 0 {
		a += int64(r)
	}
	return a
}

func (c *nodeCtx) axes(as []int64, r int) []int64 {
	out := make([]int64, len(as))
	for i, a := range as {
		out[i] = c.axis(a, r)
	}
	return out
}

// zeros is a known tensor of zeros.
func zeros(dt lang.DType, shape []int64) *value {
	dims := make([]int, len(shape))
	for i, n := range shape {
		dims[i] = int(n)
	}
	return constValue("", tensor.New(dt, dims), false)
}

// scalar is a known rank-0 tensor of dtype dt.
func scalar(dt lang.DType, v float64) *value {
	return constValue("", tensor.Scalar(dt, v), false)
}

// Attribute value constructors.

func intA(name string, v int64) attr { return attr{name, ir.AttrValue{Kind: ir.AttrInt, Int: v}} }

func floatA(name string, v float64) attr {
	return attr{name, ir.AttrValue{Kind: ir.AttrFloat, Float: v}}
}

func boolA(name string, v bool) attr { return attr{name, ir.AttrValue{Kind: ir.AttrBool, Bool: v}} }

func stringA(name, v string) attr { return attr{name, ir.AttrValue{Kind: ir.AttrString, Str: v}} }

func intsA(name string, vs []int64) attr {
	l := ir.AttrValue{Kind: ir.AttrList, List: []ir.AttrValue{}}
	for _, v := range vs {
		l.List = append(l.List, ir.AttrValue{Kind: ir.AttrInt, Int: v})
	}
	return attr{name, l}
}

// clampInt64 keeps ONNX's "to the end" sentinels within int64 arithmetic.
func clampInt64(v int64) int64 {
	const big = math.MaxInt32
	return max(min(v, big), -big)
}
