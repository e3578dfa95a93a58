package onnx

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"tofuc/analysis/check"
	"tofuc/frontend/onnx/onnxpb"
	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/parser"
	"tofuc/runtime/interp"
	"tofuc/runtime/tensor"
)

// Options control an import.
type Options struct {
	// Name is the TDL model's name (default: from the file name).
	Name string
	// Known holds values for graph inputs. An input that an operator needs
	// at compile time (a Reshape's shape, a Slice's starts, a reduction's
	// axes, ...) is bound to its value here and is no longer a model
	// input; the others stay inputs.
	Known map[string]*tensor.Tensor
	// FoldLimit bounds the elements of a tensor computed at import
	// (default MaxFoldElements).
	FoldLimit int64
	// CallLimit bounds the calls of the imported model (default
	// MaxCalls); an unrolled recurrence adds several per time step.
	CallLimit int
	// Program supplies the stdlib (default: a new one). A Program is not
	// safe for concurrent use.
	Program *check.Program
	// Sequences gives the element types of graph inputs that are
	// sequences: such an input is one model input per element.
	Sequences map[string][]check.TensorType
	// Optionals says whether each graph input that is an optional holds
	// an element: one that does is the model input (or inputs, for a
	// sequence) of its element, one that does not is no model input.
	Optionals map[string]bool
}

// Result is an imported model.
type Result struct {
	// Source is the TDL text of the model, formatted canonically.
	Source []byte
	// Params holds the weights by parameter name: the model's .npz.
	Params map[string]*tensor.Tensor
	// Inputs and Outputs name the model's inputs and outputs, in order.
	Inputs, Outputs []Port
	// Nodes counts the ONNX nodes; Folded those evaluated at import.
	Nodes, Folded int
	// Origins names the ONNX node each statement of Source converts, by
	// the names the statement binds joined with "," (check.Module.Origins).
	Origins map[string]string
}

// Port is a graph input or output, named in ONNX and in the TDL model;
// an input's Shape is its TDL shape (symbolic dimensions are model
// attributes). A sequence is one port per element, in order, with Seq
// set and the element's position in Elem.
type Port struct {
	ONNX, TDL string
	Shape     []lang.Dim
	Seq       bool
	Elem      int
}

// UnsupportedError lists every node that cannot be imported.
type UnsupportedError struct {
	Path string
	Ops  []UnsupportedOp
}

// UnsupportedOp is a node that cannot be imported, and why.
type UnsupportedOp struct {
	OpType, Node, Domain string
	Opset                int64
	Reason               string
}

func (e *UnsupportedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d operator(s) cannot be imported:", e.Path, len(e.Ops))
	for _, op := range e.Ops {
		fmt.Fprintf(&b, "\n  %s", op)
	}
	return b.String()
}

func (op UnsupportedOp) String() string {
	name := op.OpType
	if op.Domain != "" && op.Domain != "ai.onnx" {
		name = op.Domain + "." + name
	}
	return fmt.Sprintf("%s (node %q, opset %d): %s", name, op.Node, op.Opset, op.Reason)
}

// value is an ONNX value: a tensor computed by the TDL model, a model
// input, or a constant known at import.
type value struct {
	onnx  string // ONNX name; empty for an intermediate result
	typ   check.TensorType
	konst *tensor.Tensor // known at import
	sym   []lang.Dim     // a shape value with symbolic elements (symshape.go)
	seq   []*value       // a sequence of known length: its elements, non-nil (sequence.go)
	opt   bool           // an optional whose presence is known at import: elem, or nil when empty
	elem  *value
	init  bool   // an ONNX initializer: a parameter when used as data
	input bool   // a model input
	name  string // TDL name, assigned when the model is printed
}

// stmt is one call in the model body.
type stmt struct {
	op    string
	attrs []attr
	args  []*value
	outs  []*value
	// origin is the ONNX node the statement converts (Result.Origins).
	origin string
}

// attr is an attribute argument of a call, in TDL order.
type attr struct {
	name string
	val  ir.AttrValue
}

type importer struct {
	// node is the ONNX node being converted.
	node        *onnxpb.NodeProto
	model       *Model
	opts        Options
	prog        *check.Program
	opset       int64
	values      map[string]*value
	inputs      []*value
	inputPorts  []Port            // of inputs, without their TDL names
	dimAttrs    []string          // symbolic dimensions, which become model attributes
	dimNames    map[string]string // dim_param -> its attribute
	stmts       []*stmt
	unsupported []UnsupportedOp
	failed      map[string]bool // outputs of nodes that failed to import
	used        map[string]bool // values some node or the graph's output reads
	folded      int
	// foldedElements counts the elements computed by folding, bounded by
	// 8 times the fold limit.
	foldedElements int64
	// elemTypes caches the ONNX element types of values, producers the
	// node making each (narrow.go).
	elemTypes map[string]int32
	producers map[string]*onnxpb.NodeProto
}

// Import converts an ONNX model into a TDL model.
func Import(m *Model, opts Options) (*Result, error) {
	prog := opts.Program
	if prog == nil {
		var err error
		if prog, err = check.NewProgram(parser.Parse); err != nil {
			return nil, err
		}
	}
	imp := &importer{model: m, opts: opts, prog: prog, opset: m.Opset(), values: map[string]*value{}, failed: map[string]bool{}, dimNames: map[string]string{}}
	if imp.opset == 0 {
		imp.opset = 1
	}
	g := m.Proto.GetGraph()
	imp.used = usedValues(g)
	if err := imp.bindInitializers(g); err != nil {
		return nil, err
	}
	if err := imp.bindInputs(g); err != nil {
		if ops := imp.unconvertible(g); len(ops) > 0 {
			// Operators with no TDL equivalent stop the import whatever
			// the inputs: say so rather than ask for what would not help.
			return nil, &UnsupportedError{Path: m.Path, Ops: ops}
		}
		return nil, err
	}
	for _, n := range g.GetNode() {
		imp.convert(n)
	}
	if len(imp.unsupported) > 0 {
		return nil, &UnsupportedError{Path: m.Path, Ops: imp.unsupported}
	}
	return imp.result(g)
}

func unsupportedReason(n *onnxpb.NodeProto) string {
	if d := n.GetDomain(); d != "" && d != "ai.onnx" {
		return "operators of domain " + d + " are not supported"
	}
	if _, ok := converters[n.GetOpType()]; !ok {
		if why, ok := whyNoConverter[n.GetOpType()]; ok {
			return why
		}
		return "no TDL equivalent yet"
	}
	return ""
}

// whyNoConverter says why an operator without a converter has none,
// where the reason is not just work left to do.
var whyNoConverter = map[string]string{
	"NonZero":           "its output's extent depends on the input's values (TDL shapes are fixed at compile time)",
	"Unique":            "its output's extent depends on the input's values (TDL shapes are fixed at compile time)",
	"Compress":          "its output's extent depends on the condition's values (TDL shapes are fixed at compile time)",
	"NonMaxSuppression": "its output's extent depends on the input's values (TDL shapes are fixed at compile time)",
	"RandomUniformLike": "it draws random numbers, which TDL models do not (give the values as an input)",
	"RandomUniform":     "it draws random numbers, which TDL models do not (give the values as an input)",
	"RandomNormal":      "it draws random numbers, which TDL models do not (give the values as an input)",
	"RandomNormalLike":  "it draws random numbers, which TDL models do not (give the values as an input)",
	"Multinomial":       "it draws random numbers, which TDL models do not (give the values as an input)",
	"Bernoulli":         "it draws random numbers, which TDL models do not (give the values as an input)",
	"ImageDecoder":      "it decodes image files (bytes), which TDL tensors of numbers do not hold (decode before the model)",
}

// unconvertible are g's nodes of operators that have no converter.
func (imp *importer) unconvertible(g *onnxpb.GraphProto) []UnsupportedOp {
	var out []UnsupportedOp
	for _, n := range g.GetNode() {
		if reason := unsupportedReason(n); reason != "" {
			out = append(out, imp.unsupportedOp(n, reason))
		}
	}
	return out
}

func (imp *importer) unsupportedOp(n *onnxpb.NodeProto, reason string) UnsupportedOp {
	return UnsupportedOp{OpType: n.GetOpType(), Node: n.GetName(), Domain: n.GetDomain(), Opset: imp.opset, Reason: reason}
}

func (imp *importer) bindInitializers(g *onnxpb.GraphProto) error {
	if len(g.GetSparseInitializer()) > 0 {
		return fmt.Errorf("%s: sparse initializers are not supported", imp.model.Path)
	}
	for _, tp := range g.GetInitializer() {
		t, err := Tensor(tp, imp.model.Dir())
		if err != nil {
			return fmt.Errorf("%s: initializer %q: %w", imp.model.Path, tp.GetName(), err)
		}
		imp.values[tp.GetName()] = constValue(tp.GetName(), t, true)
	}
	return nil
}

// bindInputs makes the graph inputs without an initializer model inputs,
// except those an operator needs at compile time, which take their values
// from Options.Known.
func (imp *importer) bindInputs(g *onnxpb.GraphProto) error {
	needed := compileTimeInputs(g, imp.opset)
	for _, vi := range g.GetInput() {
		name := vi.GetName()
		if imp.values[name] != nil {
			continue // an initializer: a parameter
		}
		if needed[name] {
			t := imp.opts.Known[name]
			if t == nil {
				return fmt.Errorf("%s: input %q must be known at import (it determines a shape or an attribute); give its value", imp.model.Path, name)
			}
			imp.values[name] = constValue(name, t, false)
			continue
		}
		if opt := vi.GetType().GetOptionalType(); opt != nil {
			if err := imp.bindOptional(name, opt.GetElemType()); err != nil {
				return fmt.Errorf("%s: input %q: %w", imp.model.Path, name, err)
			}
			continue
		}
		if vi.GetType().GetSequenceType() != nil {
			if err := imp.bindSequence(name); err != nil {
				return fmt.Errorf("%s: input %q: %w", imp.model.Path, name, err)
			}
			continue
		}
		typ, err := imp.inputType(vi)
		if err != nil {
			return fmt.Errorf("%s: input %q: %w", imp.model.Path, name, err)
		}
		v := &value{onnx: name, typ: typ, input: true}
		imp.values[name] = v
		imp.addInput(v, Port{ONNX: name, Shape: typ.Shape})
	}
	return nil
}

func (imp *importer) addInput(v *value, p Port) {
	imp.inputs = append(imp.inputs, v)
	imp.inputPorts = append(imp.inputPorts, p)
}

// bindSequence makes each element of a sequence input, whose types
// Options.Sequences gives, a model input.
func (imp *importer) bindSequence(name string) error {
	types, ok := imp.opts.Sequences[name]
	if !ok {
		return errors.New("it is a sequence; its length and element types must be known at import")
	}
	seq := &value{onnx: name, seq: []*value{}}
	for i, typ := range types {
		v := &value{onnx: fmt.Sprintf("%s_%d", name, i), typ: typ, input: true}
		seq.seq = append(seq.seq, v)
		imp.addInput(v, Port{ONNX: name, Shape: typ.Shape, Seq: true, Elem: i})
	}
	imp.values[name] = seq
	return nil
}

// bindOptional binds an optional input, whose presence Options.Optionals
// gives: an empty optional, or one holding a model input of type elem
// (a sequence's elements, Options.Sequences, one input each).
func (imp *importer) bindOptional(name string, elem *onnxpb.TypeProto) error {
	present, ok := imp.opts.Optionals[name]
	if !ok {
		return errors.New("it is an optional; whether it holds an element must be known at import")
	}
	if !present {
		imp.values[name] = &value{onnx: name, opt: true}
		return nil
	}
	if elem.GetSequenceType() != nil {
		if err := imp.bindSequence(name); err != nil {
			return err
		}
		imp.values[name] = &value{onnx: name, opt: true, elem: imp.values[name]}
		return nil
	}
	typ, err := imp.inputType(&onnxpb.ValueInfoProto{Name: &name, Type: elem})
	if err != nil {
		return err
	}
	v := &value{onnx: name, typ: typ, input: true}
	imp.values[name] = &value{onnx: name, opt: true, elem: v}
	imp.addInput(v, Port{ONNX: name, Shape: typ.Shape})
	return nil
}

// usedValues are the values read by a node or returned by the graph,
// its subgraphs' included.
func usedValues(g *onnxpb.GraphProto) map[string]bool {
	used := map[string]bool{}
	var walk func(g *onnxpb.GraphProto)
	walk = func(g *onnxpb.GraphProto) {
		for _, n := range g.GetNode() {
			for _, in := range n.GetInput() {
				used[in] = true
			}
			for _, sub := range subgraphs(n) {
				walk(sub)
			}
		}
		for _, out := range g.GetOutput() {
			used[out.GetName()] = true
		}
	}
	walk(g)
	return used
}

// subgraphs are the graph attributes of n (the bodies of If, Loop, Scan
// and SequenceMap).
func subgraphs(n *onnxpb.NodeProto) []*onnxpb.GraphProto {
	var out []*onnxpb.GraphProto
	for _, a := range n.GetAttribute() {
		if a.GetG() != nil {
			out = append(out, a.GetG())
		}
		out = append(out, a.GetGraphs()...)
	}
	return out
}

// compileTimeInputs finds the graph values that some node (in the graph
// or its subgraphs) reads in an input slot it needs at import, and those
// such a value is computed from, up to the operators that read only
// their input's shape or dtype (shapeOnlyInput).
func compileTimeInputs(g *onnxpb.GraphProto, opset int64) map[string]bool {
	producer := map[string]*onnxpb.NodeProto{}
	var slots []string
	var walk func(g *onnxpb.GraphProto)
	walk = func(g *onnxpb.GraphProto) {
		for _, n := range g.GetNode() {
			for _, out := range n.GetOutput() {
				producer[out] = n
			}
			consts := converters[n.GetOpType()].consts
			if n.GetOpType() == "Scan" && opset < 9 {
				consts = []int{0} // Scan-8's sequence_lens; Scan-9 has none
			}
			for _, i := range consts {
				if i < len(n.GetInput()) {
					slots = append(slots, n.GetInput()[i])
				}
			}
			for _, sub := range subgraphs(n) {
				walk(sub)
			}
		}
	}
	walk(g)
	needed := map[string]bool{}
	var trace func(name string)
	trace = func(name string) {
		if name == "" || needed[name] {
			return
		}
		needed[name] = true
		n := producer[name]
		if n == nil {
			return
		}
		for i, in := range n.GetInput() {
			if !shapeOnlyInput(n.GetOpType(), i) {
				trace(in)
			}
		}
		for _, sub := range subgraphs(n) {
			for _, out := range sub.GetOutput() {
				trace(out.GetName())
			}
		}
	}
	for _, name := range slots {
		trace(name)
	}
	return needed
}

// shapeOnlyInput reports whether input i of an operator is read only for
// its shape or dtype (or a sequence's length, an optional's presence),
// not its values.
func shapeOnlyInput(op string, i int) bool {
	switch op {
	case "Shape", "Size", "SequenceLength", "OptionalHasElement", "EyeLike":
		return i == 0
	case "CastLike":
		return i == 1
	}
	return false
}

func (imp *importer) inputType(vi *onnxpb.ValueInfoProto) (check.TensorType, error) {
	tt := vi.GetType().GetTensorType()
	if tt == nil {
		return check.TensorType{}, errors.New("only tensor inputs are supported")
	}
	dt, err := DType(tt.GetElemType())
	if err != nil {
		return check.TensorType{}, err
	}
	if tt.GetShape() == nil {
		return check.TensorType{}, errors.New("its rank is unknown")
	}
	var shape []lang.Dim
	for i, d := range tt.GetShape().GetDim() {
		switch {
		case d.GetDimParam() != "":
			shape = append(shape, lang.Sym(imp.dimAttr(d.GetDimParam())))
		case d.Value == nil:
			return check.TensorType{}, fmt.Errorf("extent %d is unknown (give it a name or a value)", i)
		default:
			shape = append(shape, lang.Const(d.GetDimValue()))
		}
	}
	return check.TensorType{DType: dt, Shape: shape}, nil
}

// dimAttr names the model attribute of a symbolic dimension; distinct
// parameters get distinct names.
func (imp *importer) dimAttr(param string) string {
	if name, ok := imp.dimNames[param]; ok {
		return name
	}
	taken := map[string]bool{}
	for _, a := range imp.dimAttrs {
		taken[a] = true
	}
	n := &namer{taken: taken, avoid: func(string) bool { return false }}
	name := n.ident(param)
	imp.dimNames[param] = name
	imp.dimAttrs = append(imp.dimAttrs, name)
	return name
}

func constValue(name string, t *tensor.Tensor, init bool) *value {
	shape := make([]lang.Dim, len(t.Shape))
	for i, d := range t.Shape {
		shape[i] = lang.Const(int64(d))
	}
	return &value{onnx: name, typ: check.TensorType{DType: t.DType, Shape: shape}, konst: t, init: init}
}

// convert converts one node, recording why when it cannot.
func (imp *importer) convert(n *onnxpb.NodeProto) {
	if reason := unsupportedReason(n); reason != "" {
		imp.fail(n, reason)
		return
	}
	for _, in := range n.GetInput() {
		if in != "" && imp.values[in] == nil {
			if imp.failed[in] {
				imp.fail(n, "") // reported at the node that failed
			} else {
				imp.fail(n, fmt.Sprintf("input %q is not defined before the node", in))
			}
			return
		}
	}
	stmts := len(imp.stmts)
	imp.node = n
	c := &nodeCtx{imp: imp, node: n}
	if reason := c.run(); reason != "" {
		imp.stmts = imp.stmts[:stmts]
		imp.fail(n, reason)
		return
	}
	if len(imp.stmts) == stmts && imp.allKnown(n) {
		imp.folded++
	}
}

// fail records why n cannot be imported (an empty reason: its input
// failed, reported there) and marks its outputs failed.
func (imp *importer) fail(n *onnxpb.NodeProto, reason string) {
	if reason != "" {
		imp.unsupported = append(imp.unsupported, imp.unsupportedOp(n, reason))
	}
	for _, out := range n.GetOutput() {
		delete(imp.values, out)
		imp.failed[out] = true
	}
}

// allKnown reports whether every bound output of n is known at import.
func (imp *importer) allKnown(n *onnxpb.NodeProto) bool {
	for _, out := range n.GetOutput() {
		if v := imp.values[out]; v != nil && v.konst == nil {
			return false
		}
	}
	return true
}

// result prints the model and collects its parameters.
func (imp *importer) result(g *onnxpb.GraphProto) (*Result, error) {
	var outs []*value
	var ports []Port
	for _, vi := range g.GetOutput() {
		v := imp.values[vi.GetName()]
		if v == nil {
			return nil, fmt.Errorf("%s: graph output %q is not computed by any node", imp.model.Path, vi.GetName())
		}
		if v.opt {
			// An optional is its element, or no output when it is empty.
			if v = v.elem; v == nil {
				continue
			}
		}
		if v.seq == nil {
			outs = append(outs, v)
			ports = append(ports, Port{ONNX: vi.GetName()})
			continue
		}
		for i, e := range v.seq {
			outs = append(outs, e)
			ports = append(ports, Port{ONNX: vi.GetName(), Seq: true, Elem: i})
		}
	}
	p := newPrinter(imp)
	src, params := p.model(outs)
	f, err := parser.Parse(imp.model.Path, src)
	if err != nil {
		return nil, fmt.Errorf("internal error: the imported model does not parse: %w", err)
	}
	src = lang.Format(f, src)
	res := &Result{Source: src, Params: params, Nodes: len(g.GetNode()), Folded: imp.folded, Origins: p.origins}
	for i, v := range imp.inputs {
		port := imp.inputPorts[i]
		port.TDL = v.name
		res.Inputs = append(res.Inputs, port)
	}
	for i := range ports {
		ports[i].TDL = p.returned[i]
	}
	res.Outputs = ports
	return res, nil
}

// ModelName derives a TDL model name from a file name.
func ModelName(path string) string {
	base := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	n := &namer{taken: map[string]bool{}, avoid: func(string) bool { return false }}
	return n.ident(base)
}

// callStmt instantiates op on args (folding it when every argument is
// known) and returns its results.
func (imp *importer) callStmt(op string, attrs []attr, args []*value) ([]*value, error) {
	decl := imp.prog.StdOps()[op]
	if decl == nil {
		return nil, fmt.Errorf("internal: no stdlib operator %s", op)
	}
	types := make([]check.TensorType, len(args))
	known := true
	for i, a := range args {
		if a.seq != nil {
			return nil, fmt.Errorf("a sequence is not supported as an input of %s", op)
		}
		if a.opt {
			return nil, fmt.Errorf("an optional is not supported as an input of %s (OptionalGetElement gives its element)", op)
		}
		if a.sym != nil {
			return nil, fmt.Errorf("%s of the symbolic shape %s is not supported", op, lang.ShapeString(a.sym))
		}
		types[i] = a.typ
		known = known && a.konst != nil
	}
	am := map[string]ir.AttrValue{}
	for _, a := range attrs {
		am[a.name] = a.val
	}
	inst, err := imp.prog.Instantiate(decl, am, types, lang.Pos{File: imp.model.Path})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if known {
		for _, d := range inst.Outputs {
			if err := imp.foldable(d.Tensor.Shape); err != nil {
				return nil, fmt.Errorf("folding %s: %w", op, err)
			}
		}
		return imp.fold(inst, args)
	}
	if err := imp.reserveCalls(1); err != nil {
		return nil, err
	}
	outs := make([]*value, len(inst.Outputs))
	for i, d := range inst.Outputs {
		outs[i] = &value{typ: check.TensorType{DType: d.Tensor.DType, Shape: d.Tensor.Shape}}
	}
	imp.stmts = append(imp.stmts, &stmt{op: op, attrs: attrs, args: args, outs: outs, origin: nodeOrigin(imp.node)})
	return outs, nil
}

// MaxFoldElements bounds a tensor computed at import (the interpreter
// holds it in float64: 2 GiB).
const MaxFoldElements = 1 << 28

// MaxCalls bounds the calls of an imported model: the statements the
// checker elaborates in one model (analysis/check's limit).
const MaxCalls = 1_000_000

func (imp *importer) callLimit() int {
	if imp.opts.CallLimit > 0 {
		return imp.opts.CallLimit
	}
	return MaxCalls
}

// reserveCalls fails when n more calls would exceed the call limit.
func (imp *importer) reserveCalls(n int) error {
	if limit := imp.callLimit(); len(imp.stmts)+n > limit {
		return fmt.Errorf("the model would need more than %d calls", limit)
	}
	return nil
}

// foldable rejects a constant shape beyond the fold limit.
func (imp *importer) foldable(shape []lang.Dim) error {
	limit := imp.foldLimit()
	n := int64(1)
	for _, d := range shape {
		k, ok := d.IsConst()
		if !ok {
			return fmt.Errorf("extent %s is not known", d)
		}
		if k == 0 {
			return nil
		}
		if n > limit/k {
			return fmt.Errorf("a tensor of shape %s is too large to compute at import (over %d elements)", lang.ShapeString(shape), limit)
		}
		n *= k
	}
	return nil
}

func (imp *importer) foldLimit() int64 {
	if imp.opts.FoldLimit > 0 {
		return imp.opts.FoldLimit
	}
	return MaxFoldElements
}

// fold evaluates an instance on known arguments with the interpreter
// (a relayout by copying its elements).
func (imp *importer) fold(inst *ir.Instance, args []*value) ([]*value, error) {
	ins := make([]*tensor.Tensor, len(args))
	for i, a := range args {
		ins[i] = a.konst
	}
	res := relayout(inst, ins)
	var err error
	if res == nil {
		res, err = interp.EvalInstance(inst, ins, nil)
	}
	if err != nil {
		return nil, fmt.Errorf("folding %s: %w", inst.Op, err)
	}
	outs := make([]*value, len(res))
	for i, t := range res {
		outs[i] = constValue("", t, false)
		imp.foldedElements += int64(t.Len())
	}
	if budget := 8 * imp.foldLimit(); imp.foldedElements > budget {
		return nil, fmt.Errorf("constant folding has computed more than %d elements in all; the model is too large to fold", budget)
	}
	return outs, nil
}

// relayouts are the standard operators whose output holds their input's
// elements in the same (row-major) order, in another shape.
var relayouts = map[string]bool{"reshape": true, "flatten": true, "squeeze": true, "unsqueeze": true}

// relayout is the output of inst on ins when inst is a relayout: the
// input's elements in the output's shape, copied rather than interpreted
// one index at a time (a light model's reshaped weights took two fifths
// of its import). It is nil when inst is another operator, or when the shapes
// do not fit, for the interpreter to evaluate (and report).
func relayout(inst *ir.Instance, ins []*tensor.Tensor) []*tensor.Tensor {
	if !relayouts[inst.Op] || len(ins) != 1 || len(inst.Outputs) != 1 {
		return nil
	}
	out := inst.Outputs[0].Tensor
	shape, ok := lang.ConstShape(out.Shape)
	in := ins[0]
	if !ok || out.DType != in.DType || tensor.NumElements(shape) != in.Len() {
		return nil
	}
	t := &tensor.Tensor{DType: in.DType, Shape: shape, F: slices.Clone(in.F), I: slices.Clone(in.I)}
	return []*tensor.Tensor{t}
}

// nodeOrigin describes ONNX node n for reports: its name and operator,
// or its operator alone when it has no name.
func nodeOrigin(n *onnxpb.NodeProto) string {
	if n == nil {
		return ""
	}
	if n.GetName() == "" {
		return n.GetOpType()
	}
	return fmt.Sprintf("%s (%s)", n.GetName(), n.GetOpType())
}
