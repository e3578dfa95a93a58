// Package opcase is test support: it instantiates an operator for random
// concrete shapes and draws inputs for it, for the property tests that
// compare a transformed operator (partitioned, differentiated) with the
// interpreter's result.
package opcase

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"tofuc/parser"

	"tofuc/analysis/check"
	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/runtime/interp"
	"tofuc/runtime/tensor"
)

// Case is an operator instantiated for concrete shapes, with inputs and
// its result.
type Case struct {
	Inst   *ir.Instance
	Inputs []*tensor.Tensor
	Want   []*tensor.Tensor
}

// Options choose dtypes: Any replaces the dtype of inputs declared without
// one (f32 otherwise), Float that of inputs declared `float`.
type Options struct {
	Any, Float lang.DType
	// Attrs override the operator's default attributes.
	Attrs map[string]ir.AttrValue
	// Shapes, when set, are the input shapes (for attributes that change
	// them, like groups), instead of random extents.
	Shapes [][]int64
	// Large makes one shape symbol, chosen at random, 16 times its
	// extent (32 to 80), keeping every input under 2^17 elements: long
	// rows for reductions.
	Large bool
}

// New instantiates op for random extents in [2, 5] of the shape symbols of
// its standalone check, trying again when the extents violate the
// operator's constraints or the inputs make it fail, and evaluates it.
// Floats are drawn from a normal distribution, integers from [0, 2) (valid
// indices, every extent being at least 2; i8 inputs of any dtype from
// [-60, 60) so that narrow types wrap), bools fairly.
func New(op *lang.OpDecl, opts Options) (*Case, error) {
	sym, err := check.Standalone(op) // its symbols and default attributes
	if err != nil {
		return nil, err
	}
	attrs := map[string]ir.AttrValue{}
	for _, a := range sym.Attrs {
		attrs[a.Name] = a.Value
	}
	for k, v := range opts.Attrs {
		attrs[k] = v
	}
	r := rand.New(rand.NewPCG(uint64(len(op.Name)), hash(op.Name)))
	last := fmt.Errorf("no extents fit")
	for range 40 {
		vals := map[string]int64{}
		if opts.Large {
			syms := symbols(sym.Inputs)
			if len(syms) > 0 {
				vals[syms[r.IntN(len(syms))]] = 16 * (2 + r.Int64N(4))
			}
		}
		types := make([]check.TensorType, len(sym.Inputs))
		for i, in := range sym.Inputs {
			shape := make([]lang.Dim, len(in.Shape))
			for d, dim := range in.Shape {
				shape[d] = dim.Subst(func(s string) (lang.Dim, bool) {
					if _, ok := vals[s]; !ok {
						vals[s] = 2 + r.Int64N(4)
					}
					return lang.Const(vals[s]), true
				})
			}
			if opts.Shapes != nil {
				shape = shape[:0]
				for _, n := range opts.Shapes[i] {
					shape = append(shape, lang.Const(n))
				}
			}
			dt := in.DType
			switch op.Inputs[i].DType {
			case "":
				if opts.Any != lang.Invalid {
					dt = opts.Any
				}
			case "float":
				if opts.Float != lang.Invalid {
					dt = opts.Float
				}
			}
			types[i] = check.TensorType{DType: dt, Shape: shape}
		}
		inst, err := check.Instantiate(op, attrs, types, op.Pos)
		if err != nil || !positive(inst) || opts.Large && !small(inst) {
			continue
		}
		c := &Case{Inst: inst}
		for _, in := range inst.Inputs {
			c.Inputs = append(c.Inputs, random(r, in))
		}
		if c.Want, err = interp.EvalInstance(inst, c.Inputs, nil); err != nil {
			last = err
			continue
		}
		return c, nil
	}
	return nil, last
}

func hash(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := range len(s) {
		h = (h ^ uint64(s[i])) * 1099511628211
	}
	return h
}

// symbols lists the shape symbols of inputs in order of appearance.
func symbols(inputs []*ir.Tensor) []string {
	var out []string
	seen := map[string]bool{}
	for _, in := range inputs {
		for _, d := range in.Shape {
			for _, s := range d.Symbols() {
				if !seen[s] {
					seen[s] = true
					out = append(out, s)
				}
			}
		}
	}
	return out
}

// small reports whether every input of inst has under 2^17 elements.
func small(inst *ir.Instance) bool {
	for _, in := range inst.Inputs {
		shape, ok := lang.ConstShape(in.Shape)
		if !ok || tensor.NumElements(shape) >= 1<<17 {
			return false
		}
	}
	return true
}

// positive reports whether every output extent is at least 1.
func positive(inst *ir.Instance) bool {
	for _, d := range inst.Outputs {
		for _, n := range d.Tensor.Shape {
			if v, ok := n.IsConst(); !ok || v < 1 {
				return false
			}
		}
	}
	return true
}

func random(r *rand.Rand, t *ir.Tensor) *tensor.Tensor {
	shape, _ := lang.ConstShape(t.Shape)
	x := tensor.New(t.DType, shape)
	for i := range x.Len() {
		switch {
		case t.DType.IsFloat():
			x.SetFlat(i, r.NormFloat64())
		case t.DType == lang.I8:
			x.SetFlat(i, float64(r.IntN(120)-60))
		default:
			x.SetFlat(i, float64(r.IntN(2)))
		}
	}
	return x
}

// Stdlib returns the standard library's operators and their names, sorted.
func Stdlib() (map[string]*lang.OpDecl, []string, error) {
	p, err := check.NewProgram(parser.Parse)
	if err != nil {
		return nil, nil, err
	}
	ops := p.StdOps()
	names := make([]string, 0, len(ops))
	for n := range ops {
		names = append(names, n)
	}
	sort.Strings(names)
	return ops, names, nil
}

// FromInstance draws inputs for a concrete instance (as New does, from
// seed) and evaluates it.
func FromInstance(inst *ir.Instance, seed uint64) (*Case, error) {
	r := rand.New(rand.NewPCG(seed, hash(inst.Op)))
	c := &Case{Inst: inst}
	for _, in := range inst.Inputs {
		if _, ok := lang.ConstShape(in.Shape); !ok {
			return nil, fmt.Errorf("%s: input %s has a symbolic shape", inst.Op, in.Name)
		}
		c.Inputs = append(c.Inputs, random(r, in))
	}
	var err error
	if c.Want, err = interp.EvalInstance(inst, c.Inputs, nil); err != nil {
		return nil, err
	}
	return c, nil
}
