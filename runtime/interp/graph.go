package interp

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"

	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/runtime/tensor"
)

// Result is what RunGraph returns.
type Result struct {
	Outputs map[string]*tensor.Tensor // the graph outputs by name
	Params  map[string]*tensor.Tensor // every parameter used, given or initialised
}

// Options tunes RunGraphOpts.
type Options struct {
	// Progress, when not nil, is called before node i (0-based) of total
	// is evaluated, with the node's name.
	Progress func(node, total int, name string)
	// Workers is the number of goroutines per Def; 0 means GOMAXPROCS.
	Workers int
}

// RunGraph evaluates g on inputs (by input name) with the given parameters
// (by parameter name); parameters missing from params are initialised from
// seed by InitParam. See the package comment.
func RunGraph(g *ir.Graph, inputs, params map[string]*tensor.Tensor, seed uint64) (*Result, error) {
	return RunGraphOpts(g, inputs, params, seed, Options{})
}

// RunGraphOpts is RunGraph with options.
func RunGraphOpts(g *ir.Graph, inputs, params map[string]*tensor.Tensor, seed uint64, opts Options) (res *Result, err error) {
	defer recoverInternal(&err)
	vals := map[*ir.Value]*tensor.Tensor{}
	env := map[string]int64{}
	var uses []lang.ShapeUse
	for _, v := range g.Inputs {
		x, ok := inputs[v.Name]
		if !ok {
			return nil, fmt.Errorf("graph %s: missing input %s", g.Name, v.Name)
		}
		if err := x.Validate(); err != nil {
			return nil, fmt.Errorf("graph %s: input %s: %v", g.Name, v.Name, err)
		}
		if x.DType != v.DType {
			return nil, fmt.Errorf("graph %s: input %s is %s, want %s", g.Name, v.Name, x.DType, v.DType)
		}
		uses = append(uses, lang.ShapeUse{What: "input " + v.Name, Declared: v.Shape, Actual: x.Shape})
		vals[v] = x
	}
	for name := range inputs {
		found := false
		for _, v := range g.Inputs {
			found = found || v.Name == name
		}
		if !found {
			return nil, fmt.Errorf("graph %s has no input %s", g.Name, name)
		}
	}
	if err := lang.BindShapes(env, uses, nil); err != nil {
		return nil, fmt.Errorf("graph %s: %v", g.Name, err)
	}
	res = &Result{Outputs: map[string]*tensor.Tensor{}, Params: map[string]*tensor.Tensor{}}
	for _, p := range g.Params {
		v := p.Value
		shape := make([]int, len(v.Shape))
		for i, d := range v.Shape {
			n, err := d.Eval(env)
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
		if ok {
			// Given parameters are used as they are.
			if err := x.Validate(); err != nil {
				return nil, lang.Errorf(p.Pos, "parameter %s: %v", v.Name, err)
			}
			if x.DType != v.DType || !equalShape(x.Shape, shape) {
				return nil, lang.Errorf(p.Pos, "parameter %s is %s%v, want %s%v", v.Name, x.DType, x.Shape, v.DType, shape)
			}
		} else {
			var err error
			if x, err = InitParam(p, shape, seed); err != nil {
				return nil, err
			}
		}
		vals[v] = x
		res.Params[v.Name] = x
	}
	// The last node using each value, so that intermediates can be dropped.
	lastUse := map[*ir.Value]int{}
	for i, n := range g.Nodes {
		for _, v := range n.Inputs {
			lastUse[v] = i
		}
	}
	keep := map[*ir.Value]bool{}
	for _, v := range g.Outputs {
		keep[v] = true
	}
	for _, v := range g.Inputs {
		keep[v] = true
	}
	for _, p := range g.Params {
		keep[p.Value] = true
	}
	for i, n := range g.Nodes {
		if opts.Progress != nil {
			opts.Progress(i, len(g.Nodes), n.Name)
		}
		ins := make([]*tensor.Tensor, len(n.Inputs))
		for j, v := range n.Inputs {
			x, ok := vals[v]
			if !ok && v.Const != nil {
				x = constTensor(v)
			}
			if x == nil {
				return nil, lang.Errorf(n.Pos, "node %s: value %s is not computed before it is used", n.Name, v.Name)
			}
			ins[j] = x
		}
		if n.Inst == nil {
			return nil, lang.Errorf(n.Pos, "node %s has no instance", n.Name)
		}
		outs, err := evalInstance(n.Inst, ins, nil, env, config{workers: opts.Workers})
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", n.Name, err)
		}
		if len(outs) != len(n.Outputs) {
			return nil, lang.Errorf(n.Pos, "node %s: the instance has %d outputs, the node %d", n.Name, len(outs), len(n.Outputs))
		}
		for j, v := range n.Outputs {
			if err := checkValue(v, outs[j], env); err != nil {
				return nil, lang.Errorf(n.Pos, "node %s: %v", n.Name, err)
			}
			if _, used := lastUse[v]; used || keep[v] {
				vals[v] = outs[j]
			}
		}
		for _, v := range n.Inputs {
			if lastUse[v] == i && !keep[v] {
				delete(vals, v)
			}
		}
	}
	for _, v := range g.Outputs {
		x, ok := vals[v]
		if !ok && v.Const != nil {
			x = constTensor(v)
		}
		if x == nil {
			return nil, fmt.Errorf("graph %s: output %s is never computed", g.Name, v.Name)
		}
		res.Outputs[v.Name] = x
	}
	return res, nil
}

// checkValue checks a computed value against the dtype and shape its graph
// Value declares (dimensions with unbound symbols are not checked).
func checkValue(v *ir.Value, x *tensor.Tensor, env map[string]int64) error {
	if x.DType != v.DType || len(x.Shape) != len(v.Shape) {
		return fmt.Errorf("value %s is %s%v, want %s%s", v.Name, x.DType, x.Shape, v.DType, lang.ShapeString(v.Shape))
	}
	for i, d := range v.Shape {
		if n, err := d.Eval(env); err == nil && n != int64(x.Shape[i]) {
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

// constTensor is the rank-0 tensor of a literal value.
func constTensor(v *ir.Value) *tensor.Tensor {
	if v.DType.IsFloat() {
		return tensor.Scalar(v.DType, v.Const.Float)
	}
	return tensor.FromInts(v.DType, nil, []int64{v.Const.Int})
}

// InitParam returns the initial value of parameter p with the given
// (evaluated) shape, determined by seed and p's name only. See the package
// comment for the kinds.
func InitParam(p *ir.Param, shape []int, seed uint64) (*tensor.Tensor, error) {
	v := p.Value
	if v.DType.Size() == 0 {
		return nil, lang.Errorf(p.Pos, "parameter %s has invalid dtype %s", v.Name, v.DType)
	}
	for _, d := range shape {
		if d < 0 {
			return nil, lang.Errorf(p.Pos, "parameter %s has negative extent in shape %v", v.Name, shape)
		}
	}
	h := fnv.New64a()
	h.Write([]byte(v.Name))
	rng := rand.New(rand.NewPCG(seed, h.Sum64()))
	arg := func(i int, def float64) float64 {
		if i < len(p.Init.Args) {
			return p.Init.Args[i]
		}
		return def
	}
	t := tensor.New(v.DType, shape)
	n := t.Len()
	fill := func(gen func() float64) {
		for i := 0; i < n; i++ {
			t.SetFlat(i, gen())
		}
	}
	fanIn, fanOut := fans(shape)
	maxArgs := map[string]int{"normal": 2, "uniform": 2, "zeros": 0, "ones": 0, "const": 1, "glorot": 0, "he": 0}
	m, ok := maxArgs[p.Init.Kind]
	if !ok {
		return nil, lang.Errorf(p.Pos, "parameter %s: unknown initialiser %q (want normal, uniform, zeros, ones, const, glorot or he)", v.Name, p.Init.Kind)
	}
	if len(p.Init.Args) > m {
		return nil, lang.Errorf(p.Pos, "parameter %s: initialiser %s takes at most %d arguments, got %d", v.Name, p.Init.Kind, m, len(p.Init.Args))
	}
	switch p.Init.Kind {
	case "normal":
		mean, std := arg(0, 0), arg(1, 0.02)
		fill(func() float64 { return mean + std*rng.NormFloat64() })
	case "uniform":
		lo, hi := arg(0, -0.05), arg(1, 0.05)
		fill(func() float64 { return lo + (hi-lo)*rng.Float64() })
	case "zeros":
	case "ones":
		fill(func() float64 { return 1 })
	case "const":
		if len(p.Init.Args) != 1 {
			return nil, lang.Errorf(p.Pos, "parameter %s: initialiser const needs its value", v.Name)
		}
		c := p.Init.Args[0]
		fill(func() float64 { return c })
	case "glorot":
		limit := math.Sqrt(6 / float64(fanIn+fanOut))
		fill(func() float64 { return limit * (2*rng.Float64() - 1) })
	case "he":
		std := math.Sqrt(2 / float64(fanIn))
		fill(func() float64 { return std * rng.NormFloat64() })
	}
	return t, nil
}

// fans returns fan_in and fan_out of a weight laid out [out, in, k...].
func fans(shape []int) (in, out int) {
	switch len(shape) {
	case 0:
		in, out = 1, 1
	case 1:
		in, out = shape[0], shape[0]
	default:
		r := 1
		for _, d := range shape[2:] {
			r *= d
		}
		in, out = shape[1]*r, shape[0]*r
	}
	return max(in, 1), max(out, 1)
}
