package smt

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"tofuc/parser"

	"tofuc/analysis/check"
	"tofuc/runtime/exec"
	"tofuc/runtime/tensor"
)

// loadRules checks every rule of the file at path.
func loadRules(t *testing.T, path string) []*check.Rule {
	t.Helper()
	p, err := check.NewProgram(parser.Parse)
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

var stdlib struct {
	once    sync.Once
	rules   []*check.Rule
	results []Result
}

// stdlibVerdicts verifies stdlib/rules.tdl once for the tests that need it.
func stdlibVerdicts(t *testing.T) ([]*check.Rule, []Result) {
	stdlib.once.Do(func() {
		stdlib.rules = loadRules(t, "std/rules.tdl")
		stdlib.results = VerifyAll(stdlib.rules, Options{})
	})
	if stdlib.rules == nil {
		t.Fatal("stdlib/rules.tdl did not load")
	}
	return stdlib.rules, stdlib.results
}

// stdlibRule checks one rule of stdlib/rules.tdl.
func stdlibRule(t *testing.T, name string) *check.Rule {
	for _, r := range loadRules(t, "std/rules.tdl") {
		if r.Decl.Name == name {
			return r
		}
	}
	t.Fatalf("no rule %s in stdlib/rules.tdl", name)
	return nil
}

// TestStdlibRulesVerify: every rule of stdlib/rules.tdl is proved or
// soundly bounded, and the rules the issue names are proved for all
// shapes.
func TestStdlibRulesVerify(t *testing.T) {
	rules, results := stdlibVerdicts(t)
	if len(rules) < 40 {
		t.Fatalf("stdlib/rules.tdl has %d rules, want at least 40", len(rules))
	}
	mustProve := map[string]bool{"ewadd_assoc": true, "ewmul_distrib": true, "sru_factor": true, "matmul_assoc": true,
		"matmul_distrib": true, "matmul_smul": true, "transpose_matmul": true, "transpose_involution": true, "concat_matmul": true}
	for _, r := range results {
		switch {
		case !r.Usable():
			t.Errorf("%s: %s %s (%s)", r.Rule, r.Status, r.Level(), r.Reason)
		case mustProve[r.Rule] && r.Status != Proved:
			t.Errorf("%s: %s, want proved for all shapes", r.Rule, r.Status)
		}
	}
}

// TestStdlibRulesHoldBeyondBounds runs every proved and bounded rule of
// stdlib/rules.tdl in the interpreter on random inputs at shapes beyond
// its bound (for a proved rule, beyond the bound its constants would
// need), with seeds the verifier's own probe does not use.
func TestStdlibRulesHoldBeyondBounds(t *testing.T) {
	rules, results := stdlibVerdicts(t)
	for i, r := range rules {
		if results[i].Usable() {
			checkBeyond(t, r, results[i])
		}
	}
}

// checkBeyond fails t when the sides of a verified rule differ in the
// interpreter beyond its bounds, or when no probe could run.
func checkBeyond(t *testing.T, r *check.Rule, res Result) {
	t.Helper()
	bounds := res.Need
	if res.Status == Bounded {
		bounds = res.Bounds
	}
	ran := 0
	for seed := uint64(101); seed <= 104; seed++ {
		cex, ok := ProbeBeyond(r, bounds, seed)
		if cex != nil {
			t.Errorf("%s (%s, %s): the sides differ at %v: %s", r.Decl.Name, res.Status, res.Level(), cex.Shape, cex.Where)
			return
		}
		if ok {
			ran++
		}
	}
	if ran == 0 {
		t.Errorf("%s: no shape beyond %v could be run", r.Decl.Name, bounds)
	}
}

// TestWrongRulesAreRefuted: every deliberately wrong rule is refuted (any
// other verdict fails), and each counterexample makes the interpreter
// compute different outputs (or fail on one side only).
func TestWrongRulesAreRefuted(t *testing.T) {
	rules := loadRules(t, "testdata/wrong.tdl")
	if len(rules) < 40 {
		t.Fatalf("testdata/wrong.tdl has %d rules, want at least 40", len(rules))
	}
	for i, r := range VerifyAll(rules, Options{}) {
		if r.Status != Refuted {
			t.Errorf("%s: %s %s (%s), but the rule is wrong", r.Rule, r.Status, r.Level(), r.Reason)
			continue
		}
		if err := recheck(rules[i], r.Cex); err != nil {
			t.Errorf("%s: %v", r.Rule, err)
		}
	}
}

// recheck runs the counterexample's inputs through the interpreter again.
func recheck(r *check.Rule, c *Counterexample) error {
	in := maps.Clone(c.Inputs)
	l, lerr := exec.Run(r.LHS, exec.Interp{}, in, nil, 0)
	rr, rerr := exec.Run(r.RHS, exec.Interp{}, in, nil, 0)
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

// TestTrueRulesAreNotRefuted: rules that hold (some only because both
// sides fail at the same shapes, some for reasons the proof does not see)
// are proved or bounded, never refuted.
func TestTrueRulesAreNotRefuted(t *testing.T) {
	rules := loadRules(t, "testdata/true.tdl")
	for i, r := range VerifyAll(rules, Options{}) {
		if !r.Usable() {
			t.Errorf("%s: %s %s (%s)", r.Rule, r.Status, r.Level(), r.Reason)
			continue
		}
		checkBeyond(t, rules[i], r)
	}
}

// TestWrongRulesWithoutProbes: with the interpreter probes off, the proof
// and the bounded check alone never call a wrong rule proved or bounded.
func TestWrongRulesWithoutProbes(t *testing.T) {
	if testing.Short() {
		t.Skip("verifies testdata/wrong.tdl a second time")
	}
	rules := loadRules(t, "testdata/wrong.tdl")
	for _, r := range VerifyAll(rules, Options{noProbe: true}) {
		if r.Status == Proved || r.Status == Bounded {
			t.Errorf("%s: %s %s without the probes, but the rule is wrong", r.Rule, r.Status, r.Level())
		}
	}
}

// TestTimeoutEndsTheRule: a rule whose bounded check takes seconds ends
// within a short timeout, unknown, saying so (the slack allows for a
// loaded machine; unloaded, the overshoot is below a millisecond).
func TestTimeoutEndsTheRule(t *testing.T) {
	slow := stdlibRule(t, "conv_identity_kernel")
	const limit = 300 * time.Millisecond
	res := Verify(slow, Options{Timeout: limit})
	if res.Status != Unknown || !strings.Contains(res.Reason, "timeout") || res.Time > limit+time.Second {
		t.Errorf("%s with a %s timeout: %s after %s (%s)", res.Rule, limit, res.Status, res.Time, res.Reason)
	}
	t.Logf("%s with a %s timeout: %s after %s", res.Rule, limit, res.Status, res.Time)
}

// TestBitcastOfFloatIsNotProved: a float's bits are not a function of its
// value (0.0 and -0.0), so a rule that holds for the values but not the
// bits is never proved.
func TestBitcastOfFloatIsNotProved(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bitcast.tdl")
	src := `op bits(x: f32[N]) -> i32[N] = lambda i: bitcast(x[i], i32)
op plus_zero(x: f32[N]) -> [N] = lambda i: x[i] + 0.0
rule bits_plus_zero(x: f32[N]): bits(plus_zero(x)) == bits(x)
`
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, r := range VerifyAll(loadRules(t, path), Options{}) {
		if r.Status == Proved || r.Status == Bounded {
			t.Errorf("%s: %s, but bitcast(-0.0 + 0.0) is not bitcast(-0.0)", r.Rule, r.Status)
		}
	}
}
