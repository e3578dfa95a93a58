package conform

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"tofuc/analysis/check"
	"tofuc/analysis/rounding"
	"tofuc/frontend/onnx"
	"tofuc/frontend/onnx/onnxpb"
	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/lang/precision"
	"tofuc/runtime/exec"
	"tofuc/runtime/tensor"
)

// Status is a test's outcome.
type Status string

// The outcomes of a test.
const (
	Pass        Status = "PASS"
	Fail        Status = "FAIL"
	Unsupported Status = "UNSUPPORTED"
)

// Outcome is the result of one test.
type Outcome struct {
	Name    string  `json:"name"`
	Path    string  `json:"path"`
	Status  Status  `json:"status"`
	Detail  string  `json:"detail,omitempty"`
	Seconds float64 `json:"seconds"`
	// OpTypes are the model's operator types, for per-operator tables.
	OpTypes []string `json:"op_types,omitempty"`
	// Kernels counts the kernels a compiled backend launched (the last
	// data set's plan).
	Kernels int `json:"kernels,omitempty"`
	// TimedOut says the test may still be running, on Config.Program:
	// the caller must not use that Program again.
	TimedOut bool `json:"timed_out,omitempty"`
}

// Line is the outcome as the runner prints it.
func (o Outcome) Line() string {
	if o.Detail == "" && o.Kernels > 0 {
		return fmt.Sprintf("%s %s (%d kernels)", o.Status, o.Name, o.Kernels)
	}
	if o.Detail == "" {
		return fmt.Sprintf("%s %s", o.Status, o.Name)
	}
	return fmt.Sprintf("%s %s: %s", o.Status, o.Name, o.Detail)
}

// dataSet is one set of inputs and expected outputs.
type dataSet struct {
	inputs  []datum // for the graph inputs without initializers, in order; missing: arange
	outputs []datum
}

// datum is a test input or output: a tensor, or a sequence of them; an
// optional (isOpt) holds one of those, or nothing (none).
type datum struct {
	tensor      *tensor.Tensor
	seq         []*tensor.Tensor
	isSeq       bool
	isOpt, none bool
}

// feed holds a model's inputs by ONNX name: tensors, and sequences; an
// optional's presence in present, its element among the others.
type feed struct {
	tensors map[string]*tensor.Tensor
	seqs    map[string][]*tensor.Tensor
	present map[string]bool
}

// Config tunes Run.
type Config struct {
	// Timeout gives up on a test after this long (0: never); it fails.
	Timeout time.Duration
	// Program supplies the stdlib; it is not safe for concurrent use.
	Program *check.Program
	// Explain re-evaluates a model whose float outputs fail in float64
	// and says how far tofuc's and the expected outputs are from that
	// reference (the outcome stays a failure).
	Explain bool
	// Backend runs the models (nil: the interpreter).
	Backend exec.Backend
	// Precision is the arithmetic a compiled Backend computes in: in the
	// modes that compute in f32, outputs are compared under the policy's
	// whole-model tolerance where it is looser than External, and by
	// their arg-max (analysis/rounding.CompareModel; docs/precision.md).
	Precision precision.Mode
}

// Run runs the test at path. A panic or a timeout is a failure.
func Run(path string, cfg Config) Outcome {
	start := time.Now()
	o := Outcome{Name: testName(path), Path: path}
	done := make(chan Outcome, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- Outcome{Status: Fail, Detail: fmt.Sprintf("internal error: %v", r)}
			}
		}()
		done <- run(path, cfg)
	}()
	var res Outcome
	if cfg.Timeout > 0 {
		select {
		case res = <-done:
		case <-time.After(cfg.Timeout):
			res = Outcome{Status: Fail, Detail: fmt.Sprintf("timed out after %s", cfg.Timeout), TimedOut: true}
		}
	} else {
		res = <-done
	}
	o.Status, o.Detail, o.OpTypes, o.TimedOut, o.Kernels = res.Status, res.Detail, res.OpTypes, res.TimedOut, res.Kernels
	o.Seconds = time.Since(start).Seconds()
	return o
}

func testName(path string) string {
	base := filepath.Base(filepath.Clean(path))
	return strings.TrimSuffix(base, ".onnx")
}

func run(path string, cfg Config) Outcome {
	model, err := modelPath(path)
	if err != nil {
		return Outcome{Status: Fail, Detail: err.Error()}
	}
	m, err := onnx.Load(model)
	if err != nil {
		return Outcome{Status: Fail, Detail: err.Error()}
	}
	o := Outcome{OpTypes: opTypes(m)}
	if reason := unsupportedTypes(m); reason != "" {
		o.Status, o.Detail = Unsupported, reason
		return o
	}
	sets, err := dataSets(path, m)
	if err != nil {
		o.Status, o.Detail = Fail, err.Error()
		return o
	}
	for i, set := range sets {
		status, detail, kernels := runSet(m, set, cfg, fmt.Sprintf("%s#%d.tdl", m.Path, i))
		o.Kernels = kernels
		if status != Pass {
			if len(sets) > 1 {
				detail = fmt.Sprintf("data set %d: %s", i, detail)
			}
			o.Status, o.Detail = status, detail
			return o
		}
	}
	o.Status = Pass
	return o
}

func opTypes(m *onnx.Model) []string {
	seen := map[string]bool{}
	var out []string
	for _, n := range m.Proto.GetGraph().GetNode() {
		if !seen[n.GetOpType()] {
			seen[n.GetOpType()] = true
			out = append(out, n.GetOpType())
		}
	}
	sort.Strings(out)
	return out
}

// runSet imports, checks and evaluates the model on one data set; it
// also returns the kernels a compiled backend launched.
func runSet(m *onnx.Model, set dataSet, cfg Config, tdlPath string) (Status, string, int) {
	in, err := graphInputs(m, set.inputs)
	if err != nil {
		return Fail, err.Error(), 0
	}
	res, err := onnx.Import(m, onnx.Options{Known: in.tensors, Sequences: in.types(), Optionals: in.present, Program: cfg.Program})
	var unsup *onnx.UnsupportedError
	if errors.As(err, &unsup) {
		return Unsupported, unsupportedSummary(unsup), 0
	}
	if err != nil {
		return Fail, "import: " + err.Error(), 0
	}
	ev, err := evaluateOn(cfg.Backend, cfg.Program, tdlPath, res, in)
	got, kernels := ev.outputs, ev.kernels
	if err != nil {
		return Fail, err.Error(), kernels
	}
	want := flatten(set.outputs)
	if len(got) != len(want) {
		return Fail, fmt.Sprintf("%d outputs, %d expected (sequence elements counted apart)", len(got), len(want)), kernels
	}
	for i := range want {
		if err := compareOutput(cfg.Precision, ev.depth, got[i], want[i]); err != nil {
			detail := fmt.Sprintf("output %d (%s): %v", i, portName(res.Outputs[i]), err)
			if cfg.Explain && want[i].DType.IsFloat() && got[i].DType == want[i].DType {
				detail += explain(cfg.Program, tdlPath, res, in, i, got[i], want[i])
			}
			return Fail, detail, kernels
		}
	}
	return Pass, "", kernels
}

// compareOutput compares an output of a model of contraction depth
// depth with ONNX's expected one: within External, or in a mode that
// computes in f32 within the looser of External and the mode's
// whole-model tolerance, with the same arg-max.
func compareOutput(p precision.Mode, depth int, got, want *tensor.Tensor) error {
	if !p.InF32() {
		return tensor.Compare(got, want, tensor.External)
	}
	tol := rounding.ModelTolerance(p, depth)
	tol.Rel, tol.Abs = max(tol.Rel, tensor.External.Rel), max(tol.Abs, tensor.External.Abs)
	if err := tensor.Compare(got, want, tol); err != nil {
		return err
	}
	if len(want.Shape) < 2 || !want.DType.IsFloat() {
		return nil
	}
	return rounding.SameArgMax(got, want, tol)
}

// flatten lists the tensors of data, a sequence's elements in order.
func flatten(data []datum) []*tensor.Tensor {
	var out []*tensor.Tensor
	for _, d := range data {
		if d.none {
			continue // an empty optional: no output
		}
		if d.isSeq {
			out = append(out, d.seq...)
		} else {
			out = append(out, d.tensor)
		}
	}
	return out
}

func portName(p onnx.Port) string {
	if p.Seq {
		return fmt.Sprintf("%s[%d]", p.ONNX, p.Elem)
	}
	return p.ONNX
}

// explain evaluates the model with every f32 tensor in f64 and reports
// the largest distance of tofuc's and the expected output from it.
func explain(prog *check.Program, path string, res *onnx.Result, in feed, k int, got, want *tensor.Tensor) string {
	wide := *res
	wide.Source = []byte(strings.ReplaceAll(string(res.Source), "f32[", "f64["))
	wide.Params = map[string]*tensor.Tensor{}
	for name, t := range res.Params {
		wide.Params[name] = widen(t)
	}
	wideIn := feed{tensors: map[string]*tensor.Tensor{}, seqs: map[string][]*tensor.Tensor{}}
	for name, t := range in.tensors {
		wideIn.tensors[name] = widen(t)
	}
	for name, ts := range in.seqs {
		for _, t := range ts {
			wideIn.seqs[name] = append(wideIn.seqs[name], widen(t))
		}
	}
	ref, err := Evaluate(prog, path+".f64", &wide, wideIn)
	if err != nil {
		return fmt.Sprintf(" (no float64 reference: %v)", err)
	}
	var ours, theirs float64
	for i := range want.Len() {
		r := ref[k].Flat(i)
		ours = max(ours, math.Abs(got.Flat(i)-r))
		theirs = max(theirs, math.Abs(want.Flat(i)-r))
	}
	return fmt.Sprintf(" (against a float64 evaluation: tofuc is off by at most %.3g, the expected output by %.3g)", ours, theirs)
}

func widen(t *tensor.Tensor) *tensor.Tensor {
	if t.DType != lang.F32 {
		return t
	}
	return tensor.FromFloats(lang.F64, t.Shape, t.F)
}

func unsupportedSummary(e *onnx.UnsupportedError) string {
	parts := make([]string, len(e.Ops))
	for i, op := range e.Ops {
		parts[i] = op.String()
	}
	return strings.Join(parts, "; ")
}

// Evaluate checks an imported model, loaded into prog as the file path,
// and runs it with the interpreter on its inputs, returning its outputs
// in order (a sequence's elements one by one).
func Evaluate(prog *check.Program, path string, res *onnx.Result, in feed) ([]*tensor.Tensor, error) {
	ev, err := evaluateOn(nil, prog, path, res, in)
	return ev.outputs, err
}

// evaluation is what evaluateOn found: the outputs, the kernels a
// compiled backend launched, and the model's contraction depth
// (rounding.ContractionDepth).
type evaluation struct {
	outputs []*tensor.Tensor
	kernels int
	depth   int
}

// evaluateOn is Evaluate on a backend (nil: the interpreter).
func evaluateOn(b exec.Backend, prog *check.Program, path string, res *onnx.Result, in feed) (evaluation, error) {
	mod, err := prog.LoadSource(path, res.Source)
	if err != nil {
		return evaluation{}, fmt.Errorf("the imported TDL does not parse: %w", err)
	}
	inputs := map[string]*tensor.Tensor{}
	set := map[string]ir.AttrValue{}
	for _, p := range res.Inputs {
		x := in.tensors[p.ONNX]
		if p.Seq {
			x = in.seqs[p.ONNX][p.Elem]
		}
		inputs[p.TDL] = x
		bindSymbols(set, p.Shape, x)
	}
	g, err := mod.Model("", set)
	if err != nil {
		return evaluation{}, fmt.Errorf("the imported TDL does not check: %w", err)
	}
	if b == nil {
		b = exec.Interp{}
	}
	ev := evaluation{depth: rounding.ContractionDepth(g)}
	s := exec.NewSession(g, b, 0)
	defer s.Close()
	out, err := s.Run(inputs, res.Params)
	if p, ok := s.Program().(interface{ Kernels() int }); ok {
		ev.kernels = p.Kernels()
	}
	if err != nil {
		return ev, fmt.Errorf("evaluation: %w", err)
	}
	ev.outputs = make([]*tensor.Tensor, len(g.Outputs))
	for i, v := range g.Outputs {
		ev.outputs[i] = out.Outputs[v.Name]
	}
	return ev, nil
}

// bindSymbols sets the model attribute of each symbolic extent of shape
// (a bare symbol) to x's extent there.
func bindSymbols(set map[string]ir.AttrValue, shape []lang.Dim, x *tensor.Tensor) {
	if x == nil || len(x.Shape) != len(shape) {
		return
	}
	for i, d := range shape {
		if syms := d.Symbols(); len(syms) == 1 && d.Equal(lang.Sym(syms[0])) {
			set[syms[0]] = ir.AttrValue{Kind: ir.AttrInt, Int: int64(x.Shape[i])}
		}
	}
}

// graphInputs pairs the data set's inputs with the graph inputs that have
// no initializer; a missing one is arange(n).reshape(shape) / n in its
// declared dtype (float32 for the light models) with symbolic extents 1.
func graphInputs(m *onnx.Model, data []datum) (feed, error) {
	in := feed{tensors: map[string]*tensor.Tensor{}, seqs: map[string][]*tensor.Tensor{}, present: map[string]bool{}}
	for k, vi := range dataInputs(m) {
		if k < len(data) && data[k].isOpt {
			in.present[vi.GetName()] = !data[k].none
		}
		switch {
		case k < len(data) && data[k].none:
		case k < len(data) && data[k].isSeq:
			in.seqs[vi.GetName()] = data[k].seq
		case k < len(data):
			in.tensors[vi.GetName()] = data[k].tensor
		default:
			t, err := arange(vi.GetType().GetTensorType())
			if err != nil {
				return feed{}, fmt.Errorf("input %q: %w", vi.GetName(), err)
			}
			in.tensors[vi.GetName()] = t
		}
	}
	return in, nil
}

// dataInputs are the graph inputs without an initializer, which the test
// data gives.
func dataInputs(m *onnx.Model) []*onnxpb.ValueInfoProto {
	g := m.Proto.GetGraph()
	inits := map[string]bool{}
	for _, t := range g.GetInitializer() {
		inits[t.GetName()] = true
	}
	var out []*onnxpb.ValueInfoProto
	for _, vi := range g.GetInput() {
		if !inits[vi.GetName()] {
			out = append(out, vi)
		}
	}
	return out
}

// types are the element types of the sequence inputs.
func (in feed) types() map[string][]check.TensorType {
	out := map[string][]check.TensorType{}
	for name, ts := range in.seqs {
		out[name] = []check.TensorType{} // an empty sequence has no elements
		for _, t := range ts {
			shape := make([]lang.Dim, len(t.Shape))
			for i, n := range t.Shape {
				shape[i] = lang.Const(int64(n))
			}
			out[name] = append(out[name], check.TensorType{DType: t.DType, Shape: shape})
		}
	}
	return out
}

func arange(tt *onnxpb.TypeProto_Tensor) (*tensor.Tensor, error) {
	dt, err := onnx.DType(tt.GetElemType())
	if err != nil {
		return nil, err
	}
	dims := tt.GetShape().GetDim()
	shape := make([]int, len(dims))
	n := 1
	for i, d := range dims {
		shape[i] = 1
		if d.Value != nil {
			shape[i] = int(d.GetDimValue())
		}
		if shape[i] < 0 || shape[i] > onnx.MaxElements || n*shape[i] > onnx.MaxElements {
			return nil, fmt.Errorf("shape %v is too large for a default input", shape)
		}
		n *= shape[i]
	}
	t := tensor.New(dt, shape)
	for i := range n {
		t.SetFlat(i, float64(i)/float64(n))
	}
	return t, nil
}

// modelPath is the model file of a test.
func modelPath(path string) (string, error) {
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return "", err
	case fi.IsDir():
		return filepath.Join(path, "model.onnx"), nil
	case filepath.Ext(path) != ".onnx":
		return "", fmt.Errorf("%s is neither a test directory nor a .onnx file", path)
	}
	return path, nil
}

// unsupportedTypes names a graph input or output that is not a tensor,
// or a sequence of tensors, of a supported element type.
func unsupportedTypes(m *onnx.Model) string {
	g := m.Proto.GetGraph()
	for _, vi := range append(append([]*onnxpb.ValueInfoProto{}, g.GetInput()...), g.GetOutput()...) {
		typ := vi.GetType()
		if opt := typ.GetOptionalType(); opt != nil {
			typ = opt.GetElemType()
		}
		if seq := typ.GetSequenceType(); seq != nil {
			typ = seq.GetElemType()
		}
		tt := typ.GetTensorType()
		if tt == nil {
			return fmt.Sprintf("%q is not a tensor or a sequence of tensors: TDL values are tensors, a sequence of known length a list of them; maps and optional values (which may be absent at run time) have no equivalent", vi.GetName())
		}
		if _, err := onnx.DType(tt.GetElemType()); err != nil {
			return fmt.Sprintf("%q: %v", vi.GetName(), err)
		}
	}
	return ""
}

// dataSets reads the inputs and expected outputs of a test.
func dataSets(path string, m *onnx.Model) ([]dataSet, error) {
	if filepath.Ext(path) != ".onnx" {
		return discoverDir(path, m)
	}
	prefix := strings.TrimSuffix(path, ".onnx")
	var set dataSet
	in := prefix + "_input_0.pb"
	if t, err := onnx.ReadTensorFile(in); err == nil {
		set.inputs = []datum{{tensor: t}}
	} else if !missingFile(err, in) {
		return nil, err
	}
	outs, err := readNumbered(prefix+"_output_%d.pb", nil)
	if err != nil {
		return nil, err
	}
	if len(outs) == 0 {
		return nil, fmt.Errorf("no expected outputs %s_output_0.pb", prefix)
	}
	set.outputs = outs
	return []dataSet{set}, nil
}

func discoverDir(dir string, m *onnx.Model) ([]dataSet, error) {
	setDirs, _ := filepath.Glob(filepath.Join(dir, "test_data_set_*"))
	sort.Strings(setDirs)
	if len(setDirs) == 0 {
		return nil, fmt.Errorf("%s has no test_data_set_* directories", dir)
	}
	inSeq, outSeq := kinds(dataInputs(m)), kinds(m.Proto.GetGraph().GetOutput())
	var sets []dataSet
	for _, d := range setDirs {
		ins, err := readNumbered(filepath.Join(d, "input_%d.pb"), inSeq)
		if err != nil {
			return nil, err
		}
		outs, err := readNumbered(filepath.Join(d, "output_%d.pb"), outSeq)
		if err != nil {
			return nil, err
		}
		sets = append(sets, dataSet{inputs: ins, outputs: outs})
	}
	return sets, nil
}

// valueKind is how a test's data file holds a value.
type valueKind int

const (
	tensorKind valueKind = iota
	sequenceKind
	optionalKind
)

// kinds says which of the values are sequences and optionals.
func kinds(vis []*onnxpb.ValueInfoProto) []valueKind {
	out := make([]valueKind, len(vis))
	for i, vi := range vis {
		switch typ := vi.GetType(); {
		case typ.GetOptionalType() != nil:
			out[i] = optionalKind
		case typ.GetSequenceType() != nil:
			out[i] = sequenceKind
		}
	}
	return out
}

// readNumbered reads pattern with 0, 1, ... until a file is missing; the
// files are tensors unless kinds says otherwise.
func readNumbered(pattern string, kinds []valueKind) ([]datum, error) {
	var out []datum
	for i := 0; ; i++ {
		var d datum
		var err error
		path := fmt.Sprintf(pattern, i)
		kind := tensorKind
		if i < len(kinds) {
			kind = kinds[i]
		}
		switch kind {
		case sequenceKind:
			d.isSeq = true
			d.seq, err = onnx.ReadSequenceFile(path)
		case optionalKind:
			var present bool
			d.isOpt = true
			d.tensor, d.seq, d.isSeq, present, err = onnx.ReadOptionalFile(path)
			d.none = err == nil && !present
		default:
			d.tensor, err = onnx.ReadTensorFile(path)
		}
		if missingFile(err, path) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
}

// missingFile reports whether err is the error of reading path, which
// does not exist; a missing file that path refers to (a tensor's external
// data, whose error the reader's wraps) is an error of the data set.
func missingFile(err error, path string) bool {
	var pe *fs.PathError
	return errors.As(err, &pe) && pe.Path == path && errors.Is(pe.Err, fs.ErrNotExist)
}
