// Package partition searches for the partition plan of a dataflow graph
// with the least communication over N devices (Tofu §3.5), priced by
// analysis/cost, and compares it with the baselines of Tofu §3.7.3.
//
// # Coarsening
//
// Coarsen reads the graph's structure (never names): a forward operator
// with its backward operators (Node.Forward) forms a group; gradient sums
// join the group of the operator that produced the tensor; consecutive
// element-wise forward operators merge; a tensor forms a group with its
// gradients (Value.GradOf) and their sums. Repeated structure that shares
// weights — unrolled time steps, a block applied in a loop to the same
// parameters: forward operators with the same instance reading the same
// parameters — forms classes whose members share the splits of
// corresponding tensors (outputs position by position, the class's own
// inputs, and to a fixed point the outputs of operators with the same
// instance whose inputs are tied), as Tofu coalesces unrolled time steps.
//
// # One step: a min-sum problem solved by elimination
//
// With the splits of the tensors fixed, an operator's bytes add up over
// its tensors (cost.StepCost). A step is therefore a min-sum problem over
// variables — one per tied tensor (its split dimension) and one per node
// (its strategy) — with a factor per (node, tensor) pair. It is solved
// exactly by variable elimination: eliminate the variable whose table is
// smallest, replacing its factors by their minimum over it, then
// back-substitute. On a coarsened graph that is a chain or a fork-join
// (MLPs, CNNs: Tofu's "linear" graphs) this is Tofu's DP, the tables
// being the frontier tables and the brute force inside each group the
// minimum over its members' choices. On any other graph it is the
// documented general method: still exact, with tables exponential in the
// graph's induced width. When a table would exceed Options.TableLimit the
// step is solved approximately and the result says so (Result.Exact,
// StepStats.Method, the report): iterated conditional modes from the
// data-parallel, AllRow-Greedy and Spartan assignments (the best kept), then block
// descent (blockDescent): the hubs — the tensor variables with the most
// factors, such as the tied tensors of an RNN layer read by all its time
// steps — are fixed and everything else is eliminated exactly (the time
// steps fall apart into chains), then the hubs and their node variables
// are eliminated exactly with the rest fixed (the brute force over a
// coalesced layer group), in turn until a round lowers nothing.
//
// # Recursion
//
// Search runs one step per factor of N (Factorise: the prime factors,
// largest first, or any non-increasing factorisation given in
// Options.Factors): each step splits every tensor along one dimension and
// every operator by one strategy among k workers, and the next step works
// on the representative worker's instance (cost.View.Sub).
//
// A step chooses an operator's strategy for that step alone, but the
// strategy decides the instance the operator's workers run at the later
// steps, so the cheapest choice at one step can cost more later (Tofu's
// optimality argument assumes it cannot). After the last step, refine
// therefore re-chooses every operator's strategies over all the steps at
// once, the tensors' splits fixed: exact per operator (a branch and bound
// over its views), and the plan's cost never rises.
//
// # Baselines and reference
//
// Baseline computes data parallelism (AllRow-Greedy), Spartan's greedy,
// EqualChop and ICML18 with the same cost model; Exhaustive enumerates
// every plan of a small graph and is what the search is tested against.
// WithinMemory applies a --memory limit.
//
// # Decomposed operators
//
// Decompose runs batch_norm_train as its statistics and normalisation
// (batch_mean, batch_var, batch_norm, running_average) before the
// training graph is derived, so that the batch can be split: the
// statistics are sums whose partial sums combine (docs/partition.md).
//
// The execution graph of a plan is built by the sub-package execution.
package partition
