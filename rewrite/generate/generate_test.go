package generate

import (
	"strings"
	"testing"
	"tofuc/parser"

	"tofuc/analysis/check"
	"tofuc/rewrite/smt"
)

// TestGenerateSmall runs the generator on graphs of up to two operators of
// the dense world: it must rediscover the transpose involution, matmul
// associativity and relu commuting with transpose, and never emit a
// refuted rule.
func TestGenerateSmall(t *testing.T) {
	prog, err := check.NewProgram(parser.Parse)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Generate(prog, Options{MaxOps: 2, Worlds: []World{Dense()}, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	st := res.Stats
	t.Logf("%+v", st)
	var texts []string
	for _, r := range res.Rules {
		texts = append(texts, r.Text)
	}
	all := strings.Join(texts, "\n")
	for _, want := range []string{
		"transpose<perm = [1, 0]>(transpose<perm = [1, 0]>(x)) == x",
		"matmul(matmul(x, w), w) == matmul(x, matmul(w, w))",
		"relu(transpose<perm = [1, 0]>(x)) == transpose<perm = [1, 0]>(relu(x))",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("no rule with %s in\n%s", want, all)
		}
	}
	if st.Refuted > 0 || st.Proved+st.Bounded != len(res.Rules) {
		t.Errorf("%d refuted; %d rules for %d proved and %d bounded", st.Refuted, len(res.Rules), st.Proved, st.Bounded)
	}
	if !(st.Graphs >= st.Fingerprints && st.Candidates >= st.AfterRenaming && st.AfterRenaming >= st.AfterCommon) {
		t.Errorf("stage counts do not shrink: %+v", st)
	}
}

// TestGeneratedRulesHoldBeyondBounds generates the rules of both worlds
// of up to two operators and runs every one (proved or bounded) in the
// interpreter on random inputs at shapes beyond its bound, with seeds the
// verifier's own probe does not use.
func TestGeneratedRulesHoldBeyondBounds(t *testing.T) {
	prog, err := check.NewProgram(parser.Parse)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Generate(prog, Options{MaxOps: 2, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d rules: %+v", len(res.Rules), res.Stats)
	for _, r := range res.Rules {
		bounds := r.Verdict.Need
		if r.Verdict.Status == smt.Bounded {
			bounds = r.Verdict.Bounds
		}
		ran := 0
		for seed := uint64(101); seed <= 103; seed++ {
			cex, ok := smt.ProbeBeyond(r.Checked, bounds, seed)
			if cex != nil {
				t.Errorf("%s: the sides differ at %v: %s", r.Text, cex.Shape, cex.Where)
				break
			}
			if ok {
				ran++
			}
		}
		if ran == 0 {
			t.Errorf("%s: no shape beyond %v could be run", r.Text, bounds)
		}
	}
}
