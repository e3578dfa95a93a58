package exec

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/runtime/tensor"
)

// Backend runs graphs.
type Backend interface {
	// Name is how commands call it: interp, cpu, simt.
	Name() string
	// Prepare readies g, its shape symbols bound to syms, for runs; a
	// compiled backend compiles it here.
	Prepare(g *ir.Graph, syms map[string]int64) (Program, error)
}

// Program is a graph a backend prepared.
type Program interface {
	// Run computes the graph's outputs, by name, from its inputs and
	// parameters, by name; both are checked and complete.
	Run(inputs, params map[string]*tensor.Tensor) (map[string]*tensor.Tensor, error)
	Close() error
}

// Result is what a run returns.
type Result struct {
	Outputs map[string]*tensor.Tensor // the graph outputs by name
	Params  map[string]*tensor.Tensor // every parameter used, given or initialised
}

// Run runs g once on backend b (see the package comment); parameters
// missing from params are initialised from seed.
func Run(g *ir.Graph, b Backend, inputs, params map[string]*tensor.Tensor, seed uint64) (*Result, error) {
	s := NewSession(g, b, seed)
	defer s.Close()
	return s.Run(inputs, params)
}

// Session runs one graph on one backend many times, preparing it again
// only when the shapes of its inputs change.
type Session struct {
	Graph   *ir.Graph
	Backend Backend
	Seed    uint64
	prog    Program
	syms    map[string]int64
}

// NewSession starts a session; nothing is prepared before the first run.
func NewSession(g *ir.Graph, b Backend, seed uint64) *Session {
	return &Session{Graph: g, Backend: b, Seed: seed}
}

// Program is what the backend prepared for the last run (nil before
// the first).
func (s *Session) Program() Program { return s.prog }

// Close releases what the backend prepared.
func (s *Session) Close() error {
	if s.prog == nil {
		return nil
	}
	err := s.prog.Close()
	s.prog = nil
	return err
}

// Run runs the graph on inputs with the given parameters.
func (s *Session) Run(inputs, params map[string]*tensor.Tensor) (*Result, error) {
	g := s.Graph
	syms, err := bindInputs(g, inputs)
	if err != nil {
		return nil, err
	}
	res := &Result{Outputs: map[string]*tensor.Tensor{}, Params: map[string]*tensor.Tensor{}}
	for _, p := range g.Params {
		x, err := paramValue(p, params, syms, s.Seed)
		if err != nil {
			return nil, err
		}
		res.Params[p.Value.Name] = x
	}
	if s.prog == nil || !maps.Equal(syms, s.syms) {
		s.Close()
		if s.prog, err = s.Backend.Prepare(g, syms); err != nil {
			return nil, err
		}
		s.syms = syms
	}
	out, err := s.prog.Run(inputs, res.Params)
	if err != nil {
		return nil, err
	}
	for _, v := range g.Outputs {
		x, ok := out[v.Name]
		if !ok {
			return nil, fmt.Errorf("graph %s: output %s is never computed", g.Name, v.Name)
		}
		if err := CheckValue(v, x, syms); err != nil {
			return nil, fmt.Errorf("graph %s: output %w", g.Name, err)
		}
		res.Outputs[v.Name] = x
	}
	return res, nil
}

// bindInputs checks the inputs against the graph's and binds its shape
// symbols from their shapes.
func bindInputs(g *ir.Graph, inputs map[string]*tensor.Tensor) (map[string]int64, error) {
	var uses []lang.ShapeUse
	for _, v := range g.Inputs {
		x, ok := inputs[v.Name]
		if !ok {
			return nil, fmt.Errorf("graph %s: missing input %s", g.Name, v.Name)
		}
		if err := x.Validate(); err != nil {
			return nil, fmt.Errorf("graph %s: input %s: %w", g.Name, v.Name, err)
		}
		if x.DType != v.DType {
			return nil, fmt.Errorf("graph %s: input %s is %s, want %s", g.Name, v.Name, x.DType, v.DType)
		}
		uses = append(uses, lang.ShapeUse{What: "input " + v.Name, Declared: v.Shape, Actual: x.Shape})
	}
	var names []string
	for _, v := range g.Inputs {
		names = append(names, v.Name)
	}
	for name := range inputs {
		if !slices.Contains(names, name) {
			return nil, fmt.Errorf("graph %s has no input %s; its inputs: %s", g.Name, name, strings.Join(names, ", "))
		}
	}
	syms := map[string]int64{}
	if err := lang.BindShapes(syms, uses, nil); err != nil {
		return nil, fmt.Errorf("graph %s: %w", g.Name, err)
	}
	return syms, nil
}

// paramValue is the given value of a parameter, checked, or its
// initialisation.
func paramValue(p *ir.Param, params map[string]*tensor.Tensor, syms map[string]int64, seed uint64) (*tensor.Tensor, error) {
	v := p.Value
	shape := make([]int, len(v.Shape))
	for i, d := range v.Shape {
		n, err := d.Eval(syms)
		if err != nil {
			return nil, lang.Errorf(p.Pos, "parameter %s: %v", v.Name, err)
		}
		if n < 0 {
			return nil, lang.Errorf(p.Pos, "parameter %s has a negative extent %s = %d", v.Name, d, n)
		}
		shape[i] = int(n)
	}
	if err := tensor.CheckSize(shape); err != nil {
		return nil, lang.Errorf(p.Pos, "parameter %s: %v", v.Name, err)
	}
	x, ok := params[v.Name]
	if !ok {
		return InitParam(p, shape, seed)
	}
	// Given parameters are used as they are.
	if err := x.Validate(); err != nil {
		return nil, lang.Errorf(p.Pos, "parameter %s: %v", v.Name, err)
	}
	if x.DType != v.DType || !equalShape(x.Shape, shape) {
		return nil, lang.Errorf(p.Pos, "parameter %s is %s%v, want %s%v", v.Name, x.DType, x.Shape, v.DType, shape)
	}
	return x, nil
}

// CheckValue checks a computed value against the dtype and shape its
// graph Value declares (dimensions with unbound symbols are not checked).
func CheckValue(v *ir.Value, x *tensor.Tensor, syms map[string]int64) error {
	if x.DType != v.DType || len(x.Shape) != len(v.Shape) {
		return fmt.Errorf("value %s is %s%v, want %s%s", v.Name, x.DType, x.Shape, v.DType, lang.ShapeString(v.Shape))
	}
	for i, d := range v.Shape {
		if n, err := d.Eval(syms); err == nil && n != int64(x.Shape[i]) {
			return fmt.Errorf("value %s has shape %v, want %s = %d in dimension %d", v.Name, x.Shape, d, n, i)
		}
	}
	return nil
}

func equalShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
