// Command plansim prints, for each compiled plan given, its steps by
// kind and its simulated step on a topology (cost.SimulatePlan): how a
// plan's transfers and collectives price, before and after a change to
// the code generator (docs/partition.md, "Collective steps").
//
//	go run ./scripts/plansim [-topology NAME|FILE] [-as-reduce] DIR/plan.json...
//
// -as-reduce prices every all-reduce step as the reduce step the code
// generator wrote before it wrote collectives (each member fetching
// every other member's whole part): the plan of today, simulated as the
// plan before, where compiling the plan before takes a machine this one
// is not.
//
// A plan of an earlier version is read as it is, unchecked (its steps
// are the same but for the collectives); one of this version is
// checked first (plan.Validate).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"

	"tofuc/analysis/cost"
	"tofuc/runtime/plan"
)

func main() {
	topology := flag.String("topology", "h100-nvlink", "a built-in topology ("+fmt.Sprint(cost.TopologyNames())+") or a topology file")
	asReduce := flag.Bool("as-reduce", false, "price every all-reduce step as a reduce step of each member")
	flag.Parse()
	t, err := cost.LoadTopology(*topology)
	if err == nil {
		for _, path := range flag.Args() {
			if err = show(path, t, *asReduce); err != nil {
				break
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "plansim:", err)
		os.Exit(1)
	}
}

// show prints one plan's steps by kind and its simulated step, its
// all-reduces as reduce steps when asReduce.
func show(path string, t *cost.Topology, asReduce bool) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var p plan.Plan
	if err := json.Unmarshal(b, &p); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if p.Version == plan.Version {
		if err := p.Validate(); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	if asReduce {
		for _, list := range p.Steps {
			for i := range list {
				if list[i].Op == plan.AllReduce {
					list[i].Op, list[i].Group = plan.Reduce, nil
				}
			}
		}
	}
	sim, err := cost.SimulatePlan(&p, t)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	ops := map[string]int{}
	for _, list := range p.Steps {
		for _, s := range list {
			ops[s.Op]++
		}
	}
	fmt.Printf("%s (version %d, %d devices) on %s: step %.3f ms (compute %.3f ms, transfers %.3f ms on the device ending last)\n",
		path, p.Version, p.Devices, t.Name, sim.Seconds*1e3, sim.Compute*1e3, sim.Transfer*1e3)
	for _, op := range slices.Sorted(maps.Keys(ops)) {
		fmt.Printf("  %s: %d steps\n", op, ops[op])
	}
	return nil
}
