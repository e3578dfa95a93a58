package onnx

import (
	"tofuc/analysis/check"
	"tofuc/lang"
	"tofuc/runtime/tensor"
)

// Symbolic shape values. A model with a symbolic batch computes shapes
// from Shape (x.view(x.size(0), -1) exports as Shape, Gather, Unsqueeze,
// Concat, Reshape). Such an integer vector is known at import except for
// its symbolic elements: it is a value with sym set, computed here by the
// few operators that manipulate shapes, and read by Reshape, which turns
// a symbolic element into 0 (copy the input's extent) or -1 (infer it).

// symOps compute on symbolic shape values.
var symOps = map[string]func(c *nodeCtx, ins [][]lang.Dim, scalar []bool) ([]lang.Dim, bool){
	"Identity": func(_ *nodeCtx, ins [][]lang.Dim, scalar []bool) ([]lang.Dim, bool) { return ins[0], scalar[0] },
	"Cast":     func(_ *nodeCtx, ins [][]lang.Dim, scalar []bool) ([]lang.Dim, bool) { return ins[0], scalar[0] },
	"Gather":   symGather,
	"Unsqueeze": func(c *nodeCtx, ins [][]lang.Dim, scalar []bool) ([]lang.Dim, bool) {
		if !scalar[0] {
			c.fail("unsqueezing a symbolic shape of rank 1 is not supported")
		}
		return ins[0], false
	},
	"Squeeze": func(c *nodeCtx, ins [][]lang.Dim, scalar []bool) ([]lang.Dim, bool) {
		if scalar[0] || len(ins[0]) != 1 {
			c.fail("squeezing a symbolic shape of %d elements is not supported", len(ins[0]))
		}
		return ins[0], true
	},
	"Concat": func(c *nodeCtx, ins [][]lang.Dim, _ []bool) ([]lang.Dim, bool) {
		var out []lang.Dim
		for _, in := range ins {
			out = append(out, in...)
		}
		return out, false
	},
	"Slice": symSlice,
	"Add":   symArith(exact(lang.Dim.Add)),
	"Sub":   symArith(exact(lang.Dim.Sub)),
	"Mul":   symArith(exact(lang.Dim.Mul)),
	"Div":   symArith(floorDiv),
}

// symbolic computes a node on symbolic shape values, reporting false when
// none of its inputs is one (the node is converted as usual).
func (c *nodeCtx) symbolic() bool {
	op, ok := symOps[c.node.GetOpType()]
	if !ok {
		return false
	}
	var ins [][]lang.Dim
	var scalar []bool
	any := false
	for i := range c.numIn() {
		v := c.in(i)
		if v == nil {
			ins, scalar = append(ins, nil), append(scalar, false)
			continue
		}
		dims, ok := symDims(v)
		if !ok {
			return false
		}
		any = any || v.sym != nil
		ins, scalar = append(ins, dims), append(scalar, len(v.typ.Shape) == 0)
	}
	if !any {
		return false
	}
	out, isScalar := op(c, ins, scalar)
	c.out(0, symValue(out, isScalar))
	return true
}

// symDims reads a symbolic shape value or a known integer vector.
func symDims(v *value) ([]lang.Dim, bool) {
	if v.sym != nil {
		return v.sym, true
	}
	if v.konst == nil || v.konst.DType.IsFloat() || len(v.konst.Shape) > 1 {
		return nil, false
	}
	dims := make([]lang.Dim, len(v.konst.I))
	for i, n := range v.konst.I {
		dims[i] = lang.Const(n)
	}
	return dims, true
}

// symValue is a shape value: known when every element is a constant.
func symValue(dims []lang.Dim, scalar bool) *value {
	vals := make([]int64, len(dims))
	known := true
	for i, d := range dims {
		vals[i], known = d.IsConst()
		if !known {
			break
		}
	}
	var shape []int
	if !scalar {
		shape = []int{len(dims)}
	}
	if known {
		return constValue("", tensor.FromInts(lang.I64, shape, vals), false)
	}
	typ := check.TensorType{DType: lang.I64}
	if !scalar {
		typ.Shape = []lang.Dim{lang.Const(int64(len(dims)))}
	}
	return &value{typ: typ, sym: dims}
}

func symGather(c *nodeCtx, ins [][]lang.Dim, scalar []bool) ([]lang.Dim, bool) {
	if len(ins) != 2 {
		c.fail("Gather needs data and indices")
	}
	if c.intAttr("axis", 0) != 0 || scalar[0] {
		c.fail("gathering from a symbolic shape along axis %d", c.intAttr("axis", 0))
	}
	var out []lang.Dim
	for _, idx := range ins[1] {
		k, ok := idx.IsConst()
		n := int64(len(ins[0]))
		if !ok || k < -n || k >= n {
			c.fail("index %s is out of range for a shape of %d elements", idx, n)
		}
		out = append(out, ins[0][(k+n)%n])
	}
	return out, scalar[1]
}

func symSlice(c *nodeCtx, ins [][]lang.Dim, _ []bool) ([]lang.Dim, bool) {
	// bound reads the one element of a bound: input i from opset 10, the
	// attribute name before; present reports whether it was given.
	bound := func(i int, name string) (k int64, present bool) {
		var vals []lang.Dim
		if c.opset() >= 10 {
			if i < len(ins) {
				vals = ins[i]
			}
		} else {
			for _, v := range c.intsAttr(name, nil) {
				vals = append(vals, lang.Const(v))
			}
		}
		if len(vals) == 0 {
			return 0, false
		}
		k, ok := vals[0].IsConst()
		if !ok || len(vals) != 1 {
			c.fail("slice bounds of a symbolic shape must be single constants")
		}
		return k, true
	}
	if step, ok := bound(4, "steps"); ok && step != 1 {
		c.fail("slicing a symbolic shape with step %d", step)
	}
	if axis, ok := bound(3, "axes"); ok && axis != 0 && axis != -1 {
		c.fail("slicing a symbolic shape along axis %d", axis)
	}
	start, okStart := bound(1, "starts")
	end, okEnd := bound(2, "ends")
	if !okStart || !okEnd {
		c.fail("slicing a symbolic shape needs starts and ends")
	}
	n := int64(len(ins[0]))
	start, end = clampAxis(clampInt64(start), n), clampAxis(clampInt64(end), n)
	if start >= end {
		return nil, false
	}
	return ins[0][start:end], false
}

// symArith applies an element-wise integer operation with broadcasting of
// single elements; f reports false when it cannot.
func symArith(f func(a, b lang.Dim) (lang.Dim, bool)) func(*nodeCtx, [][]lang.Dim, []bool) ([]lang.Dim, bool) {
	return func(c *nodeCtx, ins [][]lang.Dim, scalar []bool) ([]lang.Dim, bool) {
		if len(ins) != 2 || len(ins[0]) == 0 || len(ins[1]) == 0 {
			c.fail("%s needs two non-empty operands", c.node.GetOpType())
		}
		a, b := ins[0], ins[1]
		n := max(len(a), len(b))
		if len(a) != n && len(a) != 1 || len(b) != n && len(b) != 1 {
			c.fail("shapes of %d and %d elements do not broadcast", len(a), len(b))
		}
		out := make([]lang.Dim, n)
		for i := range n {
			x, y := a[min(i, len(a)-1)], b[min(i, len(b)-1)]
			var ok bool
			if out[i], ok = f(x, y); !ok {
				c.fail("%s of the symbolic %s and %s", c.node.GetOpType(), x, y)
			}
		}
		return out, scalar[0] && scalar[1]
	}
}

func exact(f func(a, b lang.Dim) lang.Dim) func(a, b lang.Dim) (lang.Dim, bool) {
	return func(a, b lang.Dim) (lang.Dim, bool) { return f(a, b), true }
}

// floorDiv divides by a positive constant (shapes are not negative, so
// ONNX's truncating integer division is the floor).
func floorDiv(a, b lang.Dim) (lang.Dim, bool) {
	k, ok := b.IsConst()
	if !ok || k <= 0 {
		return lang.Dim{}, false
	}
	return a.FloorDiv(k), true
}

// reshapeTarget turns a symbolic Reshape target into stdlib reshape's
// form: an element equal to x's extent at the same position copies it
// (0), and one other symbolic element is inferred (-1).
func (c *nodeCtx) reshapeTarget(x *value, dims []lang.Dim) []int64 {
	out := make([]int64, len(dims))
	inferred := false
	for i, d := range dims {
		if k, ok := d.IsConst(); ok {
			inferred = inferred || k == -1
			out[i] = k
			continue
		}
		if i < rank(x) && d.Equal(x.typ.Shape[i]) {
			out[i] = 0
			continue
		}
		if inferred {
			c.fail("the target shape %s has more than one extent to infer", lang.ShapeString(dims))
		}
		out[i], inferred = -1, true
	}
	return out
}
