package partition

import (
	"fmt"
	"math"
	"runtime/debug"
	"slices"
	"time"

	"tofuc/analysis/cost"
	"tofuc/lang/ir"
	"tofuc/runtime/plan"
)

// Options tune a search.
type Options struct {
	// Factors are the workers per recursion step, non-increasing, with
	// the number of devices as their product; nil: Factorise's.
	Factors []int
	// Memory is the limit per device in bytes; 0: unlimited.
	Memory int64
	// Progress, when not nil, is told when each part of the search
	// starts: each recursion step of Search, each of SearchTime's
	// searches.
	Progress func(part, parts int)
	// TableLimit bounds the tables of the elimination; beyond it a step
	// is solved by local search and block descent and the result says so.
	// 0: DefaultTableLimit.
	TableLimit int64
	// Objective is what Run minimises: Bytes, or Time ("" too), simulated
	// on Topology (nil: DefaultTopology of the devices); with Time, RefineTime takes
	// MCMCSteps proposals (0: DefaultMCMCSteps) drawn from Seed.
	Objective string
	Topology  *cost.Topology
	MCMCSteps int
	Seed      uint64
	// weighting weighs bytes for the time objective (SearchTime).
	weighting weighting
}

// DefaultTableLimit is the largest elimination table (entries) built.
const DefaultTableLimit = 1 << 18

// Result is a searched plan with its cost.
type Result struct {
	Plan    *cost.Plan
	Cost    *cost.Cost
	Seconds float64 // the search alone, wall clock
	Steps   []StepStats
	// Exact is false when some step exceeded the table limit and was
	// solved by local search and block descent instead of elimination.
	Exact bool
	// Memory says how a memory limit shaped the plan ("" when it did
	// not: the unconstrained plan).
	Memory string
	// Chosen names the plan Choose kept: "search" or a baseline.
	Chosen string
	// Weighting says how the search weighed bytes ("" alike), and
	// Candidates how many searches SearchTime chose it from (0: one).
	Weighting  string
	Candidates int
	// Sim is the plan's simulated step (Simulate), nil until simulated.
	Sim *cost.Simulation
}

// StepStats describe how one step was solved.
type StepStats struct {
	K         int
	Variables int
	Factors   int
	Largest   int64  // the largest elimination table
	Method    string // "elimination" or "block descent (table limit)"
	Bytes     int64  // the step's bytes, as the search priced it
}

// Factorise splits n devices into its prime factors, largest first (8 is
// 2·2·2, 12 is 3·2·2): the recursion of Tofu §3.5.2.
func Factorise(n int) []int {
	var out []int
	for p := 2; p*p <= n; p++ {
		for n%p == 0 {
			out = append(out, p)
			n /= p
		}
	}
	if n > 1 {
		out = append(out, n)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// CheckFactors validates a factorisation of devices.
func CheckFactors(factors []int, devices int) error {
	prod := 1
	for i, k := range factors {
		if k < 2 {
			return fmt.Errorf("factor %d: every factor must be at least 2", k)
		}
		if i > 0 && k > factors[i-1] {
			return fmt.Errorf("factors %v: each factor must be at most the one before", factors)
		}
		if prod > math.MaxInt/k {
			return fmt.Errorf("factors %v multiply to far more than %d devices", factors, devices)
		}
		prod *= k
	}
	if prod != devices {
		return fmt.Errorf("factors %v multiply to %d, not %d devices", factors, prod, devices)
	}
	return nil
}

// Search finds the plan with the least communication over devices
// (Tofu's recursive DP over the coarsened graph, see the package comment)
// that fits in Options.Memory per device (searchMemory).
func Search(g *cost.Graph, devices int, opt Options) (*Result, error) {
	start := time.Now()
	// The search builds and drops many short-lived tables: collecting
	// less often saves a fifth to a third of its time for a few times
	// the live heap (docs/partition.md).
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	roots(g) // in parallel: Coarsen would analyse them one by one
	c := Coarsen(g)
	res, err := recursive(g, c, devices, opt, space{ok: allowAll, weighting: opt.weighting}, opt.eliminator(), true)
	if err == nil && opt.Memory > 0 && res.Cost.Memory.Peak > opt.Memory {
		res, err = searchMemory(g, c, devices, opt, res)
	}
	if err != nil {
		return nil, err
	}
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

// solveStep picks an assignment (domain indices) for one step.
type solveStep func(s *step) ([]int, StepStats)

// eliminator solves a step exactly by variable elimination (without the
// constant factors when it would exceed the table limit with them) or,
// beyond the table limit, by local search from the data-parallel, AllRow-Greedy
// and Spartan assignments (the baselines' choices at this step), keeping
// the best, then block descent from it; either works on the problem with
// dominated values pruned, which has the same minimum. The steps of one
// search share the number of hubs block descent chose.
func (opt Options) eliminator() solveStep {
	limit := opt.TableLimit
	if limit == 0 {
		limit = DefaultTableLimit
	}
	hubs := 0
	return func(s *step) ([]int, StepStats) {
		r := prune(s.domains(), s.factors)
		st := StepStats{Method: "elimination"}
		sv := newSolver(r.dom, s.positions(), r.factors)
		if sv.run(limit) {
			st.Largest = sv.Largest
			return r.up(sv.solution()), st
		}
		// Without the constant factors the same minimum may be in reach.
		// They stay where the elimination fits with them: the order
		// decides among equal minima, and a step's choice among them
		// decides the later steps' costs.
		// (Pruning is the same without them: a constant factor never
		// makes one value cost more than another.)
		if vf := varying(r.factors); len(vf) < len(r.factors) {
			vs := newSolver(r.dom, s.positions(), vf)
			if vs.run(limit) {
				st.Largest = vs.Largest
				return r.up(vs.solution()), st
			}
		}
		st.Method, st.Largest = "block descent (table limit)", sv.Largest
		starts := [][]int{s.dataParallel(), s.allRow(), s.spartan()}
		parallel(len(starts), func(i int) { starts[i] = localSearch(r.dom, r.factors, r.down(starts[i])) })
		var a []int
		for _, b := range starts {
			if a == nil || total(r.dom, r.factors, b) < total(r.dom, r.factors, a) {
				a = b
			}
		}
		// Block descent's blocks are kept well under the table limit: its
		// tables are built twice a round, and small blocks (more hubs)
		// lose little (docs/partition.md).
		a, largest := blockDescent(r.dom, s.positions(), len(s.tdom), r.factors, a, limit/blockShare, &hubs)
		st.Largest = max(st.Largest, largest)
		return r.up(a), st
	}
}

// varying drops the factors over several variables that are the same
// for every assignment: they add a constant to every total, so the
// minimum is the same without them, and they join variables that do
// not interact (a backward operator takes every input of its forward
// operator; those it does not read cost nothing under any layout, and
// batch_norm's backward operators would otherwise tie each layer's
// statistics, bias and activations into tables past the limit).
func varying(factors []*factor) []*factor {
	out := factors[:0:0]
	for _, f := range factors {
		if len(f.vars) < 2 || slices.ContainsFunc(f.table, func(b int64) bool { return b != f.table[0] }) {
			out = append(out, f)
		}
	}
	return out
}

// blockShare divides the table limit for block descent's blocks.
const blockShare = 64

// recursive runs a per-step solver over the factors.
// MaxDevices bounds the devices of a search: its time grows with them
// (Wide ResNet-152-10's training graph over 1024 devices takes 52 s on 2
// cores, over 4096 devices its forward graph alone 77 s), and Tofu's
// setting is one machine of 8 GPUs. Plans are bounded alike.
const MaxDevices = plan.MaxDevices

func recursive(g *cost.Graph, c *Coarse, devices int, opt Options, sp space, solve solveStep, refineOps bool) (*Result, error) {
	factors := factorsOf(devices, opt)
	if devices < 2 || devices > MaxDevices {
		return nil, fmt.Errorf("partitioning needs 2 to %d devices, not %d", MaxDevices, devices)
	}
	if err := CheckFactors(factors, devices); err != nil {
		return nil, err
	}
	if err := g.CheckScale(devices); err != nil {
		return nil, err
	}
	p := cost.NewPlan(factors)
	res := &Result{Plan: p, Exact: true}
	views := roots(g)
	groups := int64(1)
	carried := map[*ir.Value]int64{} // each tensor's bytes moved at the steps before
	for i, k := range factors {
		if opt.Progress != nil {
			opt.Progress(i+1, len(factors))
		}
		s, err := newStep(g, c, p, views, i, groups, sp, carried)
		if err != nil {
			return nil, err
		}
		assign, st := solve(s)
		st.K, st.Variables, st.Factors = k, len(s.domains()), len(s.factors)
		res.Exact = res.Exact && st.Method == "elimination"
		res.Steps = append(res.Steps, st)
		s.carry(assign, carried)
		if views, err = s.apply(p, i, assign); err != nil {
			return nil, err
		}
		groups *= int64(k)
	}
	if refineOps {
		if err := refine(g, p, sp.ok); err != nil {
			return nil, err
		}
	}
	cst, err := g.Evaluate(p)
	if err != nil {
		return nil, err
	}
	res.Cost = cst
	for i := range res.Steps {
		res.Steps[i].Bytes = cst.StepBytes[i]
	}
	return res, nil
}

// roots are the nodes' views at the first step, analysed in parallel.
func roots(g *cost.Graph) []*cost.View {
	out := make([]*cost.View, len(g.IR.Nodes))
	parallel(len(out), func(j int) { out[j] = g.Root(g.IR.Nodes[j]) })
	return out
}

// localSearch improves an assignment one variable at a time (iterated
// conditional modes) until no single change lowers the total.
func localSearch(dom []int, factors []*factor, assign []int) []int {
	byVar := make([][]*factor, len(dom))
	for _, f := range factors {
		for _, v := range f.vars {
			byVar[v] = append(byVar[v], f)
		}
	}
	for changed := true; changed; {
		changed = false
		for v := range dom {
			orig := assign[v]
			best, arg := total(dom, byVar[v], assign), orig
			for x := range dom[v] {
				assign[v] = x
				if c := total(dom, byVar[v], assign); c < best {
					best, arg = c, x
				}
			}
			changed = changed || arg != orig
			assign[v] = arg
		}
	}
	return assign
}
