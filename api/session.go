package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sync"

	"tofuc/analysis/autodiff"
	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/lang/precision"
	"tofuc/pipeline"
	"tofuc/runtime/cpu"
	"tofuc/runtime/dynamic"
	"tofuc/runtime/executor"
	"tofuc/runtime/plan"
	"tofuc/runtime/planio"
	"tofuc/runtime/safefile"
	"tofuc/runtime/simt"
	"tofuc/runtime/tensor"
)

// Request is one call. Op says what it does: compile (Compile), open
// (Dir, Backend, Threads), run (Model, Tensors: the inputs), train_step
// (Model, Tensors, Step), params (Model), set_params (Model, Tensors),
// save (Model, Dir) or close (Model).
type Request struct {
	Op      string       `json:"op"`
	Model   int64        `json:"model,omitempty"`
	Compile *CompileArgs `json:"compile,omitempty"`
	Dir     string       `json:"dir,omitempty"`
	Backend string       `json:"backend,omitempty"`
	Threads int          `json:"threads,omitempty"`
	Tensors []TensorArg  `json:"tensors,omitempty"`
	// Step is a training step's number, Adam's step input (0: the one
	// after the model's last).
	Step int `json:"step,omitempty"`
}

// CompileArgs are tofuc compile's arguments (pipeline.Choices; the
// names of its flags).
type CompileArgs struct {
	Path  string   `json:"path"`
	Graph string   `json:"graph,omitempty"`
	Set   []string `json:"set,omitempty"` // NAME=VALUE, as --set
	// Dir keeps the compiled plan in a folder ("": a temporary one,
	// removed when the model is closed).
	Dir        string   `json:"dir,omitempty"`
	Devices    *int     `json:"devices,omitempty"` // nil: 1
	Memory     int64    `json:"memory,omitempty"`
	Objective  string   `json:"objective,omitempty"` // time or bytes, as --objective
	NoOptimize bool     `json:"no_optimize,omitempty"`
	Precision  string   `json:"precision,omitempty"`
	Backends   []string `json:"backends,omitempty"`
	Train      bool     `json:"train,omitempty"`
	Loss       string   `json:"loss,omitempty"`
	Optimizer  string   `json:"optimizer,omitempty"`
	LR         float64  `json:"lr,omitempty"`
	LossScale  float64  `json:"loss_scale,omitempty"`
	LRSchedule string   `json:"lr_schedule,omitempty"`
	ClipNorm   float64  `json:"clip_norm,omitempty"`
	Seed       uint64   `json:"seed,omitempty"`
	Jobs       int      `json:"jobs,omitempty"`
	// Dynamic compiles for any batch size, as --dynamic NAME[=N,...].
	Dynamic string `json:"dynamic,omitempty"`
	// Backend and Threads are the runtime the plan is opened on (cpu or
	// simt) and its host threads.
	Backend string `json:"backend,omitempty"`
	Threads int    `json:"threads,omitempty"`
}

// TensorArg is a tensor of a request: its raw array is the call's
// buffer Buffer.
type TensorArg struct {
	Name   string `json:"name"`
	DType  string `json:"dtype"`
	Shape  []int  `json:"shape"`
	Buffer int    `json:"buffer"`
}

// Reply is a call's answer: Error, or what the call gives. Tensors
// describe the tensors returned beside it, in order.
type Reply struct {
	Error   string        `json:"error,omitempty"`
	Model   int64         `json:"model,omitempty"`
	Info    *Info         `json:"info,omitempty"`
	Tensors []TensorReply `json:"tensors,omitempty"`
	Loss    *float64      `json:"loss,omitempty"`
	Step    int           `json:"step,omitempty"`
}

// TensorReply describes a returned tensor: its raw array holds its
// dtype as NumPy stores it (npy.Stored: bf16 as f32).
type TensorReply struct {
	Name  string `json:"name"`
	DType string `json:"dtype"`
	Shape []int  `json:"shape"`
}

// Info describes an open model.
type Info struct {
	Dir       string            `json:"dir"`
	Backend   string            `json:"backend"`
	Graph     string            `json:"graph"`
	Devices   int               `json:"devices"`
	Precision string            `json:"precision"`
	Inputs    []plan.Binding    `json:"inputs"`
	Outputs   []plan.Binding    `json:"outputs"`
	Params    []plan.Binding    `json:"params"`
	Next      map[string]string `json:"next,omitempty"`
	Cached    bool              `json:"cached,omitempty"`
	// Dynamic describes a plan compiled for any batch size (Inputs and
	// Outputs are then those of its largest size).
	Dynamic *dynamic.Manifest `json:"dynamic,omitempty"`
}

// Session holds the models open in a process by handle.
type Session struct {
	mu     sync.Mutex
	models map[int64]*model
	last   int64
}

// model is an open plan with its parameters.
type model struct {
	mu   sync.Mutex // one call at a time
	plan *plan.Plan
	prog program
	// dyn runs a dynamic plan (prog is then dyn); plan is its largest
	// size's.
	dyn     *dynamic.Runner
	dir     string
	temp    bool // dir is removed at close
	backend string
	params  map[string]*tensor.Tensor
	step    int    // training steps run
	seed    uint64 // the compile's seed, which dropout's seed mixes in
	cached  bool
}

// program runs an open plan: an executor.Program, or a dynamic.Runner.
type program interface {
	Run(inputs, params map[string]*tensor.Tensor) (map[string]*tensor.Tensor, error)
	Close() error
}

// NewSession returns an empty session.
func NewSession() *Session { return &Session{models: map[int64]*model{}} }

// Handle runs the request in JSON req, whose tensors' raw arrays are
// buffers, and returns the reply in JSON and the tensors it describes.
// Every failure is in the reply's Error.
func (s *Session) Handle(req []byte, buffers [][]byte) ([]byte, []*tensor.Tensor) {
	var r Request
	var reply Reply
	var out []*tensor.Tensor
	err := json.Unmarshal(req, &r)
	if err != nil {
		err = fmt.Errorf("request: %w", err)
	} else {
		reply, out, err = s.safeHandle(&r, buffers)
	}
	if err != nil {
		reply, out = Reply{Error: err.Error()}, nil
	}
	b, err := json.Marshal(reply)
	if err != nil { // a NaN loss, which JSON cannot hold, is refused before
		b, _ = json.Marshal(Reply{Error: err.Error()})
		out = nil
	}
	return b, out
}

// safeHandle is handle, with a panic of the compiler or a runtime an
// error: the caller's process (a Python interpreter) lives on.
func (s *Session) safeHandle(r *Request, buffers [][]byte) (reply Reply, out []*tensor.Tensor, err error) {
	defer func() {
		if p := recover(); p != nil {
			reply, out, err = Reply{}, nil, fmt.Errorf("internal error in tofuc (please report it): %v\n%s", p, debug.Stack())
		}
	}()
	return s.handle(r, buffers)
}

// ops are the requests a session serves.
var ops = []string{"compile", "open", "info", "run", "train_step", "params", "set_params", "save", "close"}

func (s *Session) handle(r *Request, buffers [][]byte) (Reply, []*tensor.Tensor, error) {
	if !slices.Contains(ops, r.Op) {
		return Reply{}, nil, fmt.Errorf("unknown request %q (expected one of %v)", r.Op, ops)
	}
	switch r.Op {
	case "compile":
		if r.Compile == nil {
			return Reply{}, nil, errors.New("compile: no arguments")
		}
		return s.add(compileModel(r.Compile))
	case "open":
		return s.add(openModel(r.Dir, r.Backend, r.Threads, ""))
	}
	m, err := s.model(r.Model)
	if err != nil {
		return Reply{}, nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.prog == nil {
		return Reply{}, nil, fmt.Errorf("model %d is closed", r.Model)
	}
	switch r.Op {
	case "info":
		return Reply{Model: r.Model, Info: m.info()}, nil, nil
	case "run":
		return m.run(r.Tensors, buffers)
	case "train_step":
		return m.trainStep(r.Tensors, buffers, r.Step)
	case "params":
		return tensorsReply(m.params, m.plan.Params)
	case "set_params":
		return Reply{}, nil, m.setParams(r.Tensors, buffers)
	case "save":
		return Reply{}, nil, m.save(r.Dir)
	case "close":
		s.mu.Lock()
		delete(s.models, r.Model)
		s.mu.Unlock()
		return Reply{}, nil, m.close()
	}
	return Reply{}, nil, fmt.Errorf("unknown request %q", r.Op)
}

// add registers a new model under a fresh handle.
func (s *Session) add(m *model, err error) (Reply, []*tensor.Tensor, error) {
	if err != nil {
		return Reply{}, nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last++
	s.models[s.last] = m
	return Reply{Model: s.last, Info: m.info()}, nil, nil
}

func (s *Session) model(h int64) (*model, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.models[h]
	if !ok {
		return nil, fmt.Errorf("no model %d (closed, or never opened)", h)
	}
	return m, nil
}

// Close closes every model of the session, each after the call it runs.
func (s *Session) Close() {
	s.mu.Lock()
	models := s.models
	s.models = map[int64]*model{}
	s.mu.Unlock()
	for _, m := range models {
		m.mu.Lock()
		if m.prog != nil {
			m.close()
		}
		m.mu.Unlock()
	}
}

// compileModel compiles as tofuc compile does, then opens the plan.
func compileModel(a *CompileArgs) (*model, error) {
	set, err := pipeline.ParseSets(a.Set)
	if err != nil {
		return nil, err
	}
	prec, err := precision.Parse(a.Precision)
	if err != nil {
		return nil, err
	}
	devices := 1
	if a.Devices != nil {
		devices = *a.Devices
	}
	c := pipeline.Choices{Devices: devices, Memory: a.Memory, Objective: a.Objective, NoOptimize: a.NoOptimize, Precision: prec, Backends: a.Backends}
	if a.Train {
		c.Train = &pipeline.TrainChoices{Loss: a.Loss, Optimizer: a.Optimizer, LR: a.LR, LossScale: a.LossScale, Schedule: a.LRSchedule, ClipNorm: a.ClipNorm}
	}
	opts, err := c.Options()
	if err != nil {
		return nil, err
	}
	if a.Jobs < 0 {
		return nil, fmt.Errorf("jobs must not be negative")
	}
	opts.Seed, opts.Jobs, opts.Threads = a.Seed, a.Jobs, a.Threads
	backend := a.Backend
	if backend == "" {
		backend = cpu.Kind.Name
	}
	if err := checkRuntime(backend, a.Threads); err != nil {
		return nil, err
	}
	dir, temp := a.Dir, false
	if dir == "" {
		if dir, err = os.MkdirTemp("", "tofuc-model-*"); err != nil {
			return nil, err
		}
		temp = true
	}
	cached, err := compileInto(a, set, opts, dir)
	if err == nil {
		var opened *model
		if opened, err = openModel(dir, backend, a.Threads, ""); err == nil {
			opened.temp, opened.cached, opened.seed = temp, cached, a.Seed
			return opened, nil
		}
	}
	if temp {
		os.RemoveAll(dir)
	}
	return nil, err
}

// compileInto compiles the model into dir, a dynamic plan with
// a.Dynamic, and says whether it came from the compile cache.
func compileInto(a *CompileArgs, set map[string]ir.AttrValue, opts pipeline.Options, dir string) (cached bool, err error) {
	if a.Dynamic != "" {
		d, err := pipeline.ParseDynamic(a.Dynamic)
		if err != nil {
			return false, err
		}
		res, err := pipeline.CompileDynamic(a.Path, a.Graph, set, *d, dir, opts)
		if err != nil {
			return false, err
		}
		return !slices.ContainsFunc(res.Results, func(r *pipeline.Result) bool { return !r.Cached }), nil
	}
	m, err := pipeline.Load(a.Path, a.Graph, set)
	if err != nil {
		return false, err
	}
	res, err := pipeline.Compile(m, dir, opts)
	if err != nil {
		return false, err
	}
	return res.Cached, nil
}

// checkRuntime rejects a runtime models cannot run on.
func checkRuntime(backend string, threads int) error {
	if backend != cpu.Kind.Name && backend != simt.Kind.Name {
		return fmt.Errorf("unknown backend %q (expected %s or %s)", backend, cpu.Kind.Name, simt.Kind.Name)
	}
	return pipeline.CheckThreads(threads)
}

// openModel opens the plan compiled into dir on a runtime, with the
// parameters of given ("": those the plan records), as tofuc run does.
func openModel(dir, backend string, threads int, given string) (*model, error) {
	if backend == "" {
		backend = cpu.Kind.Name
	}
	if err := checkRuntime(backend, threads); err != nil {
		return nil, err
	}
	m := &model{dir: dir, backend: backend}
	if dynamic.Is(dir) {
		if err := m.openDynamic(threads, given); err != nil {
			return nil, err
		}
		return m, nil
	}
	var prog *executor.Program
	p, err := planio.Read(dir, func(p *plan.Plan) (err error) {
		if prog, err = executor.Open(p, dir, backend, executor.Options{Threads: threads}); err != nil {
			return err
		}
		m.params, err = planio.Params(p, dir, given)
		return err
	})
	if err != nil {
		if prog != nil {
			prog.Close()
		}
		return nil, err
	}
	m.plan, m.prog = p, prog
	if err := m.readState(); err != nil {
		m.prog.Close()
		return nil, err
	}
	return m, nil
}

// openDynamic opens the dynamic plan in m.dir (runtime/dynamic).
func (m *model) openDynamic(threads int, given string) error {
	r, err := dynamic.Open(m.dir, dynamic.OnKind(m.backend, executor.Options{Threads: threads}))
	if err != nil {
		return err
	}
	if m.params, err = r.Params(given); err != nil {
		r.Close()
		return err
	}
	m.plan, m.prog, m.dyn = r.Plan, r, r
	return nil
}

func (m *model) info() *Info {
	p := m.plan
	info := &Info{Dir: m.dir, Backend: m.backend, Graph: p.Model, Devices: p.Devices, Precision: p.Precision.String(),
		Inputs: p.Inputs, Outputs: p.Outputs, Params: p.Params, Next: p.Next, Cached: m.cached}
	if m.dyn != nil {
		info.Dynamic = m.dyn.Manifest
	}
	return info
}

// run runs the plan once on the inputs given.
func (m *model) run(args []TensorArg, buffers [][]byte) (Reply, []*tensor.Tensor, error) {
	p := m.plan
	if m.dyn != nil {
		shapes := map[string][]int{}
		for _, a := range args {
			shapes[a.Name] = a.Shape
		}
		n, err := m.dyn.Batch(shapes)
		if err != nil {
			return Reply{}, nil, err
		}
		p = m.dyn.At(n)
	}
	inputs, err := tensorsOf(args, buffers, p.Inputs, "input")
	if err != nil {
		return Reply{}, nil, err
	}
	outputs, err := m.prog.Run(inputs, m.params)
	if err != nil {
		return Reply{}, nil, err
	}
	return tensorsReply(outputs, p.Outputs)
}

// trainStep runs one step of a training plan and keeps the parameters
// it updates for the next. The inputs a step sets (Adam's step number,
// dropout's seed: autodiff.StepValues) are those of step, or of the one
// after the last, unless given.
func (m *model) trainStep(args []TensorArg, buffers [][]byte, step int) (Reply, []*tensor.Tensor, error) {
	if len(m.plan.Next) == 0 {
		return Reply{}, nil, fmt.Errorf("%s is not a training plan: compile it with train=True", m.plan.Model)
	}
	switch {
	case step < 0:
		return Reply{}, nil, fmt.Errorf("step %d: steps count from 1", step)
	case step == 0:
		step = m.step + 1
	}
	dtypeOf := func(name string) (lang.DType, bool) {
		i := slices.IndexFunc(m.plan.Inputs, func(b plan.Binding) bool { return b.Name == name })
		if i < 0 {
			return lang.Invalid, false
		}
		return lang.ParseDType(m.plan.Inputs[i].DType), true
	}
	given := func(name string) bool {
		return slices.ContainsFunc(args, func(a TensorArg) bool { return a.Name == name })
	}
	set := pipeline.StepTensors(dtypeOf, given, step, m.seed)
	var bindings []plan.Binding
	for _, b := range m.plan.Inputs {
		if _, ok := set[b.Name]; !ok {
			bindings = append(bindings, b)
		}
	}
	inputs, err := tensorsOf(args, buffers, bindings, "input")
	if err != nil {
		return Reply{}, nil, err
	}
	maps.Copy(inputs, set)
	outputs, err := m.prog.Run(inputs, m.params)
	if err != nil {
		return Reply{}, nil, fmt.Errorf("step %d: %w", step, err)
	}
	loss := outputs[autodiff.LossOutput].Flat(0)
	if math.IsNaN(loss) || math.IsInf(loss, 0) {
		return Reply{}, nil, fmt.Errorf("step %d: the loss is %g: %w (try a smaller learning rate)", step, loss, pipeline.ErrDiverged)
	}
	for p, out := range m.plan.Next {
		m.params[p] = outputs[out]
	}
	m.step = step
	return Reply{Loss: &loss, Step: step}, nil, nil
}

// setParams replaces the parameters given (all or some).
func (m *model) setParams(args []TensorArg, buffers [][]byte) error {
	var bindings []plan.Binding
	for _, b := range m.plan.Params {
		if slices.ContainsFunc(args, func(a TensorArg) bool { return a.Name == b.Name }) {
			bindings = append(bindings, b)
		}
	}
	given, err := tensorsOf(args, buffers, bindings, "parameter")
	if err != nil {
		return err
	}
	for name, t := range given {
		m.params[name] = t
	}
	return nil
}

// stateFile holds, beside a saved plan, the steps its training ran, so
// that a model loaded from it continues Adam's count.
const stateFile = "training.json"

// trainingState is what stateFile holds: the steps run and the seed
// dropout's masks are drawn with.
type trainingState struct {
	Step int    `json:"step"`
	Seed uint64 `json:"seed"`
}

// save writes the plan with its parameters now (pipeline.Save) and, for a
// training plan, its training state (another plan's is removed).
func (m *model) save(dir string) error {
	if m.dyn != nil {
		return fmt.Errorf("a plan compiled with dynamic is not saved: compile it with dir= to keep it, and give other parameters with load_params or set_params")
	}
	if err := pipeline.Save(m.plan, m.dir, dir, m.params); err != nil {
		return err
	}
	path := filepath.Join(dir, stateFile)
	if len(m.plan.Next) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	b, err := json.Marshal(trainingState{Step: m.step, Seed: m.seed})
	if err != nil {
		return err
	}
	return safefile.WriteFile(path, b, 0o644)
}

// readState reads the steps a saved training plan ran (none: 0).
func (m *model) readState() error {
	b, err := os.ReadFile(filepath.Join(m.dir, stateFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var st trainingState
	if err := json.Unmarshal(b, &st); err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(m.dir, stateFile), err)
	}
	if st.Step < 0 {
		return fmt.Errorf("%s: a negative step count, %d", filepath.Join(m.dir, stateFile), st.Step)
	}
	m.step, m.seed = st.Step, st.Seed
	return nil
}

func (m *model) close() error {
	err := m.prog.Close()
	m.prog = nil
	if m.temp {
		os.RemoveAll(m.dir)
	}
	return err
}

// tensorsReply returns tensors in the order of their bindings.
func tensorsReply(ts map[string]*tensor.Tensor, order []plan.Binding) (Reply, []*tensor.Tensor, error) {
	var r Reply
	out := make([]*tensor.Tensor, 0, len(order))
	for _, b := range order {
		name := b.Name
		t, ok := ts[name]
		if !ok {
			return Reply{}, nil, fmt.Errorf("the run gave no %s", name)
		}
		r.Tensors = append(r.Tensors, TensorReply{Name: name, DType: npyStored(t.DType), Shape: t.Shape})
		out = append(out, t)
	}
	return r, out, nil
}
