package pipeline

import (
	"fmt"
	"os"
	"strings"

	"tofuc/codegen"
	"tofuc/codegen/toolchain"
	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/runtime/cpu"
	"tofuc/runtime/exec"
	"tofuc/runtime/executor"
	"tofuc/runtime/simt"
	"tofuc/runtime/tensor"
)

// BackendNames lists the backends of eval, bench and onnx-test: the
// reference interpreter, and the compiled ones that run on this host.
var BackendNames = []string{"interp", cpu.Kind.Name, simt.Kind.Name}

// NewBackend returns the backend called name: the interpreter, or a
// Backend compiling as opts say for devices of that kind; threads bounds
// the host threads (0: GOMAXPROCS). m is the model the graphs come from
// (its Source keys the compile cache), nil for graphs of other origins.
func NewBackend(name string, m *Model, opts Options, threads int) (exec.Backend, error) {
	switch name {
	case "interp":
		return exec.Interp{Workers: threads}, nil
	case cpu.Kind.Name, simt.Kind.Name:
		opts.Threads = threads // placement measures the threads that run
		return &Backend{Kind: name, Model: m, Options: opts, Threads: threads}, nil
	}
	return nil, fmt.Errorf("unknown backend %q (expected %s)", name, strings.Join(BackendNames, ", "))
}

// Backend compiles graphs with Compile and runs their plans on devices
// of a kind (executor.Kind). A compiled backend never falls back to the
// interpreter: a graph it cannot compile is an error.
type Backend struct {
	Kind    string
	Model   *Model
	Options Options
	Threads int
	// Keep, when not empty, is the folder the plan is compiled into and
	// kept in (what tofuc compile -o writes); else a temporary one.
	Keep string
}

// Name is the kind of devices.
func (b *Backend) Name() string { return b.Kind }

// Program is a compiled graph loaded on its devices.
type Program struct {
	*executor.Program
	Stats codegen.Stats
	kind  string
	temp  string // the temporary folder of its files, removed at Close
}

// Close frees the program and deletes its compiled files (unless kept).
func (p *Program) Close() error {
	err := p.Program.Close()
	if p.temp != "" {
		os.RemoveAll(p.temp)
	}
	return err
}

// Prepare compiles into a temporary folder and loads the plan; compiles
// come from the compile cache when unchanged. It compiles the Model as
// the Options say (Compile builds its training graph with Train, which
// is then the g a training loop runs), when g is the Model's graph or
// Train is set; else g itself, as the Options say.
func (b *Backend) Prepare(g *ir.Graph, syms map[string]int64) (exec.Program, error) {
	if err := concreteShapes(g); err != nil {
		return nil, err
	}
	dir, temp := b.Keep, ""
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "tofuc-"+b.Kind+"-"); err != nil {
			return nil, err
		}
		temp = dir
	}
	m := b.Model
	if m == nil || m.Graph != g && b.Options.Train == nil {
		m = &Model{Graph: g} // not cached: its source is unknown
		if b.Model != nil {
			m.Module, m.Path = b.Model.Module, b.Model.Path
		}
	}
	opts := b.Options
	if opts.Emit == nil { // the kind's module is enough
		k, err := executor.Lookup(b.Kind)
		if err != nil {
			return nil, err
		}
		opts.Emit = []string{k.Module}
	}
	res, err := Compile(m, dir, opts)
	var prog *executor.Program
	if err == nil {
		prog, err = executor.Open(res.Plan, dir, b.Kind, executor.Options{Threads: b.Threads})
	}
	if err == nil {
		for _, n := range prog.Notes {
			toolchain.Warn("%s", n)
		}
	}
	if err != nil {
		if temp != "" {
			os.RemoveAll(temp)
		}
		return nil, err
	}
	return &Program{Program: prog, Stats: res.Stats, kind: b.Kind, temp: temp}, nil
}

// Kernels is the number of kernel launches of the compiled plan that
// its devices run (the emulator runs a chained launch as two).
func (p *Program) Kernels() int {
	if p.kind == simt.Kind.Name {
		return p.Stats.GPULaunches
	}
	return p.Stats.Kernels
}

// Run runs the plan.
func (p *Program) Run(inputs, params map[string]*tensor.Tensor) (map[string]*tensor.Tensor, error) {
	return p.Program.Run(inputs, params)
}

// concreteShapes rejects a graph whose shapes keep symbols: a plan is
// compiled for concrete shapes.
func concreteShapes(g *ir.Graph) error {
	check := func(v *ir.Value) error {
		if _, ok := lang.ConstShape(v.Shape); !ok {
			return fmt.Errorf("%s has the symbolic shape %s: a compiled backend needs concrete shapes (bind the symbols with --set)", v.Name, lang.ShapeString(v.Shape))
		}
		return nil
	}
	for _, v := range g.Inputs {
		if err := check(v); err != nil {
			return err
		}
	}
	for _, n := range g.Nodes {
		for _, v := range n.Outputs {
			if err := check(v); err != nil {
				return err
			}
		}
	}
	return nil
}
