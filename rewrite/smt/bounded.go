package smt

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"

	"github.com/aclements/go-z3/z3"

	"tofuc/analysis/check"
	"tofuc/lang"
	"tofuc/runtime/interp"
	"tofuc/runtime/tensor"
)

// bounder checks a rule at every assignment of its shape symbols in 1..N:
// both sides unrolled at each output element, one Z3 query per assignment
// asking for an element where they differ.
type bounder struct {
	rule     *check.Rule
	ctx      *z3.Context
	lhs, rhs poly
	out      []lang.Dim
	opts     Options
}

// chooseBound picks the largest N (at most 4, at least 2) for which N to
// the number of symbols stays within maxShapes.
func chooseBound(syms, maxShapes int) int {
	n := 4
	for n > 2 && math.Pow(float64(n), float64(syms)) > float64(maxShapes) {
		n--
	}
	return n
}

func (b *bounder) run() Result {
	syms := symbols(b.rule)
	n := chooseBound(len(syms), b.opts.maxShapes())
	env := map[string]int64{}
	for _, s := range syms {
		env[s] = 1
	}
	checked := 0
	for {
		res, valid := b.checkShape(env)
		if res != nil {
			res.Bound, res.Shapes = n, checked
			return *res
		}
		if valid {
			checked++
		}
		if !next(env, syms, int64(n)) {
			break
		}
	}
	if checked == 0 {
		return Result{Status: Unknown, Bound: n, Reason: fmt.Sprintf("no assignment of the shape symbols in 1..%d gives valid shapes", n)}
	}
	return Result{Status: Bounded, Bound: n, Shapes: checked}
}

// next advances env to the next assignment in 1..n; false after the last.
func next(env map[string]int64, syms []string, n int64) bool {
	for _, s := range syms {
		if env[s] < n {
			env[s]++
			return true
		}
		env[s] = 1
	}
	return false
}

// concrete evaluates the inputs' shapes; ok is false when one is empty.
func (b *bounder) concrete(env map[string]int64) (map[string][]int, []int, bool) {
	shapes := map[string][]int{}
	for _, in := range b.rule.Inputs {
		s, ok := evalShape(in.Shape, env)
		if !ok {
			return nil, nil, false
		}
		for _, d := range s {
			if d < 1 {
				return nil, nil, false
			}
		}
		shapes[in.Name] = s
	}
	out, ok := evalShape(b.out, env)
	return shapes, out, ok
}

func evalShape(s []lang.Dim, env map[string]int64) ([]int, bool) {
	out := make([]int, len(s))
	for i, d := range s {
		v, err := d.Eval(env)
		if err != nil {
			return nil, false
		}
		out[i] = int(v)
	}
	return out, true
}

// checkShape checks one assignment: a non-nil result ends the run
// (refuted or unknown); valid reports whether the shapes were valid.
func (b *bounder) checkShape(env map[string]int64) (*Result, bool) {
	shapes, out, ok := b.concrete(env)
	if !ok {
		return nil, false
	}
	g := newGrounder(b.ctx, shapes)
	var diffs []z3.Bool
	forEachIndex(out, func(idx []int) {
		e := make(map[string]int64, len(env)+len(idx))
		for k, v := range env {
			e[k] = v
		}
		for i, v := range idx {
			e[fmt.Sprintf("%%o%d", i)] = int64(v)
		}
		diffs = append(diffs, g.poly(b.lhs, e).NE(g.poly(b.rhs, e)))
	})
	if g.oob != "" {
		return b.outOfRange(env, shapes, g.oob)
	}
	if len(diffs) == 0 {
		return nil, true
	}
	s := z3.NewSolver(b.ctx)
	s.Assert(diffs[0].Or(diffs[1:]...))
	sat, err := s.Check()
	switch {
	case err != nil:
		return &Result{Status: Unknown, Reason: fmt.Sprintf("solver gave up at %s: %v", shapeString(env), err)}, true
	case !sat:
		return nil, true
	}
	return b.refute(env, shapes, modelInputs(s.Model(), g, b.rule, shapes)), true
}

// outOfRange handles a side that reads outside an input at these shapes:
// the interpreter decides whether the shapes are invalid for both sides
// (skipped) or only for one (refuted).
func (b *bounder) outOfRange(env map[string]int64, shapes map[string][]int, what string) (*Result, bool) {
	cex, bothFail := b.confirm(env, shapes, randomInputs(b.rule, shapes, 1))
	switch {
	case bothFail:
		return nil, false
	case cex != nil:
		return &Result{Status: Refuted, Cex: cex}, true
	}
	return &Result{Status: Unknown, Reason: "the encoding reads outside an input (" + what + ") where the interpreter does not"}, true
}

// refute confirms the solver's counterexample with the interpreter, then
// falls back to random integer inputs at the same shapes.
func (b *bounder) refute(env map[string]int64, shapes map[string][]int, inputs map[string]*tensor.Tensor) *Result {
	if cex, _ := b.confirm(env, shapes, inputs); cex != nil {
		return &Result{Status: Refuted, Cex: cex}
	}
	for seed := uint64(1); seed <= 20; seed++ {
		if cex, _ := b.confirm(env, shapes, randomInputs(b.rule, shapes, seed)); cex != nil {
			return &Result{Status: Refuted, Cex: cex, Reason: "the solver's values differ only under uninterpreted functions; random integer inputs confirm"}
		}
	}
	return &Result{Status: Unknown, Reason: "the solver's counterexample at " + shapeString(env) + " is not confirmed by the interpreter (uninterpreted functions)"}
}

// confirmTol is how far apart the interpreter's outputs must be for a
// counterexample to count.
var confirmTol = tensor.Tolerance{Rel: 1e-3, Abs: 1e-3}

// confirm runs both sides in the interpreter; bothFail reports that
// neither side can run at these shapes.
func (b *bounder) confirm(env map[string]int64, shapes map[string][]int, inputs map[string]*tensor.Tensor) (cex *Counterexample, bothFail bool) {
	l, lerr := interp.RunGraph(b.rule.LHS, inputs, nil, 0)
	r, rerr := interp.RunGraph(b.rule.RHS, inputs, nil, 0)
	c := &Counterexample{Shape: maps.Clone(env), Inputs: inputs}
	switch {
	case lerr != nil && rerr != nil:
		return nil, true
	case lerr != nil:
		c.Where = "the left side fails: " + lerr.Error()
		c.RHS = r.Outputs[b.rule.RHS.Outputs[0].Name]
		return c, false
	case rerr != nil:
		c.Where = "the right side fails: " + rerr.Error()
		c.LHS = l.Outputs[b.rule.LHS.Outputs[0].Name]
		return c, false
	}
	c.LHS = l.Outputs[b.rule.LHS.Outputs[0].Name]
	c.RHS = r.Outputs[b.rule.RHS.Outputs[0].Name]
	if err := tensor.Compare(c.LHS, c.RHS, confirmTol); err != nil {
		c.Where = err.Error()
		return c, false
	}
	return nil, false
}

// modelInputs reads the input elements from the solver's model; elements
// the model does not mention are 0.
func modelInputs(m *z3.Model, g *grounder, r *check.Rule, shapes map[string][]int) map[string]*tensor.Tensor {
	out := map[string]*tensor.Tensor{}
	for _, in := range r.Inputs {
		t := tensor.New(in.DType, shapes[in.Name])
		forEachIndex(shapes[in.Name], func(idx []int) {
			if c, ok := g.elems[elementName(in.Name, idx)]; ok {
				if v, ok := m.Eval(c, true).(z3.Real).AsBigRat(); ok {
					f, _ := v.Float64()
					t.Set(f, idx...)
				}
			}
		})
		out[in.Name] = t
	}
	return out
}

func elementName(t string, idx []int) string {
	s := t + "["
	for i, v := range idx {
		if i > 0 {
			s += ","
		}
		s += fmt.Sprint(v)
	}
	return s + "]"
}

// randomInputs fills every input with integers in [-3, 3].
func randomInputs(r *check.Rule, shapes map[string][]int, seed uint64) map[string]*tensor.Tensor {
	rng := rand.New(rand.NewPCG(seed, 7))
	out := map[string]*tensor.Tensor{}
	for _, in := range r.Inputs {
		t := tensor.New(in.DType, shapes[in.Name])
		for i := range t.Len() {
			t.SetFlat(i, float64(rng.IntN(7)-3))
		}
		out[in.Name] = t
	}
	return out
}

// forEachIndex calls f with every index of shape in row-major order.
func forEachIndex(shape []int, f func([]int)) {
	for _, d := range shape {
		if d <= 0 {
			return
		}
	}
	idx := make([]int, len(shape))
	for {
		f(append([]int(nil), idx...))
		i := len(idx) - 1
		for ; i >= 0; i-- {
			if idx[i]++; idx[i] < shape[i] {
				break
			}
			idx[i] = 0
		}
		if i < 0 {
			return
		}
	}
}

func shapeString(env map[string]int64) string {
	return fmt.Sprint(env)
}
