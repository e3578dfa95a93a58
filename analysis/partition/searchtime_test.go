package partition_test

import (
	"fmt"
	"testing"

	"tofuc/analysis/cost"
	"tofuc/analysis/partition"
	"tofuc/internal/examplegraph"
)

// TestSearchTime: under the time objective the search's own plan, on
// the attention and recurrent examples' training graphs over 8 devices
// of both topologies, simulates at most every baseline's step and is
// the plan chosen (where the search in bytes lost to data parallelism,
// equal_chop or icml18 on each of them).
func TestSearchTime(t *testing.T) {
	for _, model := range []string{"transformer", "rnn"} {
		g := examplegraph.Load(t, model, true, nil)
		for _, topology := range []string{"h100-nvlink", "pcie"} {
			t.Run(model+"/"+topology, func(t *testing.T) {
				out, err := partition.Run(g, 8, partition.Options{Topology: cost.Topologies[topology], MCMCSteps: 20}, false)
				if err != nil {
					t.Fatal(err)
				}
				searched := out.Searched.Sim.Seconds
				for name, b := range out.Baselines {
					if b.Sim.Seconds < searched*(1-1e-12) {
						t.Errorf("%s simulates at %.4f ms, the search's plan at %.4f", name, b.Sim.Seconds*1e3, searched*1e3)
					}
				}
				if out.Best.Chosen != "search" {
					t.Errorf("the %s baseline's plan was chosen", out.Best.Chosen)
				}
				if out.Searched.Candidates != 9 {
					t.Errorf("%d candidate searches, want 3 factorisations × 3 weightings", out.Searched.Candidates)
				}
				bytes, err := partition.Search(g, 8, partition.Options{})
				if err != nil {
					t.Fatal(err)
				}
				if err := partition.Simulate(g, bytes, cost.Topologies[topology]); err != nil {
					t.Fatal(err)
				}
				if bytes.Sim.Seconds < searched {
					t.Errorf("the search in bytes simulates at %.4f ms, faster than the time search's %.4f", bytes.Sim.Seconds*1e3, searched*1e3)
				}
			})
		}
	}
}

// TestTimeFactorisations: the recursions the time search tries.
func TestTimeFactorisations(t *testing.T) {
	for n, want := range map[int]string{
		2: "[[2]]", 6: "[[3 2] [6]]", 8: "[[2 2 2] [4 2] [8]]", 12: "[[3 2 2] [6 2] [12]]",
		16: "[[2 2 2 2] [8 2] [16]]", 32: "[[2 2 2 2 2] [16 2] [32]]",
	} {
		got := partition.TimeFactorisations(n)
		if fmt.Sprint(got) != want {
			t.Errorf("%d devices: %v, want %s", n, got, want)
		}
		for _, f := range got {
			if err := partition.CheckFactors(f, n); err != nil {
				t.Errorf("%d devices: %v", n, err)
			}
		}
	}
}
