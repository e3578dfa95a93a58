// Package modelcase compiles example models into plans for tests of the
// runtimes, with inputs and parameters to run them on.
package modelcase

import (
	"fmt"
	"path/filepath"
	"runtime"

	"tofuc/analysis/autodiff"
	"tofuc/analysis/check"
	"tofuc/analysis/cost"
	"tofuc/analysis/partition"
	"tofuc/analysis/partition/execution"
	"tofuc/codegen"
	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/runtime/exec"
	"tofuc/runtime/plan"
	"tofuc/runtime/tensor"
)

// Case is a model to compile: a file of examples/ or source text, its
// attributes, whether to compile its training graph, on how many
// devices, and the range of its integer inputs.
type Case struct {
	File    string // examples/FILE.tdl, or the name of Source
	Source  string
	Train   bool
	Devices int
	Classes int64          // integer inputs are in [0, Classes)
	Set     map[string]any // attribute values: int or bool
}

func (c Case) String() string {
	name := c.File
	if c.Train {
		name += "-train"
	}
	return fmt.Sprintf("%s-%ddev", name, c.Devices)
}

// Compiled is a case compiled into a folder.
type Compiled struct {
	Dir            string
	Plan           *plan.Plan
	Inputs, Params map[string]*tensor.Tensor
}

// Compile builds the case's graph and compiles it into dir: on several
// devices, partitioned as the partition search finds best. Parameters
// are initialised as the model declares (seed 1).
func (c Case) Compile(dir string, opts codegen.Options) (*Compiled, error) {
	g, err := c.graph()
	if err != nil {
		return nil, err
	}
	var comp *codegen.Compiled
	if c.Devices == 1 {
		comp, err = codegen.Compile(g, dir, opts)
	} else {
		comp, err = compilePartitioned(g, c.Devices, dir, opts)
	}
	if err != nil {
		return nil, err
	}
	params, err := initParams(g)
	if err != nil {
		return nil, err
	}
	return &Compiled{Dir: dir, Plan: comp.Plan, Inputs: inputsFor(comp.Plan, c.Classes), Params: params}, nil
}

// graph loads the model and, for a training case, derives its training
// graph.
func (c Case) graph() (*ir.Graph, error) {
	prog, err := check.NewProgram()
	if err != nil {
		return nil, err
	}
	var m *check.Module
	if c.Source != "" {
		m, err = prog.LoadSource(c.File+".tdl", []byte(c.Source))
	} else {
		_, here, _, _ := runtime.Caller(0)
		m, err = prog.Load(filepath.Join(filepath.Dir(here), "..", "..", "examples", c.File+".tdl"))
	}
	if err != nil {
		return nil, err
	}
	set := map[string]ir.AttrValue{}
	for k, v := range c.Set {
		switch v := v.(type) {
		case int:
			set[k] = ir.AttrValue{Kind: ir.AttrInt, Int: int64(v)}
		case bool:
			set[k] = ir.AttrValue{Kind: ir.AttrBool, Bool: v}
		default:
			return nil, fmt.Errorf("attribute %s = %v: not an int or a bool", k, v)
		}
	}
	g, err := m.Model("", set)
	if err != nil || !c.Train {
		return g, err
	}
	g, _, err = autodiff.TrainingGraph(g, m, autodiff.TrainOptions{})
	return g, err
}

func compilePartitioned(g *ir.Graph, devices int, dir string, opts codegen.Options) (*codegen.Compiled, error) {
	cg, err := cost.NewGraph(g)
	if err != nil {
		return nil, err
	}
	res, err := partition.Search(cg, devices, partition.Options{})
	if err != nil {
		return nil, err
	}
	eg, err := execution.Build(cg, res.Plan)
	if err != nil {
		return nil, err
	}
	return codegen.CompilePartitioned(eg, g, dir, opts)
}

// inputsFor fills every input of a plan with a spread of values: floats
// in [-1, 1), integers in [0, classes).
func inputsFor(p *plan.Plan, classes int64) map[string]*tensor.Tensor {
	out := map[string]*tensor.Tensor{}
	for k, b := range p.Inputs {
		dt := lang.ParseDType(b.DType)
		shape := make([]int, len(b.Shape))
		for d, n := range b.Shape {
			shape[d] = int(n)
		}
		x := tensor.New(dt, shape)
		for i := range x.Len() {
			h := int64(i*7919+k*104729) % 1000003
			if dt.IsFloat() {
				x.SetFlat(i, float64(h%2000)/1000-1)
			} else {
				x.SetFlat(i, float64(h%max(classes, 1)))
			}
		}
		out[b.Name] = x
	}
	return out
}

// initParams initialises every parameter as the model declares.
func initParams(g *ir.Graph) (map[string]*tensor.Tensor, error) {
	out := map[string]*tensor.Tensor{}
	for _, p := range g.Params {
		shape, _ := lang.ConstShape(p.Value.Shape)
		x, err := exec.InitParam(p, shape, 1)
		if err != nil {
			return nil, err
		}
		out[p.Value.Name] = x
	}
	return out, nil
}
