package check

import (
	"sort"

	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/lang/suggest"
)

// Compile-time functions: they compute attribute values, shapes, and the
// index lists of rank-polymorphic operators. List functions work on packs of
// dimensions and on packs of index expressions alike.

type builtin struct {
	arity int // -1: variadic
	fn    func(ev *evaluator, c *lang.Call, args []cval) cval
}

var builtins map[string]builtin

func init() {
	builtins = map[string]builtin{
		"max":      {2, func(ev *evaluator, c *lang.Call, a []cval) cval { return ev.minmax(c, a, true) }},
		"min":      {2, func(ev *evaluator, c *lang.Call, a []cval) cval { return ev.minmax(c, a, false) }},
		"select":   {3, nil}, // lazy: see call
		"len":      {1, func(ev *evaluator, c *lang.Call, a []cval) cval { return intVal(int64(len(ev.list(c, a[0])))) }},
		"prod":     {1, biProd},
		"ceil_div": {2, biCeilDiv},
		"int":      {1, biInt},
		"float": {1, func(ev *evaluator, c *lang.Call, a []cval) cval {
			return cval{kind: cFloat, f: ev.toFloat(c.Pos, a[0])}
		}},
		"broadcast":    {-1, biBroadcast},
		"pick":         {2, func(ev *evaluator, c *lang.Call, a []cval) cval { return biPickDrop(ev, c, a, true) }},
		"drop":         {2, func(ev *evaluator, c *lang.Call, a []cval) cval { return biPickDrop(ev, c, a, false) }},
		"reduce_dims":  {3, biReduceDims},
		"reduce_index": {4, biReduceIndex},
		"permute":      {2, func(ev *evaluator, c *lang.Call, a []cval) cval { return biPermute(ev, c, a, false) }},
		"unpermute":    {2, func(ev *evaluator, c *lang.Call, a []cval) cval { return biPermute(ev, c, a, true) }},
		"pad_dims":     {2, biPadDims},
		"pad_index":    {2, biPadIndex},
		"slice_dims":   {5, biSliceDims},
		"slice_index":  {6, biSliceIndex},
		"reshape_dims": {2, biReshapeDims},
		"ravel":        {2, biRavel},
		"unravel":      {2, biUnravel},
		"mul_each":     {2, biMulEach},
		"mod_each":     {2, biModEach},
		"range":        {1, biRange},
	}
}

func (ev *evaluator) call(c *lang.Call) cval {
	b, ok := builtins[c.Name]
	if !ok || c.Opaque {
		ev.fail(c.Pos, "%s is not a compile-time function%s", c.Name, suggest.DidYouMean(c.Name, builtinNames()))
	}
	if len(c.Attrs) > 0 {
		ev.fail(c.Pos, "%s takes no attributes", c.Name)
	}
	if b.arity >= 0 && len(c.Args) != b.arity {
		ev.fail(c.Pos, "%s takes %d arguments, found %d", c.Name, b.arity, len(c.Args))
	}
	if c.Name == "select" {
		// Lazy, so that the branch not taken may be invalid (an index
		// into an empty list).
		if ev.boolOf(c, ev.eval(c.Args[0])) {
			return ev.eval(c.Args[1])
		}
		return ev.eval(c.Args[2])
	}
	args := make([]cval, len(c.Args))
	for i, a := range c.Args {
		args[i] = ev.eval(a)
	}
	return b.fn(ev, c, args)
}

func builtinNames() []string {
	out := make([]string, 0, len(builtins))
	for n := range builtins {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (ev *evaluator) list(c *lang.Call, v cval) []cval {
	if v.kind != cList {
		ev.fail(c.Pos, "%s expects a list or pack, found %s %s", c.Name, v.kind, v)
	}
	return v.list
}

func (ev *evaluator) intList(c *lang.Call, v cval) []int64 {
	ns, ok := v.ints()
	if !ok {
		ev.fail(c.Pos, "%s expects a list of constant integers, found %s", c.Name, v)
	}
	return ns
}

func (ev *evaluator) dimOf(c *lang.Call, v cval) lang.Dim {
	if v.kind != cInt {
		ev.fail(c.Pos, "%s expects an integer, found %s %s", c.Name, v.kind, v)
	}
	return v.dim
}

func (ev *evaluator) boolOf(c *lang.Call, v cval) bool {
	if v.kind != cBool {
		if n, ok := v.constInt(); ok {
			return n != 0
		}
		ev.fail(c.Pos, "%s expects a bool, found %s %s", c.Name, v.kind, v)
	}
	return v.b
}

func (ev *evaluator) minmax(c *lang.Call, a []cval, isMax bool) cval {
	if a[0].kind == cIndex || a[1].kind == cIndex {
		ev.fail(c.Pos, "%s of index variables is not a compile-time value", c.Name)
	}
	if a[0].kind == cInt && a[1].kind == cInt {
		if isMax {
			return dimVal(a[0].dim.Max(a[1].dim))
		}
		return dimVal(a[0].dim.Min(a[1].dim))
	}
	x, y := ev.toFloat(c.Pos, a[0]), ev.toFloat(c.Pos, a[1])
	if (x > y) == isMax {
		return cval{kind: cFloat, f: x}
	}
	return cval{kind: cFloat, f: y}
}

func biProd(ev *evaluator, c *lang.Call, a []cval) cval {
	p := lang.Const(1)
	for _, e := range ev.list(c, a[0]) {
		p = p.Mul(ev.dimOf(c, e))
	}
	return dimVal(p)
}

func biCeilDiv(ev *evaluator, c *lang.Call, a []cval) cval {
	d := ev.dimOf(c, a[1])
	n, ok := d.IsConst()
	if !ok || n <= 0 {
		ev.fail(c.Pos, "ceil_div needs a positive constant divisor, found %s", d)
	}
	return dimVal(ev.dimOf(c, a[0]).CeilDiv(n))
}

func biInt(ev *evaluator, c *lang.Call, a []cval) cval {
	switch a[0].kind {
	case cInt:
		return a[0]
	case cFloat:
		return intVal(int64(a[0].f))
	case cBool:
		if a[0].b {
			return intVal(1)
		}
		return intVal(0)
	}
	ev.fail(c.Pos, "int() of a %s", a[0].kind)
	return cval{}
}

// normAxes maps negative axes to rank+axis and, when all is set, an empty
// list to every axis; it rejects axes out of range and duplicates.
func (ev *evaluator) normAxes(c *lang.Call, axes []int64, rank int, emptyAll bool) []int {
	if len(axes) == 0 && emptyAll {
		out := make([]int, rank)
		for i := range out {
			out[i] = i
		}
		return out
	}
	seen := map[int]bool{}
	out := make([]int, len(axes))
	for i, a := range axes {
		if a < 0 {
			a += int64(rank)
		}
		if a < 0 || a >= int64(rank) {
			ev.fail(c.Pos, "%s: axis %d out of range for rank %d", c.Name, axes[i], rank)
		}
		if seen[int(a)] {
			ev.fail(c.Pos, "%s: axis %d repeated", c.Name, a)
		}
		seen[int(a)] = true
		out[i] = int(a)
	}
	return out
}

// broadcast(A, B, ...) is NumPy broadcasting of shapes (right-aligned; a
// dimension of constant 1 stretches). Two different symbolic dimensions
// cannot be broadcast.
func biBroadcast(ev *evaluator, c *lang.Call, a []cval) cval {
	var out []lang.Dim
	for _, v := range a {
		ds, ok := v.dims()
		if !ok {
			ev.fail(c.Pos, "broadcast expects shapes, found %s", v)
		}
		out = ev.broadcast2(c, out, ds)
	}
	return dimsVal(out)
}

func (ev *evaluator) broadcast2(c *lang.Call, a, b []lang.Dim) []lang.Dim {
	n := max(len(a), len(b))
	out := make([]lang.Dim, n)
	for i := range n {
		var x, y lang.Dim = lang.Const(1), lang.Const(1)
		if j := i - (n - len(a)); j >= 0 {
			x = a[j]
		}
		if j := i - (n - len(b)); j >= 0 {
			y = b[j]
		}
		switch {
		case x.Equal(y):
			out[i] = x
		case isOne(x):
			out[i] = y
		case isOne(y):
			out[i] = x
		default:
			ev.fail(c.Pos, "cannot broadcast %s with %s: dimension %s against %s", lang.ShapeString(a), lang.ShapeString(b), x, y)
		}
	}
	return out
}

func isOne(d lang.Dim) bool { n, ok := d.IsConst(); return ok && n == 1 }

func biPickDrop(ev *evaluator, c *lang.Call, a []cval, pick bool) cval {
	l := ev.list(c, a[0])
	axes := ev.normAxes(c, ev.intList(c, a[1]), len(l), true)
	in := map[int]bool{}
	for _, x := range axes {
		in[x] = true
	}
	out := cval{kind: cList}
	if pick {
		for _, x := range axes {
			out.list = append(out.list, l[x])
		}
		return out
	}
	for i, e := range l {
		if !in[i] {
			out.list = append(out.list, e)
		}
	}
	return out
}

// reduce_dims(S, axes, keepdims): S with the reduced axes set to 1, or
// removed when keepdims is false. An empty axes list reduces every axis.
func biReduceDims(ev *evaluator, c *lang.Call, a []cval) cval {
	l := ev.list(c, a[0])
	axes := ev.normAxes(c, ev.intList(c, a[1]), len(l), true)
	keep := ev.boolOf(c, a[2])
	reduced := map[int]bool{}
	for _, x := range axes {
		reduced[x] = true
	}
	out := cval{kind: cList}
	for i, e := range l {
		switch {
		case !reduced[i]:
			out.list = append(out.list, e)
		case keep:
			out.list = append(out.list, intVal(1))
		}
	}
	return out
}

// reduce_index(o, r, axes, keepdims) rebuilds an input index from an output
// index o and the reduction variables r (one per reduced axis).
func biReduceIndex(ev *evaluator, c *lang.Call, a []cval) cval {
	o, r := ev.list(c, a[0]), ev.list(c, a[1])
	keep := ev.boolOf(c, a[3])
	rank := len(o)
	if !keep {
		rank += len(r)
	}
	axes := ev.normAxes(c, ev.intList(c, a[2]), rank, true)
	if len(axes) != len(r) {
		ev.fail(c.Pos, "reduce_index: %d reduction variables for %d axes", len(r), len(axes))
	}
	slot := map[int]int{}
	for j, x := range axes {
		slot[x] = j
	}
	out := cval{kind: cList}
	next := 0
	for i := range rank {
		if j, ok := slot[i]; ok {
			out.list = append(out.list, r[j])
			if keep {
				next++
			}
			continue
		}
		out.list = append(out.list, o[next])
		next++
	}
	return out
}

// permute(S, perm)[i] = S[perm[i]]; unpermute(o, perm) is its inverse. An
// empty perm reverses.
func biPermute(ev *evaluator, c *lang.Call, a []cval, inverse bool) cval {
	l := ev.list(c, a[0])
	perm := ev.intList(c, a[1])
	if len(perm) == 0 {
		for i := len(l) - 1; i >= 0; i-- {
			perm = append(perm, int64(i))
		}
	}
	if len(perm) != len(l) {
		ev.fail(c.Pos, "%s: a permutation of %d axes for rank %d", c.Name, len(perm), len(l))
	}
	p := ev.normAxes(c, perm, len(l), false)
	out := cval{kind: cList, list: make([]cval, len(l))}
	for i, src := range p {
		if inverse {
			out.list[src] = l[i]
		} else {
			out.list[i] = l[src]
		}
	}
	return out
}

// pads lists the begin pads of every axis, then the end pads (ONNX order).
func (ev *evaluator) pads(c *lang.Call, v cval, rank int) []int64 {
	p := ev.intList(c, v)
	if len(p) == 0 {
		return make([]int64, 2*rank)
	}
	if len(p) != 2*rank {
		ev.fail(c.Pos, "%s: %d pads for rank %d (expected %d)", c.Name, len(p), rank, 2*rank)
	}
	return p
}

func biPadDims(ev *evaluator, c *lang.Call, a []cval) cval {
	l := ev.list(c, a[0])
	p := ev.pads(c, a[1], len(l))
	out := cval{kind: cList}
	for i, e := range l {
		out.list = append(out.list, dimVal(ev.dimOf(c, e).Add(lang.Const(p[i]+p[i+len(l)]))))
	}
	return out
}

func biPadIndex(ev *evaluator, c *lang.Call, a []cval) cval {
	l := ev.list(c, a[0])
	p := ev.pads(c, a[1], len(l))
	out := cval{kind: cList}
	for i, e := range l {
		out.list = append(out.list, addConst(ev, c, e, -p[i]))
	}
	return out
}

// addConst adds a constant to an integer or an index expression.
func addConst(ev *evaluator, c *lang.Call, v cval, k int64) cval {
	if v.kind == cIndex {
		return idxVal(ir.IndexAdd(v.exprs[0], ir.IndexConst(k)))
	}
	return dimVal(ev.dimOf(c, v).Add(lang.Const(k)))
}

type sliceSpec struct {
	start lang.Dim
	step  int64
	count lang.Dim
	whole bool // the axis is not sliced
}

// slices resolves ONNX Slice parameters. With constant extents, negative
// and out-of-range starts and ends follow ONNX's clamping; with symbolic
// extents, starts and ends must be non-negative and the step positive.
func (ev *evaluator) slices(c *lang.Call, S []cval, starts, ends, axesV, stepsV cval) []sliceSpec {
	st, en := ev.intList(c, starts), ev.intList(c, ends)
	axesIn, steps := ev.intList(c, axesV), ev.intList(c, stepsV)
	if len(axesIn) == 0 {
		for i := range st {
			axesIn = append(axesIn, int64(i))
		}
	}
	if len(steps) == 0 {
		steps = make([]int64, len(st))
		for i := range steps {
			steps[i] = 1
		}
	}
	if len(en) != len(st) || len(axesIn) != len(st) || len(steps) != len(st) {
		ev.fail(c.Pos, "slice: starts, ends, axes and steps must have the same length")
	}
	axes := ev.normAxes(c, axesIn, len(S), false)
	specs := make([]sliceSpec, len(S))
	for i := range specs {
		specs[i] = sliceSpec{whole: true}
	}
	for j, ax := range axes {
		if steps[j] == 0 {
			ev.fail(c.Pos, "slice: step 0")
		}
		specs[ax] = ev.sliceAxis(c, ev.dimOf(c, S[ax]), st[j], en[j], steps[j])
	}
	return specs
}

// bigEnd is where an ONNX end means "to the end" (INT_MAX and the like).
const bigEnd = 1 << 31

func (ev *evaluator) sliceAxis(c *lang.Call, extent lang.Dim, s, e, k int64) sliceSpec {
	n, constant := extent.IsConst()
	if !constant {
		if s < 0 || e < 0 || k < 0 {
			ev.fail(c.Pos, "slice of the symbolic extent %s needs non-negative starts and ends and a positive step", extent)
		}
		start := lang.Const(s).Min(extent)
		end := extent
		if e < bigEnd {
			end = lang.Const(e).Min(extent)
		}
		return sliceSpec{start: start, step: k, count: end.Sub(start).CeilDiv(k).Max(lang.Const(0))}
	}
	s, e = clampSlice(s, n, k), clampSlice(e, n, k)
	count := int64(0)
	if k > 0 && e > s {
		count = (e - s + k - 1) / k
	} else if k < 0 && s > e {
		count = (s - e - k - 1) / -k
	}
	return sliceSpec{start: lang.Const(s), step: k, count: lang.Const(count)}
}

// clampSlice applies ONNX's rules for out-of-range starts and ends.
func clampSlice(x, n, step int64) int64 {
	if x < 0 {
		x += n
	}
	if step > 0 {
		return min(max(x, 0), n)
	}
	return min(max(x, -1), n-1)
}

func biSliceDims(ev *evaluator, c *lang.Call, a []cval) cval {
	S := ev.list(c, a[0])
	specs := ev.slices(c, S, a[1], a[2], a[3], a[4])
	out := cval{kind: cList}
	for i, s := range specs {
		if s.whole {
			out.list = append(out.list, S[i])
		} else {
			out.list = append(out.list, dimVal(s.count))
		}
	}
	return out
}

func biSliceIndex(ev *evaluator, c *lang.Call, a []cval) cval {
	o, S := ev.list(c, a[0]), ev.list(c, a[1])
	if len(o) != len(S) {
		ev.fail(c.Pos, "slice_index: index of rank %d for a shape of rank %d", len(o), len(S))
	}
	specs := ev.slices(c, S, a[2], a[3], a[4], a[5])
	out := cval{kind: cList}
	for i, s := range specs {
		e := ev.index(c, o[i])
		if !s.whole {
			e = ir.IndexAdd(ir.IndexMul(e, s.step), ir.IndexDim(s.start))
		}
		out.list = append(out.list, idxVal(e))
	}
	return out
}

// reshape_dims(S, shape) resolves ONNX Reshape's target: 0 copies the input
// extent, one -1 takes what is left.
func biReshapeDims(ev *evaluator, c *lang.Call, a []cval) cval {
	S := ev.list(c, a[0])
	target := ev.intList(c, a[1])
	total := lang.Const(1)
	for _, d := range S {
		total = total.Mul(ev.dimOf(c, d))
	}
	known := lang.Const(1)
	// The extents not copied, divided by the constant target extents, are
	// what -1 takes: copies cancel symbolic extents exactly.
	rest, constant := lang.Const(1), int64(1)
	copied := map[int]bool{}
	infer := -1
	out := make([]lang.Dim, len(target))
	for i, t := range target {
		switch {
		case t == 0 && i < len(S):
			out[i] = S[i].dim
			copied[i] = true
		case t == -1 && infer < 0:
			infer = i
			continue
		case t > 0:
			out[i] = lang.Const(t)
			constant *= t
		default:
			ev.fail(c.Pos, "reshape: bad target extent %d in %v", t, target)
		}
		known = known.Mul(out[i])
	}
	for i, d := range S {
		if !copied[i] {
			rest = rest.Mul(ev.dimOf(c, d))
		}
	}
	if infer >= 0 {
		if constant == 0 {
			ev.fail(c.Pos, "reshape: cannot infer the -1 extent of %v from %s", target, lang.ShapeString(dimsOf(S)))
		}
		out[infer] = rest.FloorDiv(constant)
		known = known.Mul(out[infer])
	}
	if !known.Equal(total) {
		ev.fail(c.Pos, "reshape: %s has %s elements, the target %v has %s", lang.ShapeString(dimsOf(S)), total, target, known)
	}
	return dimsVal(out)
}

func dimsOf(l []cval) []lang.Dim {
	out := make([]lang.Dim, len(l))
	for i, e := range l {
		out[i] = e.dim
	}
	return out
}

// ravel(o, dims) is the row-major linear index of o in a tensor of dims.
func biRavel(ev *evaluator, c *lang.Call, a []cval) cval {
	o, dims := ev.list(c, a[0]), ev.list(c, a[1])
	if len(o) != len(dims) {
		ev.fail(c.Pos, "ravel: index of rank %d for dims of rank %d", len(o), len(dims))
	}
	var lin ir.Expr = ir.IndexConst(0)
	for i := range o {
		lin = ir.IndexAdd(ir.IndexMulDim(lin, ev.dimOf(c, dims[i])), ev.index(c, o[i]))
	}
	return idxVal(lin)
}

// unravel(i, dims) splits a linear index into a row-major index of dims.
func biUnravel(ev *evaluator, c *lang.Call, a []cval) cval {
	lin := ev.index(c, a[0])
	dims := ev.list(c, a[1])
	out := cval{kind: cList, list: make([]cval, len(dims))}
	stride := lang.Const(1)
	for i := len(dims) - 1; i >= 0; i-- {
		d := ev.dimOf(c, dims[i])
		e := ir.IndexDivDim(lin, stride)
		if i > 0 {
			e = ir.IndexModDim(e, d)
		}
		out.list[i] = idxVal(e)
		stride = stride.Mul(d)
	}
	return out
}

// mul_each(S, k) multiplies elementwise; an empty k leaves S as it is.
func biMulEach(ev *evaluator, c *lang.Call, a []cval) cval {
	l, k := ev.list(c, a[0]), ev.list(c, a[1])
	if len(k) == 0 {
		return a[0]
	}
	if len(l) != len(k) {
		ev.fail(c.Pos, "mul_each: lists of %d and %d", len(l), len(k))
	}
	out := cval{kind: cList}
	for i := range l {
		out.list = append(out.list, dimVal(ev.dimOf(c, l[i]).Mul(ev.dimOf(c, k[i]))))
	}
	return out
}

func biModEach(ev *evaluator, c *lang.Call, a []cval) cval {
	o, dims := ev.list(c, a[0]), ev.list(c, a[1])
	if len(o) != len(dims) {
		ev.fail(c.Pos, "mod_each: lists of %d and %d", len(o), len(dims))
	}
	out := cval{kind: cList}
	for i := range o {
		out.list = append(out.list, idxVal(ir.IndexModDim(ev.index(c, o[i]), ev.dimOf(c, dims[i]))))
	}
	return out
}

func biRange(ev *evaluator, c *lang.Call, a []cval) cval {
	n, ok := a[0].constInt()
	if !ok || n < 0 {
		ev.fail(c.Pos, "range needs a non-negative constant")
	}
	if n > maxListLen {
		ev.fail(c.Pos, "range(%d) is too long (at most %d)", n, maxListLen)
	}
	out := cval{kind: cList}
	for i := range n {
		out.list = append(out.list, intVal(i))
	}
	return out
}

// maxListLen bounds the compile-time lists range builds, and maxRank the
// packs a standalone check invents, so that a small input cannot make the
// checker run out of time or memory.
const (
	maxListLen = 1 << 16
	maxRank    = 1 << 10
)

// index returns an index expression, converting integers to constants.
func (ev *evaluator) index(c *lang.Call, v cval) ir.Expr {
	switch v.kind {
	case cIndex:
		return v.exprs[0]
	case cInt:
		return ir.IndexDim(v.dim)
	}
	ev.fail(c.Pos, "%s expects index expressions, found %s %s", c.Name, v.kind, v)
	return nil
}
