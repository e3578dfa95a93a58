package main

import (
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strings"
	"tofuc/lang/suggest"
	"tofuc/parser"
	"tofuc/pipeline"

	"tofuc/analysis/autodiff"
	"tofuc/analysis/check"
	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/lang/precision"
	"tofuc/runtime/exec"
	"tofuc/runtime/interp"
	"tofuc/runtime/npy"
	"tofuc/runtime/planio"
	"tofuc/runtime/tensor"
)

type evalFlags struct {
	model, op, out, params string
	sets, attrs, ins       []string
	seed                   uint64
	random                 bool
	train                  trainFlags
	steps                  int
	backend                string
	threads                int
	// The compiled backends compile as tofuc compile does with these.
	devices    int
	memory     int64
	objective  string
	noOptimize bool
	precision  precision.Mode
	backends   []string
}

func runEval(args []string, stdout, stderr io.Writer) int {
	fs := flagSet("eval", stderr)
	var f evalFlags
	fs.StringVar(&f.model, "model", "", "the model to evaluate (default: the only one)")
	fs.StringVar(&f.op, "op", "", "evaluate this operator instead of a model")
	fs.StringArrayVar(&f.sets, "set", nil, "override a model attribute, NAME=VALUE (repeatable)")
	fs.StringArrayVar(&f.attrs, "attr", nil, "an attribute of the --op operator, NAME=VALUE (repeatable)")
	fs.StringArrayVar(&f.ins, "in", nil, "an input, NAME=PATH.npy (repeatable)")
	fs.BoolVar(&f.random, "random-inputs", false, "draw inputs not given with --in from the seed")
	fs.StringVar(&f.params, "params", "", "parameters, one .npz (missing ones are initialised from the seed)")
	fs.Uint64Var(&f.seed, "seed", 0, "seed for parameter initialisation and random inputs")
	fs.StringVar(&f.out, "out", "", "directory for the outputs (created if missing)")
	f.train.register(fs)
	fs.IntVar(&f.steps, "steps", 1, "with --train: the number of training steps (the loss is printed after each)")
	fs.StringVar(&f.backend, "backend", "interp", "how to run it: interp (the reference interpreter), cpu (compiled host kernels) or simt (compiled GPU kernels, emulated)")
	fs.IntVar(&f.threads, "threads", 0, "host threads of the cpu and simt backends (0: all cores)")
	fs.IntVar(&f.devices, "devices", 1, "compiled backends: compile for N devices, as tofuc compile --devices")
	fs.Var((*byteSize)(&f.memory), "memory", "compiled backends, with --devices: the memory per device, as tofuc compile --memory")
	registerObjective(fs, &f.objective)
	fs.BoolVar(&f.noOptimize, "no-optimize", false, "compiled backends: skip the verified rewrites, as tofuc compile --no-optimize")
	registerPrecision(fs, &f.precision, "compiled backends: ")
	registerBackends(fs, &f.backends, "compiled backends: ")
	if status, done := parseFlags(fs, args, stdout); done {
		return status
	}
	switch {
	case fs.NArg() != 1:
		return usageError(stderr, "eval", "expected one FILE, found %d", fs.NArg())
	case f.out == "":
		return usageError(stderr, "eval", "--out DIR is required")
	case f.op != "" && (f.model != "" || len(f.sets) > 0):
		return usageError(stderr, "eval", "--op excludes --model and --set (use --attr)")
	case f.op == "" && len(f.attrs) > 0:
		return usageError(stderr, "eval", "--attr goes with --op (use --set for models)")
	case f.op != "" && f.train.train:
		return usageError(stderr, "eval", "--train works on models, not on --op")
	case f.op != "" && f.random:
		return usageError(stderr, "eval", "--random-inputs works on models: an operator's shapes are symbolic, so give each input with --in NAME=PATH.npy (eval of a model with --random-inputs writes the inputs it draws under DIR/inputs)")
	case f.steps < 1:
		return usageError(stderr, "eval", "--steps must be at least 1")
	case checkThreads(f.threads) != nil:
		return usageError(stderr, "eval", "%v", checkThreads(f.threads))
	case !f.train.train && f.train.changed(fs):
		return usageError(stderr, "eval", "--steps, --loss, --optimizer, --lr, --loss-scale, --lr-schedule and --clip-norm go with --train")
	case f.op != "" && f.backend != "interp":
		return usageError(stderr, "eval", "--op runs on the interpreter (compile a model to use --backend %s)", f.backend)
	case !slices.Contains(pipeline.BackendNames, f.backend):
		return usageError(stderr, "eval", "unknown backend %q (expected %s)", f.backend, strings.Join(pipeline.BackendNames, ", "))
	case f.backend == "interp" && (fs.Changed("devices") || fs.Changed("memory") || fs.Changed("objective") || fs.Changed("no-optimize") || fs.Changed("precision")):
		return usageError(stderr, "eval", "--devices, --memory, --objective, --no-optimize and --precision go with a compiled --backend")
	case f.train.validate() != nil:
		return usageError(stderr, "eval", "%v", f.train.validate())
	}
	specs, err := planio.Specs(f.ins)
	if err != nil {
		return usageError(stderr, "eval", "%v", err)
	}
	if _, err := pipeline.ParseSets(append(f.sets, f.attrs...)); err != nil {
		return usageError(stderr, "eval", "%v", err)
	}
	inputs, err := readInputs(specs)
	if err != nil {
		return fail(stderr, err)
	}
	opts, err := compileOptions(f.devices, f.memory, f.objective, f.noOptimize, f.precision, f.backends, &f.train, false)
	if err != nil {
		return usageError(stderr, "eval", "%v", err)
	}
	var outputs, params map[string]*tensor.Tensor
	var out planio.Folder
	out.Read(readFiles(specs, f.params)...)
	if f.op != "" {
		outputs, err = evalOp(fs.Arg(0), f, inputs)
	} else {
		outputs, params, err = evalModel(fs.Arg(0), f, opts, inputs, &out, stdout, stderr)
	}
	if err != nil {
		return fail(stderr, err)
	}
	out.Outputs(outputs)
	if len(params) > 0 {
		out.Tensors("params.npz", count(len(params), "parameter"), params)
	}
	if err := out.Write(f.out, stdout); err != nil {
		return fail(stderr, err)
	}
	return exitOK
}

// checkMemory refuses a model whose tensors need more memory than the
// machine has, before its inputs are drawn or read: the interpreter's
// peak (exec.Interp.Peak) on the interpreter, the inputs, parameters
// and outputs (exec.Resident) on the compiled backends (their plan's
// arena is checked when it is loaded).
func checkMemory(g *ir.Graph, backend string) error {
	need := exec.Resident(g)
	if backend == "interp" {
		need = exec.Interp{}.Peak(g)
	}
	return exec.CheckMemory("model "+g.Name, need)
}

// evalBackend is the backend --backend names (a compiled one compiles m
// as opts say); the interpreter shows its progress node by node on a
// terminal.
func evalBackend(f evalFlags, m *pipeline.Model, opts pipeline.Options, stderr io.Writer) (exec.Backend, error) {
	if f.backend != "interp" {
		return pipeline.NewBackend(f.backend, m, opts, f.threads)
	}
	b := exec.Interp{}
	if isTerminal(os.Stderr) && stderr == os.Stderr && !f.train.train {
		b.Progress = func(i, n int, name string) {
			fmt.Fprintf(stderr, "\r[%d/%d] %-40.40s", i+1, n, name)
			if i+1 == n {
				fmt.Fprint(stderr, "\r\033[K")
			}
		}
	}
	return b, nil
}

func fail(stderr io.Writer, err error) int {
	if l, ok := err.(lang.ErrorList); ok {
		printDiagnostics(stderr, l)
	} else {
		fmt.Fprintln(stderr, err)
	}
	return exitUser
}

func readInputs(specs map[string]string) (map[string]*tensor.Tensor, error) {
	out := map[string]*tensor.Tensor{}
	for name, path := range specs {
		t, err := npy.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("--in %s: %w", name, err)
		}
		out[name] = t
	}
	return out, nil
}

// evalModel runs the model of path (training it with --train) and adds
// the inputs it drew and the optimizer's state to out.
func evalModel(path string, f evalFlags, opts pipeline.Options, inputs map[string]*tensor.Tensor, out *planio.Folder, stdout, stderr io.Writer) (outs, params map[string]*tensor.Tensor, err error) {
	set, err := pipeline.ParseSets(f.sets)
	if err != nil {
		return nil, nil, err
	}
	pm, err := pipeline.Load(path, f.model, set)
	if err != nil {
		return nil, nil, err
	}
	m, g, weights := pm.Module, pm.Graph, pm.Weights
	if err := checkInputs(m, g, inputs); err != nil {
		return nil, nil, err
	}
	var next map[string]string
	model := g
	if f.train.train {
		if g, next, err = trainingGraph(m, g, &f.train, f.precision); err != nil {
			return nil, nil, err
		}
	}
	if err := checkMemory(g, f.backend); err != nil {
		return nil, nil, err
	}
	for _, in := range g.Inputs {
		if inputs[in.Name] != nil || autodiff.SetEachStep(in.Name) && f.train.train {
			continue // the training loop sets Adam's step and dropout's seed at each step
		}
		if !f.random {
			return nil, nil, fmt.Errorf("input %s (%s%s) is missing: give it with --in %s=PATH.npy, or use --random-inputs", in.Name, in.DType, lang.ShapeString(in.Shape), in.Name)
		}
		t, err := randomInput(in, f.seed, g.LabelClasses(in))
		if err != nil {
			return nil, nil, err
		}
		inputs[in.Name] = t
		addDrawn(out, in.Name, t)
	}
	given := map[string]*tensor.Tensor{}
	for name, t := range weights {
		given[name] = t
	}
	if f.params != "" {
		override, err := npy.ReadNPZ(f.params)
		if err != nil {
			return nil, nil, fmt.Errorf("--params: %w", err)
		}
		for name, t := range override {
			given[name] = t
		}
	}
	if err := matchParams(g, given); err != nil {
		return nil, nil, fmt.Errorf("parameters: %w", err)
	}
	for _, in := range g.Inputs {
		if t, ok := inputs[in.Name]; ok { // not Adam's step, which each step sets
			inputs[in.Name] = npy.AsDType(t, in.DType)
		}
	}
	b, err := evalBackend(f, pm, opts, stderr)
	if err != nil {
		return nil, nil, err
	}
	if !f.train.train {
		res, err := exec.Run(g, b, inputs, given, f.seed)
		if err != nil {
			return nil, nil, err
		}
		return res.Outputs, res.Params, nil
	}
	outs, params, err = train(g, next, b, inputs, given, f, stdout)
	if err != nil {
		return nil, nil, err
	}
	state := optimizerState(model, params)
	if len(state) > 0 {
		out.Tensors("optimizer.npz", count(len(state), "optimizer state tensor"), state)
	}
	return outs, params, nil
}

// optimizerState splits the optimizer's state (momentum, Adam moments: the
// training graph's parameters the model does not have) out of params.
func optimizerState(model *ir.Graph, params map[string]*tensor.Tensor) (state map[string]*tensor.Tensor) {
	own := map[string]bool{}
	for _, p := range model.Params {
		own[p.Value.Name] = true
	}
	state = map[string]*tensor.Tensor{}
	for name, t := range params {
		if !own[name] {
			state[name] = t
			delete(params, name)
		}
	}
	return state
}

// train runs training steps on backend b, feeding each step's updated
// parameters to the next, and prints the loss of every step.
func train(g *ir.Graph, next map[string]string, b exec.Backend, inputs, params map[string]*tensor.Tensor, f evalFlags, stdout io.Writer) (outs, last map[string]*tensor.Tensor, err error) {
	loop := pipeline.NewLoop(g, next, b, f.seed)
	defer loop.Close()
	var loss float64
	for step := 1; step <= f.steps; step++ {
		var nextParams map[string]*tensor.Tensor
		loss, nextParams, err = loop.Step(step, inputs, params)
		if err != nil && !errors.Is(err, pipeline.ErrDiverged) {
			return nil, nil, err
		}
		fmt.Fprintf(stdout, "step %d: loss %.6g\n", step, loss)
		if err != nil {
			return nil, nil, err
		}
		params = nextParams
	}
	lt := tensor.Scalar(lang.F32, loss)
	for _, v := range g.Outputs {
		if v.Name == autodiff.LossOutput {
			lt = tensor.Scalar(v.DType, loss)
		}
	}
	return map[string]*tensor.Tensor{autodiff.LossOutput: lt}, params, nil
}

// matchParams checks that every member of a parameter file names a
// parameter of the model (a typo would otherwise go unnoticed), converting
// the f32 arrays NumPy files hold for bf16 parameters.
func matchParams(g *ir.Graph, given map[string]*tensor.Tensor) error {
	byName := map[string]*ir.Value{}
	var names []string
	for _, p := range g.Params {
		byName[p.Value.Name] = p.Value
		names = append(names, p.Value.Name)
	}
	var unknown []string
	for name, t := range given {
		v, ok := byName[name]
		if !ok {
			unknown = append(unknown, name)
			continue
		}
		given[name] = npy.AsDType(t, v.DType)
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return fmt.Errorf("the model has no parameters %s (it has %d: %s)", strings.Join(unknown, ", "), len(names), abbreviate(names, 8))
	}
	return nil
}

func abbreviate(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:n], ", ") + ", ..."
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// randomInput draws an input from the seed: floats normal(0, 1), integers
// uniform in [0, 10) (in [0, classes) for labels), bools fair.
func randomInput(v *ir.Value, seed uint64, classes int64) (*tensor.Tensor, error) {
	shape, ok := lang.ConstShape(v.Shape)
	if !ok {
		return nil, fmt.Errorf("input %s has the symbolic shape %s: give it with --in", v.Name, lang.ShapeString(v.Shape))
	}
	h := fnv.New64a()
	h.Write([]byte(v.Name))
	r := rand.New(rand.NewPCG(seed, h.Sum64()))
	span := 10
	if classes > 0 {
		span = int(classes)
	}
	t := tensor.New(v.DType, shape)
	for i := range t.Len() {
		switch {
		case v.DType.IsFloat():
			t.SetFlat(i, r.NormFloat64())
		case v.DType == lang.Bool:
			t.SetFlat(i, float64(r.IntN(2)))
		default:
			t.SetFlat(i, float64(r.IntN(span)))
		}
	}
	return t, nil
}

func evalOp(path string, f evalFlags, inputs map[string]*tensor.Tensor) (map[string]*tensor.Tensor, error) {
	prog, err := check.NewProgram(parser.Parse)
	if err != nil {
		return nil, err
	}
	m, _, err := pipeline.LoadFile(prog, path)
	if err != nil {
		return nil, err
	}
	decl := m.Op(f.op)
	if decl == nil {
		return nil, fmt.Errorf("%s: no operator %s%s", m.Path, f.op, suggest.DidYouMean(f.op, m.OpNames()))
	}
	attrs, err := pipeline.ParseSets(f.attrs)
	if err != nil {
		return nil, err
	}
	args := make([]*tensor.Tensor, len(decl.Inputs))
	types := make([]check.TensorType, len(decl.Inputs))
	for i, in := range decl.Inputs {
		t := inputs[in.Name]
		if t == nil {
			return nil, fmt.Errorf("operator %s needs input %s: give it with --in %s=PATH.npy", decl.Name, in.Name, in.Name)
		}
		args[i] = t
		types[i] = check.TensorType{DType: t.DType, Shape: constDims(t.Shape)}
		delete(inputs, in.Name)
	}
	for name := range inputs {
		return nil, fmt.Errorf("operator %s has no input %s", decl.Name, name)
	}
	inst, err := check.Instantiate(decl, attrs, types, lang.Pos{File: "command line"})
	if err != nil {
		return nil, err
	}
	if err := exec.CheckMemory("operator "+decl.Name, interp.DefBytes(append(slices.Clone(inst.Locals), inst.Outputs...))); err != nil {
		return nil, err
	}
	outs, err := interp.EvalInstance(inst, args, nil)
	if err != nil {
		return nil, err
	}
	res := map[string]*tensor.Tensor{}
	for i, d := range inst.Outputs {
		res[d.Tensor.Name] = outs[i]
	}
	return res, nil
}

func constDims(shape []int) []lang.Dim {
	out := make([]lang.Dim, len(shape))
	for i, n := range shape {
		out[i] = lang.Const(int64(n))
	}
	return out
}
