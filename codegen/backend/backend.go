// Package backend offers tofuc's backends by name to the commands: the
// reference interpreter (runtime/exec.Interp) and the compiled ones, which
// compile a graph into a plan (codegen) and run it on the host runtime
// (cpu: host-flavour kernels) or under the SIMT emulator (simt: the
// GPU-flavour kernels). A compiled backend never falls back to the
// interpreter: a graph it cannot compile is an error.
package backend

import (
	"fmt"
	"os"
	"strings"

	"tofuc/codegen"
	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/runtime/cpu"
	"tofuc/runtime/exec"
	"tofuc/runtime/simt"
	"tofuc/runtime/tensor"
)

// Names lists the backends.
var Names = []string{"interp", "cpu", "simt"}

// ByName returns the backend called name; threads bounds the host threads
// of the compiled ones (0: GOMAXPROCS).
func ByName(name string, threads int) (exec.Backend, error) {
	switch name {
	case "interp":
		return exec.Interp{Workers: threads}, nil
	case "cpu", "simt":
		return &Compiled{Runtime: name, Threads: threads}, nil
	}
	return nil, fmt.Errorf("unknown backend %q (expected %s)", name, strings.Join(Names, ", "))
}

// Compiled compiles graphs and runs their plans on a host runtime.
type Compiled struct {
	Runtime string // "cpu" or "simt"
	Threads int
}

// Name is the runtime's name.
func (c *Compiled) Name() string { return c.Runtime }

// Program is a compiled graph loaded into a runtime.
type Program struct {
	*cpu.Program
	Stats   codegen.Stats
	runtime string
	dir     string
}

// Close frees the program and deletes its compiled files.
func (p *Program) Close() error {
	err := p.Program.Close()
	os.RemoveAll(p.dir)
	return err
}

// Prepare compiles g into a temporary folder and loads it; kernels come
// from the compilation cache when unchanged.
func (c *Compiled) Prepare(g *ir.Graph, syms map[string]int64) (exec.Program, error) {
	if err := concreteShapes(g); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "tofuc-"+c.Runtime+"-")
	if err != nil {
		return nil, err
	}
	emit := codegen.Emit{Host: c.Runtime == "cpu", SIMT: c.Runtime == "simt"}
	res, err := codegen.Compile(g, dir, codegen.Options{Emit: emit})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	var prog *cpu.Program
	if c.Runtime == "cpu" {
		var host *cpu.HostEngine
		if host, err = cpu.NewHost(res.Plan, dir, c.Threads); err == nil {
			prog, err = cpu.Load(res.Plan, host)
		}
	} else {
		prog, err = simt.Load(res.Plan, dir, c.Threads)
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &Program{Program: prog, Stats: res.Stats, runtime: c.Runtime, dir: dir}, nil
}

// Kernels is the number of kernel launches of the compiled plan that
// its runtime runs (the emulator runs a chained launch as two).
func (p *Program) Kernels() int {
	if p.runtime == "simt" {
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
