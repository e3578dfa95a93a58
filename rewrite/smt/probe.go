package smt

import (
	"fmt"
	"maps"
	"math/rand/v2"

	"tofuc/analysis/check"
	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/runtime/exec"
	"tofuc/runtime/tensor"
)

// maxRunElements bounds the input elements of one interpreter run the
// verifier starts (a witness, a probe), so that runs stay short.
const maxRunElements = 1 << 16

// probeRounds is how many random shapes beyond the bounds the verifier
// runs in the interpreter before the proof.
const probeRounds = 4

// confirmTol is how far apart the interpreter's outputs must be for a
// counterexample to count.
var confirmTol = tensor.Tolerance{Rel: 1e-3, Abs: 1e-3}

// tolerance is confirmTol, widened for a rule over f16 or bf16 inputs to
// the policy's tolerance of reordered arithmetic in that dtype
// (docs/testing.md), n the number of input elements: the real-number
// model ignores rounding, so (x + y) + z and x + (y + z) in bf16 differ
// by more than 1e-3 and are still the same rule. Explicit narrowing casts
// of wider inputs are semantics and keep confirmTol.
func tolerance(r *check.Rule, inputs map[string]*tensor.Tensor) tensor.Tolerance {
	tol := confirmTol
	n := 0
	for _, t := range inputs {
		n += t.Len()
	}
	for _, in := range r.Inputs {
		if in.DType == lang.F16 || in.DType == lang.BF16 {
			t := tensor.Reordered(in.DType, n)
			tol.Rel, tol.Abs = max(tol.Rel, t.Rel), max(tol.Abs, t.Abs)
		}
	}
	return tol
}

// probe runs the sides in the interpreter at random shapes beyond the
// bounds the rule needs: a cheap refutation of a rule wrong only at
// larger shapes, and a check on every later verdict.
func (v *verifier) probe() *Result {
	if v.opts.noProbe {
		return nil
	}
	for seed := uint64(1); seed <= probeRounds; seed++ {
		if cex, _ := probeBeyond(v.rule, v.need, seed, v.dl); cex != nil {
			return &Result{Status: Refuted, Cex: cex, Reason: "the sides differ in the interpreter beyond the bounds the rule needs"}
		}
	}
	return nil
}

// probeOnly is the verdict on a rule the encoding cannot express (why):
// unknown, unless the interpreter shows the sides differ at a few small
// shapes.
func probeOnly(r *check.Rule, opts Options, dl *deadline, why error) Result {
	if !opts.noProbe {
		ones := map[string]int{}
		for _, s := range symbols(r) {
			ones[s] = 1
		}
		for seed := uint64(1); seed <= probeRounds; seed++ {
			if cex, _ := probeBeyond(r, ones, seed, dl); cex != nil {
				return Result{Status: Refuted, Cex: cex, Reason: "the sides differ in the interpreter (" + why.Error() + ")"}
			}
		}
	}
	return Result{Status: Unknown, Reason: why.Error()}
}

// ProbeBeyond runs both sides of r in the interpreter on random inputs
// (seeded) at shapes beyond bounds: each shape symbol S drawn from
// bounds[S]+1 .. bounds[S]+4 (all at bounds[S]+1 for seed 1). It returns
// the counterexample when the outputs differ or one side alone fails;
// ran is false when nothing was compared (both sides fail there, or the
// inputs would exceed 2^16 elements).
func ProbeBeyond(r *check.Rule, bounds map[string]int, seed uint64) (cex *Counterexample, ran bool) {
	return probeBeyond(r, bounds, seed, nil)
}

func probeBeyond(r *check.Rule, bounds map[string]int, seed uint64, dl *deadline) (*Counterexample, bool) {
	rng := rand.New(rand.NewPCG(seed, 11))
	env := map[string]int64{}
	for _, s := range symbols(r) {
		env[s] = int64(bounds[s] + 1)
		if seed > 1 {
			env[s] += int64(rng.IntN(4))
		}
	}
	return runAt(r, env, seed, dl)
}

// confirmAt runs the sides at env on a few random inputs.
func (v *verifier) confirmAt(env map[string]int64) *Counterexample {
	for seed := uint64(1); seed <= 3; seed++ {
		if cex, _ := runAt(v.rule, env, seed, v.dl); cex != nil {
			return cex
		}
	}
	return nil
}

// runAt runs both sides at env on random inputs (integers in [-3, 3] for
// odd seeds, uniform in [-2, 2) for even ones); ran is false when the
// inputs are too large or both sides fail.
func runAt(r *check.Rule, env map[string]int64, seed uint64, dl *deadline) (cex *Counterexample, ran bool) {
	shapes, ok := inputShapes(r, env)
	if !ok || !small(r, env, shapes) {
		return nil, false
	}
	cex, bothFail := confirm(r, env, randomInputs(r, shapes, seed), dl)
	return cex, !bothFail
}

// small reports whether the inputs at env hold at most maxRunElements
// elements and no tensor of either side more than 16 times that, so that
// a run is short and cannot exhaust memory.
func small(r *check.Rule, env map[string]int64, shapes map[string][]int) bool {
	total := 0
	for _, s := range shapes {
		total += elements(s)
	}
	if total > maxRunElements {
		return false
	}
	for _, g := range []*ir.Graph{r.LHS, r.RHS} {
		for _, n := range g.Nodes {
			for _, d := range append(append([]*ir.Def(nil), n.Inst.Locals...), n.Inst.Outputs...) {
				if s, ok := positiveShape(d.Tensor.Shape, env); ok && elements(s) > 16*maxRunElements {
					return false
				}
			}
		}
	}
	return true
}

// elements is the element count of a shape, saturating.
func elements(s []int) int {
	n := 1
	for _, d := range s {
		n = min(n*d, 1<<40)
	}
	return n
}

// inputShapes evaluates the inputs' shapes at env; ok is false when an
// extent is not positive.
func inputShapes(r *check.Rule, env map[string]int64) (map[string][]int, bool) {
	shapes := map[string][]int{}
	for _, in := range r.Inputs {
		s, ok := positiveShape(in.Shape, env)
		if !ok {
			return nil, false
		}
		shapes[in.Name] = s
	}
	return shapes, true
}

// positiveShape evaluates s at env; ok is false when an extent is not
// positive (or not defined).
func positiveShape(s []lang.Dim, env map[string]int64) ([]int, bool) {
	out := make([]int, len(s))
	for i, d := range s {
		v, err := d.Eval(env)
		if err != nil || v < 1 {
			return nil, false
		}
		out[i] = int(v)
	}
	return out, true
}

// confirm runs both sides in the interpreter; bothFail reports that
// neither side can run at these shapes. The deadline, when set, abandons
// a run between nodes.
func confirm(r *check.Rule, env map[string]int64, inputs map[string]*tensor.Tensor, dl *deadline) (cex *Counterexample, bothFail bool) {
	opts := exec.Interp{Workers: 1}
	if dl != nil {
		opts.Progress = func(int, int, string) { dl.check("running the interpreter") }
	}
	l, lerr := exec.Run(r.LHS, opts, inputs, nil, 0)
	dl.check("running the interpreter")
	rr, rerr := exec.Run(r.RHS, opts, inputs, nil, 0)
	dl.check("running the interpreter")
	c := &Counterexample{Shape: maps.Clone(env), Inputs: inputs}
	switch {
	case lerr != nil && rerr != nil:
		return nil, true
	case lerr != nil:
		c.Where = "the left side fails: " + lerr.Error()
		c.RHS = rr.Outputs[r.RHS.Outputs[0].Name]
		return c, false
	case rerr != nil:
		c.Where = "the right side fails: " + rerr.Error()
		c.LHS = l.Outputs[r.LHS.Outputs[0].Name]
		return c, false
	}
	c.LHS = l.Outputs[r.LHS.Outputs[0].Name]
	c.RHS = rr.Outputs[r.RHS.Outputs[0].Name]
	if err := tensor.Compare(c.LHS, c.RHS, tolerance(r, inputs)); err != nil {
		c.Where = err.Error()
		return c, false
	}
	return nil, false
}

// randomInputs fills every input with integers in [-3, 3] (odd seeds) or
// uniform values in [-2, 2) (even seeds).
func randomInputs(r *check.Rule, shapes map[string][]int, seed uint64) map[string]*tensor.Tensor {
	rng := rand.New(rand.NewPCG(seed, 7))
	out := map[string]*tensor.Tensor{}
	for _, in := range r.Inputs {
		t := tensor.New(in.DType, shapes[in.Name])
		for i := range t.Len() {
			if seed%2 == 1 {
				t.SetFlat(i, float64(rng.IntN(7)-3))
			} else {
				t.SetFlat(i, rng.Float64()*4-2)
			}
		}
		out[in.Name] = t
	}
	return out
}

func shapeString(env map[string]int64) string {
	return fmt.Sprint(env)
}
