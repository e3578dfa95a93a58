package smt

import (
	"fmt"
	"maps"
	"testing"

	"tofuc/analysis/check"
	"tofuc/runtime/interp"
	"tofuc/runtime/tensor"
)

// loadRules checks every rule of the file at path.
func loadRules(t *testing.T, path string) []*check.Rule {
	t.Helper()
	p, err := check.NewProgram()
	if err != nil {
		t.Fatal(err)
	}
	m, err := p.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []*check.Rule
	for _, d := range m.File.Rules {
		r, err := m.Rule(d.Name)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

var stdRules []*check.Rule

func stdlibRules(t *testing.T) []*check.Rule {
	if stdRules == nil {
		stdRules = loadRules(t, "std/rules.tdl")
	}
	return stdRules
}

// TestStdlibRulesVerify: every rule of stdlib/rules.tdl is proved or
// bounded, and the rules the issue names are proved for all shapes.
func TestStdlibRulesVerify(t *testing.T) {
	rules := stdlibRules(t)
	if len(rules) < 40 {
		t.Fatalf("stdlib/rules.tdl has %d rules, want at least 40", len(rules))
	}
	mustProve := map[string]bool{"ewadd_assoc": true, "ewmul_distrib": true, "sru_factor": true, "matmul_assoc": true,
		"matmul_distrib": true, "matmul_smul": true, "transpose_matmul": true, "transpose_involution": true, "concat_matmul": true}
	for _, r := range VerifyAll(rules, Options{}) {
		switch {
		case r.Status != Proved && r.Status != Bounded:
			t.Errorf("%s: %s (%s)", r.Rule, r.Status, r.Reason)
		case mustProve[r.Rule] && r.Status != Proved:
			t.Errorf("%s: %s, want proved for all shapes", r.Rule, r.Status)
		}
	}
}

// TestStdlibRulesHoldOnRandomInputs checks the verdicts against the
// interpreter: every rule holds on random inputs with each shape symbol 2
// or 3, independently of the normal form.
func TestStdlibRulesHoldOnRandomInputs(t *testing.T) {
	for _, r := range stdlibRules(t) {
		for _, n := range []int64{2, 3} {
			env := map[string]int64{}
			for _, s := range symbols(r) {
				env[s] = n
			}
			b := &bounder{rule: r, out: r.LHS.Outputs[0].Shape}
			shapes, _, ok := b.concrete(env)
			if !ok {
				continue
			}
			if cex, bothFail := b.confirm(env, shapes, randomInputs(r, shapes, uint64(n))); cex != nil || bothFail {
				t.Errorf("%s at %v: the sides differ in the interpreter (both fail: %v)", r.Decl.Name, env, bothFail)
			}
		}
	}
}

// TestWrongRulesAreRefuted: every deliberately wrong rule is refuted or
// unknown, never proved or bounded, and each counterexample makes the
// interpreter compute different outputs (or fail on one side only).
func TestWrongRulesAreRefuted(t *testing.T) {
	rules := loadRules(t, "testdata/wrong.tdl")
	if len(rules) < 40 {
		t.Fatalf("testdata/wrong.tdl has %d rules, want at least 40", len(rules))
	}
	refuted := 0
	for i, r := range VerifyAll(rules, Options{}) {
		switch r.Status {
		case Proved, Bounded:
			t.Errorf("%s: %s, but the rule is wrong", r.Rule, r.Status)
		case Refuted:
			refuted++
			if err := recheck(rules[i], r.Cex); err != nil {
				t.Errorf("%s: %v", r.Rule, err)
			}
		}
	}
	t.Logf("%d of %d wrong rules refuted with a confirmed counterexample", refuted, len(rules))
}

// recheck runs the counterexample's inputs through the interpreter again.
func recheck(r *check.Rule, c *Counterexample) error {
	in := maps.Clone(c.Inputs)
	l, lerr := interp.RunGraph(r.LHS, in, nil, 0)
	rr, rerr := interp.RunGraph(r.RHS, in, nil, 0)
	if (lerr == nil) != (rerr == nil) {
		return nil
	}
	if lerr != nil {
		return fmt.Errorf("both sides fail on the counterexample: %v", lerr)
	}
	got, want := l.Outputs[r.LHS.Outputs[0].Name], rr.Outputs[r.RHS.Outputs[0].Name]
	if tensor.Compare(got, want, tensor.Tolerance{Rel: 1e-4, Abs: 1e-4}) == nil {
		return fmt.Errorf("the interpreter computes equal outputs on the counterexample at %v", c.Shape)
	}
	return nil
}
