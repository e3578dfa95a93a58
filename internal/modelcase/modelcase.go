// Package modelcase compiles example models into plans through the
// pipeline, for tests of the runtimes and the GPU checks, with inputs and
// parameters to run them on.
package modelcase

import (
	"fmt"
	"path/filepath"
	"runtime"
	"tofuc/analysis/rounding"
	"tofuc/parser"

	"tofuc/analysis/autodiff"
	"tofuc/analysis/check"
	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/lang/precision"
	"tofuc/pipeline"
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
	// Precision is the arithmetic of the kernels (lang/precision).
	Precision precision.Mode
	// Backends are the host libraries placement offers (docs/placement.md);
	// the plan keeps every group's variants (pipeline.Options.AllVariants).
	Backends []string
	// Pipeline offers GraphPipe's pipeline plan (tofuc compile
	// --pipeline).
	Pipeline bool
}

func (c Case) String() string {
	name := c.File
	if c.Train {
		name += "-train"
	}
	name = fmt.Sprintf("%s-%ddev", name, c.Devices)
	if c.Pipeline {
		name += "-pipeline"
	}
	if c.Precision != precision.Exact {
		name += "-" + c.Precision.String()
	}
	return name
}

// Compiled is a case compiled into a folder.
type Compiled struct {
	Dir            string
	Plan           *plan.Plan
	Inputs, Params map[string]*tensor.Tensor
	// Depth is the model's contraction depth (rounding.ContractionDepth
	// of its graph, before a training graph is built: the same whether
	// or not the compile came from the cache), which the whole-model
	// tolerance grows with.
	Depth int
}

// Compile compiles the case into dir through the pipeline (on several
// devices, partitioned as the partition search finds best), writing the
// artefacts emit names (pipeline.Options.Emit; nil: all). Parameters are
// initialised as the model declares (seed 1).
func (c Case) Compile(dir string, emit []string) (*Compiled, error) {
	m, err := c.model()
	if err != nil {
		return nil, err
	}
	opts := pipeline.Options{Devices: c.Devices, Emit: emit, Seed: 1, Precision: c.Precision, Backends: c.Backends, AllVariants: len(c.Backends) > 0, Pipeline: c.Pipeline}
	if c.Train {
		opts.Train = &autodiff.TrainOptions{}
	}
	res, err := pipeline.Compile(m, dir, opts)
	if err != nil {
		return nil, err
	}
	return &Compiled{Dir: dir, Plan: res.Plan, Inputs: inputsFor(res.Plan, c.Classes), Params: res.Params, Depth: rounding.ContractionDepth(m.Graph)}, nil
}

// model loads the case's model: from examples/, or from its Source.
func (c Case) model() (*pipeline.Model, error) {
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
	if c.Source == "" {
		_, here, _, _ := runtime.Caller(0)
		return pipeline.Load(filepath.Join(filepath.Dir(here), "..", "..", "examples", c.File+".tdl"), "", set)
	}
	prog, err := check.NewProgram(parser.Parse)
	if err != nil {
		return nil, err
	}
	m, err := prog.LoadSource(c.File+".tdl", []byte(c.Source))
	if err != nil {
		return nil, err
	}
	g, err := m.Model("", set)
	if err != nil {
		return nil, err
	}
	return &pipeline.Model{Module: m, Graph: g, Path: m.Path}, nil
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
