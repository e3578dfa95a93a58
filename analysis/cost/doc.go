// Package cost is tofuc's cost model: what a way of running a graph costs,
// read from the graph and the partition-n-reduce strategies of its
// operators (analysis/strategy), with no per-operator table. The search
// (analysis/partition), its baselines, the report and later the rewriter
// all price graphs and strategies with it, so that their figures agree.
//
// # Partition plans
//
// A Plan splits a graph over Devices = k1·k2·…·km devices in m recursive
// steps (Tofu §3.5.2). At step i every tensor is split along one
// dimension into k_i parts (or, when none of its dimensions has k_i
// values left, kept whole: "replicated" at that step), and every operator
// runs one of its strategies over k_i workers (or, when it has none,
// runs whole on each of them). Step i applies to each of the k1·…·k(i-1)
// groups of devices left by the earlier steps; the groups are identical
// (Tofu's symmetry), so a step is priced on one representative group and
// multiplied by the number of groups.
//
// # Communication
//
// Each operator is priced on its own view of the step: the instance a
// worker of the previous step runs (View; at step 1 the node's instance),
// whose inputs are the regions that worker reads, data fetched at earlier
// steps included (Tofu's "extra input tensors"). Within a step, with k
// workers, a tensor split along d gives worker w part w of dimension d of
// the view (strategy.Part), and:
//
//   - fetching: worker w reads the region its strategy needs
//     (strategy.Region, halos included) and receives what of it it does
//     not hold: Σ_w |R_w \ T_w| elements;
//   - storing a split output: the owner of each tile receives what it did
//     not compute: Σ_w |T_w \ P_w|; a replicated output needs every part
//     on every worker (an all-gather);
//   - combining partial outputs (a split reduction): a reduce-scatter to
//     the owners, (k-1)·|y|, then for a replicated output an all-gather of
//     the result, (k-1)·|y| again;
//   - an operator without strategies runs whole on every worker: it
//     fetches whole inputs and stores nothing.
//
// Bytes are elements times the dtype's size. A step's cost is additive
// over the operator's tensors once its strategy is fixed (StepCost), which
// is what makes the search a min-sum problem over tensor choices.
//
// # Memory
//
// Memory per device is the peak, over the graph's node order, of the live
// tiles (parameters, inputs and graph outputs always; an intermediate from
// its producer to its last use, so a planner can reuse its buffer after
// that) plus the running operator's communication buffers: its fetched
// inputs and its redistributed or partial outputs, the operator's bytes
// over all steps divided by the number of devices. Tiles are the largest
// part at every split (ceil), so uneven splits are counted at their worst.
package cost
