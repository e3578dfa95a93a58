package generate

import (
	"strings"
	"testing"

	"tofuc/analysis/check"
)

// TestGenerateSmall runs the generator on graphs of up to two operators of
// the dense world: it must rediscover the transpose involution, matmul
// associativity and relu commuting with transpose, and never emit a
// refuted rule.
func TestGenerateSmall(t *testing.T) {
	prog, err := check.NewProgram()
	if err != nil {
		t.Fatal(err)
	}
	res, err := Generate(prog, Options{MaxOps: 2, Worlds: []World{Dense()}, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	st := res.Stats
	t.Logf("%+v", st)
	all := strings.Join(res.Rules, "\n")
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
