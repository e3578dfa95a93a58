package search

import (
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
