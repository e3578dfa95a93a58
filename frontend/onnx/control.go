package onnx

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"tofuc/frontend/onnx/onnxpb"
	"tofuc/lang"
	"tofuc/runtime/tensor"
)

// Control flow is resolved at import: If takes the branch its condition
// (known at import) names, or evaluates both branches and selects with
// where; Loop and Scan are unrolled, their trip counts known at import.
// A body (a GraphProto attribute) is converted like the main graph, its
// inputs bound to the values given and the outer scope's values visible.

// MaxLoopIterations bounds the iterations of a Loop unrolled at import.
const MaxLoopIterations = 1 << 16

// graphAttr is the graph attribute name, failing when it is absent.
func (c *nodeCtx) graphAttr(name string) *onnxpb.GraphProto {
	a := c.attribute(name)
	if a == nil || a.GetG() == nil {
		c.fail("attribute %s (a graph) is required", name)
	}
	return a.GetG()
}

// subgraph converts the body g with its inputs bound to ins, in the
// scope of the node's graph, and returns its outputs. A node of the body
// that cannot be imported fails the node c converts.
func (c *nodeCtx) subgraph(what string, g *onnxpb.GraphProto, ins []*value) []*value {
	imp := c.imp
	if len(g.GetInput()) != len(ins) {
		c.fail("its %s has %d inputs; %d are given", what, len(g.GetInput()), len(ins))
	}
	saved, savedFailed, unsupported := imp.values, imp.failed, len(imp.unsupported)
	imp.values, imp.failed = maps.Clone(saved), maps.Clone(savedFailed)
	defer func() {
		imp.values, imp.failed, imp.node = saved, savedFailed, c.node
	}()
	if len(g.GetSparseInitializer()) > 0 {
		c.fail("its %s has sparse initializers", what)
	}
	for _, tp := range g.GetInitializer() {
		t, err := Tensor(tp, imp.model.Dir())
		if err != nil {
			c.fail("its %s's initializer %q: %v", what, tp.GetName(), err)
		}
		imp.values[tp.GetName()] = constValue(tp.GetName(), t, false)
	}
	for i, vi := range g.GetInput() {
		imp.values[vi.GetName()] = ins[i]
	}
	for _, n := range g.GetNode() {
		imp.convert(n)
	}
	if len(imp.unsupported) > unsupported {
		var reasons []string
		for _, op := range imp.unsupported[unsupported:] {
			reasons = append(reasons, op.String())
		}
		imp.unsupported = imp.unsupported[:unsupported]
		c.fail("in its %s: %s", what, strings.Join(reasons, "; "))
	}
	outs := make([]*value, len(g.GetOutput()))
	for i, vi := range g.GetOutput() {
		v := imp.values[vi.GetName()]
		if v == nil {
			c.fail("its %s's output %q is not computed by any node", what, vi.GetName())
		}
		outs[i] = v
	}
	return outs
}

// convIf takes the branch a condition known at import names (or given
// in Options.Known for a graph input); otherwise it refuses.
func convIf(c *nodeCtx) {
	cond := c.must(0)
	then, els := c.graphAttr("then_branch"), c.graphAttr("else_branch")
	if cond.sym != nil || cond.isSeq() || cond.opt {
		c.fail("its condition is not a boolean tensor")
	}
	if n := tensorElems(cond); n != 1 {
		c.fail("its condition has %d elements; it must have one", n)
	}
	take := func(t *tensor.Tensor) {
		branch, what := els, "else_branch"
		if t.Flat(0) != 0 {
			branch, what = then, "then_branch"
		}
		for i, v := range c.subgraph(what, branch, nil) {
			c.out(i, v)
		}
	}
	if cond.konst != nil {
		take(cond.konst)
		return
	}
	// A condition that is a graph input given in Options.Known chooses
	// the branch; the input stays, unread.
	if known := c.imp.opts.Known[cond.onnx]; cond.input && known != nil && known.Len() == 1 {
		take(known)
		return
	}
	// Both branches computed and one chosen by where would run the branch
	// not taken, whose reads (a gather guarded by the condition) may fail.
	c.fail("its condition is computed from the data, not known at import; only a branch chosen at import is imported (give the inputs the condition comes from with --known)")
}

// describe names a value's kind and type for messages.
func describe(v *value) string {
	switch {
	case v.isSeq():
		return fmt.Sprintf("a sequence of %d", len(v.seq))
	case v.opt:
		return "an optional"
	case v.sym != nil:
		return "the shape " + lang.ShapeString(v.sym)
	}
	return v.typ.String()
}

// tensorElems is the number of elements of v's (constant) shape, or -1.
func tensorElems(v *value) int64 {
	n := int64(1)
	for _, d := range v.typ.Shape {
		k, ok := d.IsConst()
		if !ok {
			return -1
		}
		n *= k
	}
	return n
}

// knownBool reads a one-element tensor known at import as a bool.
func (c *nodeCtx) knownBool(v *value, what string) bool {
	if v.konst == nil {
		c.fail("%s must be known at import", what)
	}
	if v.konst.Len() != 1 {
		c.fail("%s has %d elements; it must have one", what, v.konst.Len())
	}
	return v.konst.Flat(0) != 0
}

// convLoop unrolls a Loop whose trip count and condition are known at
// import: body(iteration, cond, carried...) -> (cond, carried..., scan...),
// each scan output stacked along a new first axis.
func convLoop(c *nodeCtx) {
	body := c.graphAttr("body")
	trips := int64(-1)
	if c.in(0) != nil {
		t := c.knownInts(0, "trip count")
		if len(t) != 1 || t[0] < 0 {
			c.fail("its trip count is %v; it must be one count, at least 0", t)
		}
		trips = t[0]
	}
	hasCond := c.in(1) != nil
	cond := true
	if hasCond {
		cond = c.knownBool(c.in(1), "its condition (input 1)")
	}
	if trips < 0 && !hasCond {
		c.fail("it has neither a trip count nor a condition (an endless loop)")
	}
	var carried []*value
	for i := 2; i < c.numIn(); i++ {
		carried = append(carried, c.must(i))
	}
	nScan := len(body.GetOutput()) - 1 - len(carried)
	if nScan < 0 || len(body.GetInput()) != 2+len(carried) {
		c.fail("its body has %d inputs and %d outputs for %d loop-carried values", len(body.GetInput()), len(body.GetOutput()), len(carried))
	}
	scans := make([][]*value, nScan)
	for it := int64(0); cond && (trips < 0 || it < trips); it++ {
		if it >= MaxLoopIterations {
			c.fail("it runs more than %d iterations, the most unrolled at import", MaxLoopIterations)
		}
		ins := append([]*value{scalar(lang.I64, float64(it)), boolScalar(cond)}, carried...)
		outs := c.subgraph("body", body, ins)
		switch condOut := outs[0]; {
		case hasCond || trips < 0:
			cond = c.knownBool(condOut, fmt.Sprintf("its body's condition (at iteration %d)", it))
		case condOut.konst != nil && condOut.konst.Len() == 1 && condOut.konst.Flat(0) == 0 && it+1 < trips:
			// ONNX's operator definition ignores the condition output of a
			// loop without a condition input; its reference stops.
			c.fail("its body's condition turns false at iteration %d of a loop without a condition input, which ONNX's definition ignores and its reference implementation obeys", it)
		}
		carried = outs[1 : 1+len(carried)]
		for k := range scans {
			scans[k] = append(scans[k], outs[1+len(carried)+k])
		}
	}
	for i, v := range carried {
		c.out(i, v)
	}
	for k, steps := range scans {
		if !c.wants(len(carried) + k) {
			continue
		}
		if len(steps) == 0 {
			c.fail("scan output %d of a loop that runs no iteration is empty, of a shape not known at import", k)
		}
		c.out(len(carried)+k, c.stack(steps, 0, false))
	}
}

// boolScalar is a known rank-0 bool.
func boolScalar(b bool) *value {
	v := 0.0
	if b {
		v = 1
	}
	return scalar(lang.Bool, v)
}

// stack joins tensors of one shape along a new axis (their order
// reversed when reverse).
func (c *nodeCtx) stack(vs []*value, axis int64, reverse bool) *value {
	rows := make([]*value, len(vs))
	for i, v := range vs {
		if v.isSeq() || v.opt || v.sym != nil {
			c.fail("a scan output is %s; it must be a tensor", describe(v))
		}
		if reverse {
			i = len(vs) - 1 - i
		}
		rows[i] = c.call1("unsqueeze", []attr{intsA("axes", []int64{axis})}, v)
	}
	return c.concatAll(rows, axis)
}

// convScan unrolls a Scan: opset 9's scan inputs and outputs have their
// scan axes and directions as attributes; opset 8's carry a batch axis
// first (scanned one batch element at a time) and an optional
// sequence_lens input, which must be known at import and the full length.
func convScan(c *nodeCtx) {
	body := c.graphAttr("body")
	nScanIn := int(c.intAttr("num_scan_inputs", 0))
	first := 0
	if c.opset() < 9 {
		first = 1
	}
	var ins []*value
	for i := first; i < c.numIn(); i++ {
		ins = append(ins, c.must(i))
	}
	if nScanIn <= 0 || nScanIn > len(ins) {
		c.fail("num_scan_inputs = %d for %d inputs", nScanIn, len(ins))
	}
	nState := len(ins) - nScanIn
	nScanOut := len(body.GetOutput()) - nState
	if nScanOut < 0 || len(body.GetInput()) != len(ins) {
		c.fail("its body has %d inputs and %d outputs for %d states and %d scan inputs", len(body.GetInput()), len(body.GetOutput()), nState, nScanIn)
	}
	s := scanSpec{body: body, nState: nState, nScanOut: nScanOut}
	if c.opset() >= 9 {
		s.inAxes = c.intsAttr("scan_input_axes", make([]int64, nScanIn))
		s.inDirs = c.intsAttr("scan_input_directions", make([]int64, nScanIn))
		s.outAxes = c.intsAttr("scan_output_axes", make([]int64, nScanOut))
		s.outDirs = c.intsAttr("scan_output_directions", make([]int64, nScanOut))
		if len(s.inAxes) != nScanIn || len(s.inDirs) != nScanIn || len(s.outAxes) != nScanOut || len(s.outDirs) != nScanOut {
			c.fail("its scan axes and directions do not match %d scan inputs and %d scan outputs", nScanIn, nScanOut)
		}
		for i, v := range c.scanRun(s, ins) {
			c.out(i, v)
		}
		return
	}
	s.inAxes, s.outAxes = make([]int64, nScanIn), make([]int64, nScanOut)
	s.inDirs = c.intsAttr("directions", make([]int64, nScanIn))
	s.outDirs = make([]int64, nScanOut)
	if len(s.inDirs) != nScanIn {
		c.fail("directions lists %d directions for %d scan inputs", len(s.inDirs), nScanIn)
	}
	batch := c.extent(ins[0], 0)
	for _, v := range ins {
		if v.isSeq() || v.opt || rank(v) == 0 || c.extent(v, 0) != batch {
			c.fail("its inputs must be tensors of batch size %d", batch)
		}
	}
	if lens := c.in(0); lens != nil {
		seqLen := c.extent(ins[nState], 1)
		for _, n := range c.knownInts(0, "sequence_lens") {
			if n != seqLen {
				c.fail("sequence_lens holds %d, not the full length %d; only full-length sequences are supported", n, seqLen)
			}
		}
	}
	per := make([][]*value, nState+nScanOut)
	for b := range batch {
		row := make([]*value, len(ins))
		for i, v := range ins {
			part := c.call1("slice", []attr{intsA("starts", []int64{b}), intsA("ends", []int64{b + 1}), intsA("axes", []int64{0})}, v)
			row[i] = c.call1("squeeze", []attr{intsA("axes", []int64{0})}, part)
		}
		for i, v := range c.scanRun(s, row) {
			per[i] = append(per[i], v)
		}
	}
	for i, vs := range per {
		if c.wants(i) {
			c.out(i, c.stack(vs, 0, false))
		}
	}
}

// scanSpec is a Scan's body and its scan axes and directions (1:
// reverse).
type scanSpec struct {
	body                             *onnxpb.GraphProto
	nState, nScanOut                 int
	inAxes, inDirs, outAxes, outDirs []int64
}

// scanRun runs the body over the scan inputs (after the states in ins)
// and returns the final states and the scan outputs.
func (c *nodeCtx) scanRun(s scanSpec, ins []*value) []*value {
	states, scanIns := slices.Clone(ins[:s.nState]), ins[s.nState:]
	length := int64(-1)
	axes := make([]int64, len(scanIns))
	for j, x := range scanIns {
		if x.isSeq() || x.opt || x.sym != nil {
			c.fail("scan input %d is %s; it must be a tensor", j, describe(x))
		}
		axes[j] = c.axis(s.inAxes[j], rank(x))
		n := c.extent(x, int(axes[j]))
		if length >= 0 && n != length {
			c.fail("its scan inputs have lengths %d and %d", length, n)
		}
		length = n
	}
	if length == 0 {
		c.fail("its sequences are empty; the scan outputs' shapes are not known at import")
	}
	if err := c.imp.reserveCalls(int(length)); err != nil {
		c.fail("%v", err)
	}
	steps := make([][]*value, s.nScanOut)
	for t := range length {
		row := slices.Clone(states)
		for j, x := range scanIns {
			at := t
			if s.inDirs[j] != 0 {
				at = length - 1 - t
			}
			part := c.call1("slice", []attr{intsA("starts", []int64{at}), intsA("ends", []int64{at + 1}), intsA("axes", []int64{axes[j]})}, x)
			row = append(row, c.call1("squeeze", []attr{intsA("axes", []int64{axes[j]})}, part))
		}
		outs := c.subgraph("body", s.body, row)
		states = outs[:s.nState]
		for k := range steps {
			steps[k] = append(steps[k], outs[s.nState+k])
		}
	}
	res := states
	for k, vs := range steps {
		r := rank(vs[0]) + 1
		axis := c.axis(s.outAxes[k], r)
		res = append(res, c.stack(vs, axis, s.outDirs[k] != 0))
	}
	return res
}

// isSeq reports whether v is a sequence (possibly empty).
func (v *value) isSeq() bool { return v.seq != nil }
