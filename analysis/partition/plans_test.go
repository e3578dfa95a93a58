package partition_test

import (
	"crypto/sha256"
	"fmt"
	"testing"
	"tofuc/internal/examplegraph"

	"tofuc/analysis/cost"
	"tofuc/analysis/partition"
)

// TestPlansUnchanged pins the plans the search and Run choose (by
// bytes) for the examples on 8 devices (training): their bytes per step
// and a digest of
// every tensor's splits and every operator's choices. The search is made
// faster without changing any plan it returns; a change that moves a
// digest changes plans and must say why. The big models (the issue's
// Wide ResNet-152-10 and RNN-10-4K) check the search alone, and are
// skipped with -short. (2026-11-29: the rnn and wresnet digests moved
// with their values' names only, `h, c = lstm_cell(...)` in a block
// naming its outputs h and c: a digest of indices for names is the same
// before and after on all five. 2026-11-30: the transformer's moved,
// 59,058,272 -> 52,033,632 bytes, when a reshape's gradient became a
// gather instead of a sum over every element: its head-splitting
// reshapes' backward operators changed, and so did their strategies.)
func TestPlansUnchanged(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		set        map[string]int64
		big        bool
		memory     int64 // Options.Memory
		// search and chosen: bytes per step and plan digest; chosen
		// names the plan Run kept ("" for the big ones: not run).
		searchBytes int64
		searchPlan  string
		chosen      string
		chosenBytes int64
		chosenPlan  string
	}{
		{name: "mlp", file: "mlp", searchBytes: 518640, searchPlan: "e9ee443da468a626", chosen: "search", chosenBytes: 518640, chosenPlan: "e9ee443da468a626"},
		{name: "rnn", file: "rnn", searchBytes: 49318672, searchPlan: "176c009475c649c3", chosen: "search", chosenBytes: 49318672, chosenPlan: "176c009475c649c3"},
		{name: "rnn at 8 MiB", file: "rnn", memory: 8 << 20, searchBytes: 761474608, searchPlan: "1a825e297182f5c9", chosen: "search", chosenBytes: 761474608, chosenPlan: "1a825e297182f5c9"},
		{name: "sru", file: "sru", searchBytes: 4160, searchPlan: "a3326d39addfde18", chosen: "equal_chop", chosenBytes: 2744, chosenPlan: "f2e248d1cc45b8cd"},
		{name: "transformer", file: "transformer", searchBytes: 52033632, searchPlan: "ee4e01527f4e1bf4", chosen: "search", chosenBytes: 52033632, chosenPlan: "ee4e01527f4e1bf4"},
		{name: "wresnet", file: "wresnet", searchBytes: 2401125472, searchPlan: "32e50996a502652f", chosen: "search", chosenBytes: 2401125472, chosenPlan: "32e50996a502652f"},
		{name: "WResNet-152-10", file: "wresnet", set: map[string]int64{"depth": 152, "width": 10, "batch": 8}, big: true,
			searchBytes: 17790615136, searchPlan: "b9b98008be83a6ff"},
		{name: "RNN-10-4K", file: "rnn", set: map[string]int64{"layers": 10, "hidden": 4096, "batch": 512}, big: true,
			searchBytes: 64997636432, searchPlan: "4a69e23f86514562"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.big && testing.Short() {
				t.Skip("big model")
			}
			g := examplegraph.Load(t, tc.file, true, tc.set)
			var searched, best *partition.Result
			var chosen string
			if tc.big {
				r, err := partition.Search(g, 8, partition.Options{Memory: tc.memory})
				if err != nil {
					t.Fatal(err)
				}
				searched = r
			} else {
				out, err := partition.Run(g, 8, partition.Options{Memory: tc.memory, Objective: partition.Bytes}, false)
				if err != nil {
					t.Fatal(err)
				}
				searched, best, chosen = out.Searched, out.Best, out.Best.Chosen
			}
			t.Logf("search %d %s", searched.Cost.CommBytes, digest(g, searched.Plan))
			if searched.Cost.CommBytes != tc.searchBytes || digest(g, searched.Plan) != tc.searchPlan {
				t.Errorf("search: %d bytes, plan %s; want %d, %s", searched.Cost.CommBytes, digest(g, searched.Plan), tc.searchBytes, tc.searchPlan)
			}
			if best == nil {
				return
			}
			t.Logf("chosen %s %d %s", chosen, best.Cost.CommBytes, digest(g, best.Plan))
			if chosen != tc.chosen || best.Cost.CommBytes != tc.chosenBytes || digest(g, best.Plan) != tc.chosenPlan {
				t.Errorf("chosen: %s, %d bytes, plan %s; want %s, %d, %s", chosen, best.Cost.CommBytes, digest(g, best.Plan), tc.chosen, tc.chosenBytes, tc.chosenPlan)
			}
		})
	}
}

// digest is a short hash of a plan: each tensor's splits and each
// operator's choices, in the graph's order.
func digest(g *cost.Graph, p *cost.Plan) string {
	h := sha256.New()
	for _, v := range g.Tensors() {
		fmt.Fprintln(h, v.Name, p.Tensors[v])
	}
	for _, n := range g.IR.Nodes {
		fmt.Fprintln(h, n.Name, p.Ops[n])
	}
	return fmt.Sprintf("%x", h.Sum(nil)[:8])
}
