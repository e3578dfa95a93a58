package search

import (
	"math"
	"testing"

	"tofuc/analysis/cost"
)

// TestScoreMatchesPlainEvaluation: the search's shortcuts give what
// pricing each candidate from scratch does. For the candidates two
// rewrites away from the SRU and CNN examples, a graph hashes alike
// before and after tidying (score hashes first and never tidies a graph
// seen before), and score's estimate, from the Estimator's memo of each
// Def, on every core, equals cost.Roofline of the tidied graph.
func TestScoreMatchesPlainEvaluation(t *testing.T) {
	p, rules := setup(t)
	for _, path := range []string{"../../examples/sru.tdl", "../../examples/cnn.tdl"} {
		g := model(t, p, path, nil)
		o := New(p, rules, Options{})
		if err := tidy(g); err != nil {
			t.Fatal(err)
		}
		frontier, checked := []state{{g: g}}, 0
		for depth := 0; depth < 2; depth++ {
			var next []state
			for _, s := range frontier {
				cands := o.rw.candidates(s.g, o.rules, nil, nil)
				for _, c := range cands {
					before, ok := canonicalHash(c.g)
					if !ok {
						continue
					}
					cp := clone(c.g)
					if tidy(cp) != nil {
						continue
					}
					if after, _ := canonicalHash(cp); after != before {
						t.Errorf("%s: %s at %s: hash %x before tidying, %x after", path, c.rule, c.site, before, after)
					}
				}
				for _, sc := range o.score(cands, map[uint64]bool{}) {
					want, err := cost.Roofline(sc.g, o.opts.Device)
					if err != nil {
						t.Fatal(err)
					}
					// Equal up to the order of the kernels' sum: the memo keys
					// a cost by hash, which ignores the order of the nodes.
					if h, _ := canonicalHash(sc.g); h != sc.hash || math.Abs(sc.cost-want.Time) > 1e-12*want.Time {
						t.Errorf("%s: %s at %s: scored %g (hash %x), priced alone %g (hash %x)", path, sc.rule, sc.site, sc.cost, sc.hash, want.Time, h)
					}
					checked++
					next = append(next, state{g: sc.g})
				}
			}
			frontier = next
		}
		if checked < 10 {
			t.Errorf("%s: only %d candidates checked", path, checked)
		}
	}
}
