package partition_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"tofuc/parser"

	"tofuc/analysis/check"
	"tofuc/analysis/cost"
	"tofuc/analysis/partition"
)

// randomOps are operators beyond the standard library's: gram contracts
// over rows (data parallelism alone cannot avoid communication), pairs
// split along j reads two bands of its input; shift (halo) split along j
// reads a halo of one column.
const (
	randomOps = `op gram(x: [M, N]) -> [N, N] = lambda i, j: sum(lambda k: x[k, i] * x[k, j])
op pairs(x: [M, N]) -> [M, N / 2] = lambda i, j: x[i, j] + x[i, j + N / 2]
`
	halo = `op shift(x: [M, N]) -> [M, N] = lambda i, j: x[i, j - 1] else 0.0 + x[i, j]
`
)

// randomModel writes a random model of up to ops operators over 2-D
// tensors whose extents are powers of two; withHalo adds shift operators.
func randomModel(r *rand.Rand, ops int, withHalo bool) string {
	sizes := []int{4, 8, 16}
	type t struct {
		name string
		m, n int
	}
	var b strings.Builder
	x := t{"x", sizes[r.IntN(3)], sizes[r.IntN(3)]}
	live := []t{x}
	var body []string
	for i := range ops {
		a := live[r.IntN(len(live))]
		name := fmt.Sprintf("t%d", i)
		kinds := 6
		if withHalo {
			kinds = 7
		}
		switch r.IntN(kinds) {
		case 0:
			n := sizes[r.IntN(3)]
			body = append(body, fmt.Sprintf("    w%d = param f32[%d, %d]", i, a.n, n), fmt.Sprintf("    %s = matmul(%s, w%d)", name, a.name, i))
			live = append(live, t{name, a.m, n})
		case 1:
			body = append(body, fmt.Sprintf("    %s = relu(%s)", name, a.name))
			live = append(live, t{name, a.m, a.n})
		case 2:
			var same []t
			for _, c := range live {
				if c.m == a.m && c.n == a.n {
					same = append(same, c)
				}
			}
			c := same[r.IntN(len(same))]
			body = append(body, fmt.Sprintf("    %s = add(%s, %s)", name, a.name, c.name))
			live = append(live, t{name, a.m, a.n})
		case 3:
			body = append(body, fmt.Sprintf("    %s = transpose<perm = [1, 0]>(%s)", name, a.name))
			live = append(live, t{name, a.n, a.m})
		case 4:
			body = append(body, fmt.Sprintf("    %s = gram(%s)", name, a.name))
			live = append(live, t{name, a.n, a.n})
		case 5:
			body = append(body, fmt.Sprintf("    %s = pairs(%s)", name, a.name))
			live = append(live, t{name, a.m, a.n / 2})
		case 6:
			body = append(body, fmt.Sprintf("    %s = shift(%s)", name, a.name))
			live = append(live, t{name, a.m, a.n})
		}
	}
	b.WriteString(randomOps)
	if withHalo {
		b.WriteString(halo)
	}
	// The model ends with gram of its last value, which every worker needs
	// whole: replicating the input and splitting every operator's output
	// (free in a forward graph) does not make the whole plan free.
	fmt.Fprintf(&b, "model r(x: f32[%d, %d]) {\n%s\n    return gram(%s)\n}\n", x.m, x.n, strings.Join(body, "\n"), live[len(live)-1].name)
	return b.String()
}

func graphOf(tb testing.TB, src string) *cost.Graph {
	tb.Helper()
	_, g, err := check.LoadModel(parser.Parse, "random.tdl", []byte(src), nil)
	if err != nil {
		tb.Fatalf("%v\n%s", err, src)
	}
	cg, err := cost.NewGraph(g)
	if err != nil {
		tb.Fatal(err)
	}
	return cg
}

// TestSearchMatchesExhaustive: on random graphs of up to 8 operators
// over 4 devices (Tofu's assumptions: no halos, even splits), whose
// tensors may be replicated and whose operators may read several bands,
// the search is as cheap as exhaustive search. Graphs with halos are
// compared and logged apart. The test fails if too few graphs
// communicate at all or read bands: replication makes many forward
// graphs free (data parallelism).
func TestSearchMatchesExhaustive(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 1))
	compared, halos, costly, banded := 0, 0, 0, 0
	for compared < 24 {
		src := randomModel(r, 1+r.IntN(8), false)
		if bytes, ok := compare(t, graphOf(t, src), src, true); ok {
			compared++
			costly += min(1, int(bytes))
			if strings.Contains(src, "= pairs(") {
				banded++
			}
		}
		if compared%3 == 0 && halos < 8 {
			src := randomModel(r, 2+r.IntN(5), true)
			if _, ok := compare(t, graphOf(t, src), src, false); ok {
				halos++
			}
		}
	}
	if costly < 12 || banded < 5 {
		t.Errorf("%d of %d graphs communicate, %d read bands: the test no longer exercises the search", costly, compared, banded)
	}
	t.Logf("%d graphs, %d communicating, %d with banded reads", compared, costly, banded)
}

// compare searches g and compares with exhaustive search, returning the
// optimum; false when g has too many plans to enumerate.
func compare(t *testing.T, g *cost.Graph, src string, strict bool) (int64, bool) {
	t.Helper()
	e, err := partition.Exhaustive(g, 4, partition.Options{})
	if err != nil {
		return 0, false
	}
	s, err := partition.Search(g, 4, partition.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Cost.CommBytes < e.Cost.CommBytes {
		t.Errorf("search %d bytes beats exhaustive %d: exhaustive is not exhaustive\n%s", s.Cost.CommBytes, e.Cost.CommBytes, src)
	}
	switch {
	case !strict:
		t.Logf("halo case: search %d bytes, exhaustive %d (%d operators)", s.Cost.CommBytes, e.Cost.CommBytes, len(g.IR.Nodes))
	case s.Cost.CommBytes != e.Cost.CommBytes:
		t.Errorf("search %d bytes, exhaustive %d\n%s", s.Cost.CommBytes, e.Cost.CommBytes, src)
	}
	return e.Cost.CommBytes, true
}
