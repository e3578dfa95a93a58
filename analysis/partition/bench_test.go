package partition_test

import (
	"fmt"
	"syscall"
	"testing"
	"time"
	"tofuc/internal/examplegraph"
	"tofuc/lang/ir"

	"tofuc/analysis/cost"
	"tofuc/analysis/partition"
)

// BenchmarkSearch times the search alone on the models: the Wide
// ResNet-152 (width 10, batch 8) and the 10-layer RNN (hidden 4096, batch
// 512, 20 steps) training graphs on 8 and 64 devices. Each iteration
// searches a freshly loaded graph (loading is outside the timer), so the
// strategy analysis of its instances is inside, as in tofuc partition's
// search_seconds. Besides the wall clock it reports the process's CPU
// seconds during the search (cpu-s/op): on a shared machine the wall
// clock depends on the load, the CPU time much less, and a quiet 2-core
// machine needs between half of it and all of it. Results in
// docs/partition.md.
func BenchmarkSearch(b *testing.B) {
	models := []struct {
		name, file string
		set        map[string]int64
	}{
		{"WResNet-152-10", "wresnet", map[string]int64{"depth": 152, "width": 10, "batch": 8}},
		{"RNN-10-4K", "rnn", map[string]int64{"layers": 10, "hidden": 4096, "batch": 512}},
	}
	for _, m := range models {
		for _, devices := range []int{8, 64} {
			b.Run(fmt.Sprintf("%s/%d", m.name, devices), func(b *testing.B) {
				for range b.N {
					b.StopTimer()
					g := examplegraph.Load(b, m.file, true, m.set)
					b.StartTimer()
					cpu := cpuSeconds(b)
					r, err := partition.Search(g, devices, partition.Options{})
					if err != nil {
						b.Fatal(err)
					}
					b.ReportMetric(cpuSeconds(b)-cpu, "cpu-s/op")
					b.ReportMetric(float64(r.Cost.CommBytes), "bytes/step")
				}
			})
		}
	}
}

// cpuSeconds is the process's user and system CPU time.
func cpuSeconds(b *testing.B) float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// BenchmarkRefineTime times the time objective's refinement (200
// proposals, seed 1) on training steps at 8 devices on PCIe, each
// proposal priced and simulated as a delta (RefineTime, cost.Delta) or
// whole (Graph.Evaluate and Graph.Simulate): the same chain, the same
// result (TestDeltaSimulation). The search and the baselines run outside
// the timer. Results in docs/partition.md.
func BenchmarkRefineTime(b *testing.B) {
	for _, model := range []string{"rnn", "transformer", "wresnet"} {
		g := examplegraph.Load(b, model, true, nil)
		topo := cost.Topologies["pcie"]
		out, err := partition.Run(g, 8, partition.Options{Topology: topo}, false)
		if err != nil {
			b.Fatal(err)
		}
		for _, way := range []string{"delta", "full"} {
			b.Run(model+"/"+way, func(b *testing.B) {
				for range b.N {
					var err error
					if way == "delta" {
						_, _, err = partition.RefineTime(g, out.Best, topo, 0, 1, partition.DefaultMCMCSteps)
					} else {
						_, _, err = partition.RefineTimeWith(g, out.Best, whole{g, topo}, 0, 1, partition.DefaultMCMCSteps)
					}
					if err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// whole prices and simulates every plan in full.
type whole struct {
	g    *cost.Graph
	topo *cost.Topology
}

func (w whole) Price(p *cost.Plan, _ []*ir.Node) (*cost.Cost, *cost.Simulation, error) {
	c, err := w.g.Evaluate(p)
	if err != nil {
		return nil, nil, err
	}
	sim, err := w.g.Simulate(p, w.topo)
	return c, sim, err
}
