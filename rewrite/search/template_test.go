package search

import (
	"strings"
	"testing"

	"tofuc/analysis/check"
	"tofuc/rewrite/smt"
)

// TestTemplateInstancesAreVerified: a template's attribute is bound from
// the matched extent and that instance is verified before use; an
// instance that is wrong (here at any width but 1) is never applied.
func TestTemplateInstancesAreVerified(t *testing.T) {
	p, _ := setup(t)
	m, err := p.LoadSource("tmpl.tdl", []byte(`rule scale_by_width<k = 1>(x: [M, k]): relu(x) == relu(x) * k
model wide(x: f32[2, 3]) {
    return relu(x) + x
}
model narrow(x: f32[2, 1]) {
    return relu(x) + x
}
`))
	if err != nil {
		t.Fatal(err)
	}
	r, err := m.Rule("scale_by_width")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		model  string
		status smt.Status
	}{{"wide", smt.Refuted}, {"narrow", smt.Proved}} {
		g, err := m.Model(tc.model, nil)
		if err != nil {
			t.Fatal(err)
		}
		out, err := New(p, []*check.Rule{r}, Options{}).Exhaustive(g, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Verified) != 1 || out.Verified[0].Status != tc.status {
			t.Fatalf("%s: verified %+v, want one %s instance", tc.model, out.Verified, tc.status)
		}
		if tc.status == smt.Refuted && out.Explored != 0 {
			t.Errorf("%s: a refuted instance was applied (%d graphs)", tc.model, out.Explored)
		}
		if tc.status == smt.Proved && out.Explored == 0 {
			t.Errorf("%s: the proved instance was not applied", tc.model)
		}
	}
}

// TestRulesAreVerifiedBeforeUse: every rule is verified before its first
// match is applied: a bounded rule (bounded as far as its constants need)
// is used and reported with its bounds, a wrong one never.
func TestRulesAreVerifiedBeforeUse(t *testing.T) {
	p, _ := setup(t)
	m, err := p.LoadSource("rules.tdl", []byte(`rule relu_twice(x: [M, N]): relu(relu(x)) == relu(x)
rule relu_is_abs(x: [M, N]): relu(x) == abs(x)
model twice(x: f32[2, 3]) {
    return relu(relu(x))
}
`))
	if err != nil {
		t.Fatal(err)
	}
	var rules []*check.Rule
	for _, name := range []string{"relu_twice", "relu_is_abs"} {
		r, err := m.Rule(name)
		if err != nil {
			t.Fatal(err)
		}
		rules = append(rules, r)
	}
	g, err := m.Model("twice", nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := New(p, rules, Options{}).Exhaustive(g, 100)
	if err != nil {
		t.Fatal(err)
	}
	status := map[string]smt.Result{}
	for _, r := range out.Verified {
		status[r.Rule] = r
	}
	if r := status["relu_twice"]; !r.Usable() || r.Status != smt.Bounded || !strings.Contains(r.Level(), "M,N<=") {
		t.Errorf("relu_twice: %s %s, want bounded with the bound of each symbol", r.Status, r.Level())
	}
	if r := status["relu_is_abs"]; r.Status != smt.Refuted {
		t.Errorf("relu_is_abs: %s, want refuted", r.Status)
	}
	for _, s := range out.Steps {
		if strings.HasPrefix(s.Rule, "relu_is_abs") {
			t.Errorf("the wrong rule was applied at %s", s.Site)
		}
	}
	if out.Explored == 0 {
		t.Errorf("the bounded rule was not applied")
	}
}
