package smt

import (
	"fmt"
	"maps"
	"math/big"
	"slices"
	"strings"

	"github.com/aclements/go-z3/z3"

	"tofuc/lang/ir"
	"tofuc/runtime/tensor"
)

// bounded checks the rule at every assignment of its shape symbols with
// each symbol S in 1..need[S]: both sides unrolled at each output
// element, one Z3 query per assignment asking for an element where they
// differ. An assignment counts as checked only when its output is not
// empty and both sides run there; the verdict is bounded only when every
// symbol reaches its bound in some checked assignment. When the bounds
// make too many assignments, smaller ones are still searched for a
// counterexample, and the verdict is otherwise unknown.
func (v *verifier) bounded() Result {
	bounds, total := v.need, shapeCount(v.need)
	if total > v.opts.maxShapes() {
		res := v.enumerate(within(v.need, v.opts.maxShapes()))
		if res.Status == Refuted {
			return res
		}
		smaller := "smaller shapes show no difference"
		if res.Status == Unknown {
			smaller = "at smaller shapes, " + res.Reason
		}
		return Result{Status: Unknown, Shapes: res.Shapes, Reason: fmt.Sprintf("the bounds the rule's constants need (%s) make %d shape assignments, more than %d (--max-shapes); %s", boundsText(v.need), total, v.opts.maxShapes(), smaller)}
	}
	return v.enumerate(bounds)
}

// shapeCount is the number of assignments within bounds (saturating).
func shapeCount(bounds map[string]int) int { return elements(slices.Collect(maps.Values(bounds))) }

// within lowers the largest bounds until their assignments number at
// most limit.
func within(bounds map[string]int, limit int) map[string]int {
	out := maps.Clone(bounds)
	for shapeCount(out) > limit {
		widest := ""
		for s, n := range out {
			if widest == "" || n > out[widest] || n == out[widest] && s < widest {
				widest = s
			}
		}
		if out[widest] == 1 {
			break
		}
		out[widest]--
	}
	return out
}

// enumerate checks every assignment within bounds.
func (v *verifier) enumerate(bounds map[string]int) Result {
	env := map[string]int64{}
	for _, s := range v.syms {
		env[s] = 1
	}
	checked := 0
	reached := map[string]bool{}
	for {
		res, valid := v.checkShape(env)
		if res != nil {
			res.Shapes = checked
			return *res
		}
		if valid {
			checked++
			for _, s := range v.syms {
				reached[s] = reached[s] || env[s] == int64(bounds[s])
			}
		}
		if !next(env, v.syms, bounds) {
			break
		}
	}
	for _, s := range v.syms {
		if !reached[s] {
			return Result{Status: Unknown, Shapes: checked, Reason: fmt.Sprintf("no shape with %s = %d (the bound its constants need) has a non-empty output where both sides run", s, bounds[s])}
		}
	}
	if len(v.syms) == 0 && checked == 1 {
		return Result{Status: Proved, Shapes: 1, Reason: "checked at its only shape"}
	}
	return Result{Status: Bounded, Bounds: bounds, Shapes: checked}
}

// next advances env to the next assignment within the bounds; false after
// the last.
func next(env map[string]int64, syms []string, bounds map[string]int) bool {
	for _, s := range syms {
		if env[s] < int64(bounds[s]) {
			env[s]++
			return true
		}
		env[s] = 1
	}
	return false
}

// checkShape checks one assignment: a non-nil result ends the run
// (refuted or unknown); valid reports whether the assignment was compared
// (inputs and output not empty, both sides defined).
func (v *verifier) checkShape(env map[string]int64) (res *Result, valid bool) {
	v.dl.check("the bounded check")
	shapes, ok := inputShapes(v.rule, env)
	if !ok || v.failsAt(env) {
		return nil, false
	}
	out, ok := positiveShape(v.out, env)
	if !ok {
		return nil, false
	}
	defer func() {
		switch r := recover().(type) {
		case nil:
		case notModelled:
			res, valid = &Result{Status: Unknown, Reason: r.what + " at " + shapeString(env)}, true
		default:
			panic(r)
		}
	}()
	g := newGrounder(v.e.ctx, v.dl, shapes)
	var diffs []z3.Bool
	forEachIndex(out, func(idx []int) {
		e := make(map[string]int64, len(env)+len(idx))
		for k, x := range env {
			e[k] = x
		}
		for i, x := range idx {
			e[fmt.Sprintf("%%o%d", i)] = int64(x)
		}
		if d, differ := g.differ(g.poly(v.lhs, e), g.poly(v.rhs, e)); differ {
			diffs = append(diffs, d)
		}
	})
	if g.oob != "" {
		return v.outOfRange(env, shapes, g.oob), true
	}
	if len(diffs) == 0 {
		return nil, true
	}
	s := z3.NewSolver(v.e.ctx)
	s.Assert(diffs[0].Or(diffs[1:]...))
	sat, err := v.dl.solve(s, "the bounded check")
	switch {
	case err != nil:
		return &Result{Status: Unknown, Reason: fmt.Sprintf("solver gave up at %s: %v", shapeString(env), err)}, true
	case !sat:
		return nil, true
	}
	return v.refute(env, shapes, modelInputs(s.Model(), g, v.rule.Inputs, shapes)), true
}

// differ is the condition that two grounded values differ; differ is
// false when they cannot (identical polynomials, equal infinities).
func (g *grounder) differ(a, b gval) (d z3.Bool, differ bool) {
	switch {
	case a.inf == 0 && b.inf == 0:
		diff := a.p.add(b.p.scale(big.NewRat(-1, 1)))
		if len(diff) == 0 {
			return d, false
		}
		return g.toZ3(diff).NE(g.real(0)), true
	case a.inf == b.inf:
		return d, false
	}
	return g.ctx.FromBool(true), true
}

// outOfRange handles a side that reads outside an input at these shapes:
// the interpreter decides whether one side alone fails (refuted).
func (v *verifier) outOfRange(env map[string]int64, shapes map[string][]int, what string) *Result {
	if cex, _ := confirm(v.rule, env, randomInputs(v.rule, shapes, 1), v.dl); cex != nil {
		return &Result{Status: Refuted, Cex: cex}
	}
	return &Result{Status: Unknown, Reason: "the encoding reads outside an input (" + what + ") where the interpreter does not fail on one side alone"}
}

// refute confirms the solver's counterexample with the interpreter, then
// falls back to random inputs at the same shapes.
func (v *verifier) refute(env map[string]int64, shapes map[string][]int, inputs map[string]*tensor.Tensor) *Result {
	if cex, _ := confirm(v.rule, env, inputs, v.dl); cex != nil {
		return &Result{Status: Refuted, Cex: cex}
	}
	for seed := uint64(1); seed <= 20; seed++ {
		if cex, _ := confirm(v.rule, env, randomInputs(v.rule, shapes, seed), v.dl); cex != nil {
			return &Result{Status: Refuted, Cex: cex, Reason: "the solver's values differ only under uninterpreted functions; random inputs confirm"}
		}
	}
	return &Result{Status: Unknown, Reason: "the solver's counterexample at " + shapeString(env) + " is not confirmed by the interpreter (uninterpreted functions)"}
}

// modelInputs reads the input elements from the solver's model; elements
// the model does not mention are 0.
func modelInputs(m *z3.Model, g *grounder, inputs []*ir.Value, shapes map[string][]int) map[string]*tensor.Tensor {
	out := map[string]*tensor.Tensor{}
	for _, in := range inputs {
		t := tensor.New(in.DType, shapes[in.Name])
		forEachIndex(shapes[in.Name], func(idx []int) {
			if c, ok := g.elems[elementName(in.Name, idx)]; ok {
				if x, ok := m.Eval(c, true).(z3.Real).AsBigRat(); ok {
					f, _ := x.Float64()
					t.Set(f, idx...)
				}
			}
		})
		out[in.Name] = t
	}
	return out
}

func elementName(t string, idx []int) string {
	parts := make([]string, len(idx))
	for i, x := range idx {
		parts[i] = fmt.Sprint(x)
	}
	return t + "[" + strings.Join(parts, ",") + "]"
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
