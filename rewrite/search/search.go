package search

import (
	"container/heap"
	"math"
	"runtime"
	"sync"
	"time"

	"tofuc/analysis/check"
	"tofuc/analysis/cost"
	"tofuc/lang/ir"
	"tofuc/rewrite/smt"
)

// Options tunes the search.
type Options struct {
	Alpha     float64     // relaxation: graphs up to Alpha times the best are explored (MetaFlow: 1.05)
	MaxGraphs int         // graphs dequeued per (sub)search; 0 means 300
	Threshold int         // graphs with more operators are split (MetaFlow: 30); 0 means 30
	Device    cost.Device // the roofline profile
	// Progress, when set, is told before each search of a part (1 to
	// parts), and with part = parts+1 before the search around the cuts.
	Progress func(part, parts int)
}

func (o Options) maxGraphs() int {
	if o.MaxGraphs == 0 {
		return 300
	}
	return o.MaxGraphs
}

func (o Options) threshold() int {
	if o.Threshold == 0 {
		return 30
	}
	return o.Threshold
}

// Step is one rewrite on the path to the result.
type Step struct{ Rule, Site string }

// Outcome is what a search found.
type Outcome struct {
	Graph    *ir.Graph
	Before   *cost.Estimate
	After    *cost.Estimate
	Steps    []Step
	Explored int // graphs whose cost was computed
	Time     time.Duration
	Parts    int // subgraphs of the flow-based split
	// Verified lists the rules, rule instances (templates at matched
	// attributes) and split lemmas verified during the search, in order.
	Verified []smt.Result
}

// Optimizer rewrites graphs with verified rules.
type Optimizer struct {
	rules []*Rule
	rw    *rewriter
	opts  Options
	costs map[uint64]float64 // by canonical hash
	est   *cost.Estimator
}

// New makes an optimizer for rules (used in both directions where
// possible); prog instantiates the operators of rewritten graphs.
func New(prog *check.Program, rules []*check.Rule, opts Options) *Optimizer {
	if opts.Alpha == 0 {
		opts.Alpha = 1.05
	}
	if opts.Device.PeakFLOPS == 0 {
		opts.Device = cost.H100
	}
	return &Optimizer{rules: Directions(rules), rw: &rewriter{prog: prog, inst: newInstances(prog)}, opts: opts, costs: map[uint64]float64{}, est: cost.NewEstimator(opts.Device)}
}

// state is a graph in the search with the rewrites that led to it and
// focus: the names of the nodes those rewrites made since the last one
// that advanced (nil when the last one did; see backtrack).
type state struct {
	g     *ir.Graph
	cost  float64
	steps []Step
	focus map[string]bool
}

// cost is g's estimated time, memoized by g's canonical hash h.
func (o *Optimizer) cost(g *ir.Graph, h uint64) float64 {
	if c, ok := o.costs[h]; ok {
		return c
	}
	c := o.estimate(g)
	o.costs[h] = c
	return c
}

// estimate is g's estimated time on the search's device (1e30 when the
// roofline cannot price it).
func (o *Optimizer) estimate(g *ir.Graph) float64 {
	e, err := o.est.Roofline(g)
	if err != nil {
		return 1e30
	}
	return e.Time
}

// scored is a candidate graph not seen before, tidied, with its
// canonical hash and estimated time.
type scored struct {
	candidate
	hash uint64
	cost float64
}

// score drops the candidates whose graph is in seen or reads a cycle,
// marks the others seen, tidies and estimates them, in candidate order.
// A graph is hashed before it is tidied (tidying keeps the hash), so a
// graph seen before is never tidied; hashing, tidying and estimating run
// on every core, with the outcome of one candidate after the other.
func (o *Optimizer) score(cands []candidate, seen map[uint64]bool) []scored {
	hashes := make([]uint64, len(cands))
	acyclic := make([]bool, len(cands))
	parallel(len(cands), func(i int) { hashes[i], acyclic[i] = canonicalHash(cands[i].g) })
	var fresh []scored
	for i, c := range cands {
		if acyclic[i] && !seen[hashes[i]] {
			seen[hashes[i]] = true
			fresh = append(fresh, scored{candidate: c, hash: hashes[i]})
		}
	}
	tidied := make([]bool, len(fresh))
	known := make([]bool, len(fresh))
	parallel(len(fresh), func(i int) {
		s := &fresh[i]
		if tidied[i] = tidy(s.g) == nil; tidied[i] {
			if s.cost, known[i] = o.costs[s.hash]; !known[i] {
				s.cost = o.estimate(s.g)
			}
		}
	})
	out := fresh[:0]
	for i, s := range fresh {
		if tidied[i] {
			if !known[i] {
				o.costs[s.hash] = s.cost
			}
			out = append(out, s)
		}
	}
	return out
}

// parallel runs f(0), ..., f(n-1) on GOMAXPROCS goroutines.
func parallel(n int, f func(i int)) {
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				f(i)
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

// minGain is the least relative improvement that makes a graph the
// optimiser's new best (Exhaustive keeps the cheapest, whatever it saves): rewrites that save less (a cost model's rounding, 53 batch-norm
// folds that the scheduler already fuses) are not worth a graph grown
// several times over.
const minGain = 1e-3

// minAdvance is the least relative gain of a rewrite that is not a
// detour (see backtrack): less is rounding to the search (each of a
// ResNet's batch-norm folds saves a few millionths of its time, which
// the schedule fuses anyway), while two rewrites of a tenth of minGain
// each may still add up to a new best.
const minAdvance = minGain / 10

// growthSlack is how many operators a graph may add to the one a search
// starts from and still be explored without being cheaper than the best:
// rules that add operators at no cost under the roofline (relu of a
// relu, fused away) would otherwise fill the search with ever larger
// copies of one graph (the MLP's 3 kernels explored 1,001 graphs in 8 s
// to find nothing).
const growthSlack = 2

// bounds are what a backtracking search may explore.
type bounds struct {
	outside map[string]bool // names of nodes no match may include
	rest    float64         // the cost of the larger graph's other operators (0: a whole graph)
	alpha   float64         // relaxation, of the larger graph's cost
	gain    float64         // the least gain, of the larger graph's cost, that makes a new best
	limit   int             // graphs dequeued
	slack   int             // operators a graph may add and be explored without being cheaper
	focus   bool            // detours are expanded only next to the nodes they made
}

// backtrack is MetaFlow's Algorithm 1 on g within b: a priority queue by
// cost, every candidate whose larger graph is better than alpha times the
// best so far enqueued (one with more than slack operators beyond g only
// when it is cheaper than the best), graphs seen before skipped
// (canonical hash). The best is the cheapest graph reached by rewrites
// that each gained.
//
// With b.focus, a graph reached by a rewrite that does not advance
// (minAdvance) is a detour (enlarging a 1x1 convolution
// before fusing it with a 3x3 sibling): it is expanded only by rewrites
// near the nodes the detour made (focusNear). Without that, each of a
// ResNet's dozens of neutral rewrites (batch-norm folds, enlargements
// with no sibling to fuse) multiplies the graphs explored: a search spent
// 16,308 graphs on ResNet-50 to find nothing, and finds the same in 845.
func (o *Optimizer) backtrack(g *ir.Graph, b bounds) (state, int) {
	h, _ := canonicalHash(g)
	start := state{g: g, cost: o.cost(g, h)}
	best := start
	q := &queue{start}
	seen := map[uint64]bool{h: true}
	explored := 0
	below := func(a, c, factor float64) bool { return a+b.rest < (c+b.rest)*factor }
	for limit := b.limit; q.Len() > 0 && limit > 0; limit-- {
		s := heap.Pop(q).(state)
		for _, c := range o.score(o.rw.candidates(s.g, o.rules, b.outside, focusNear(s.g, s.focus)), seen) {
			explored++
			n := state{g: c.g, cost: c.cost, steps: append(append([]Step(nil), s.steps...), Step{c.rule, c.site})}
			if b.focus && !below(n.cost, s.cost, 1-minAdvance) {
				n.focus = union(s.focus, c.made)
			}
			cheaper := n.cost < best.cost
			if below(n.cost, best.cost, 1-b.gain) {
				best = n
			}
			if below(n.cost, best.cost, b.alpha) && (len(c.g.Nodes)-len(g.Nodes) <= b.slack || cheaper) {
				heap.Push(q, n)
			}
		}
	}
	return best, explored
}

// union is a new set of the names in set and names.
func union(set map[string]bool, names []string) map[string]bool {
	out := make(map[string]bool, len(set)+len(names))
	for name := range set {
		out[name] = true
	}
	for _, name := range names {
		out[name] = true
	}
	return out
}

// focusHops is how far from the nodes a detour made its next rewrites
// may lie. One hop lost a gain on a generated block (81.05 → 54.04 µs
// where the unfocused search reached 51.04: a chain of detours through
// a bias split, an enlargement and a sibling's fusion) and explored 340
// graphs on ResNet-50; two hops find 51.04 and explore 845.
const focusHops = 2

// focusNear is nil when no node of g is in focus (every match is a
// candidate), else the names of the nodes of g within focusHops of those
// in focus, a hop
// joining nodes that share a value: a producer and its consumers, and
// the consumers of one input (siblings, which a concat rule fuses).
func focusNear(g *ir.Graph, focus map[string]bool) map[string]bool {
	near := around(g, focus, focusHops, true)
	if len(near) == 0 {
		return nil // no focus, or the detour made nothing that tidying kept
	}
	return near
}

// Exhaustive explores every graph reachable from g (up to limit graphs)
// and returns the cheapest, for comparison with the backtracking search.
func (o *Optimizer) Exhaustive(g *ir.Graph, limit int) (*Outcome, error) {
	t0 := time.Now()
	best, n := o.backtrack(g, bounds{alpha: 1e300, limit: limit, slack: math.MaxInt})
	return o.outcome(g, best, n, 1, t0)
}

// Optimize runs the search on g: graphs above the threshold are split at
// minimum vertex cuts, each part searched on its own, then a local search
// at the cuts.
func (o *Optimizer) Optimize(g *ir.Graph) (*Outcome, error) {
	t0 := time.Now()
	orig := g
	g = clone(g) // tidy merges outputs computed alike, which the caller's graph keeps apart
	if err := tidy(g); err != nil {
		return nil, err
	}
	parts := o.split(g)
	o.rw.inst.prefetch(g, o.rules)
	h, _ := canonicalHash(g)
	cur := state{g: g, cost: o.cost(g, h)}
	explored := 0
	progress := func(i int) {
		if o.opts.Progress != nil {
			o.opts.Progress(i, len(parts))
		}
	}
	for i, part := range parts {
		progress(i + 1)
		var n int
		cur, n = o.within(cur, part)
		explored += n
	}
	if len(parts) > 1 {
		progress(len(parts) + 1)
		var n int
		cur, n = o.within(cur, o.cutNeighbourhood(cur.g, parts))
		explored += n
	}
	return o.outcome(orig, cur, explored, len(parts), t0)
}

func (o *Optimizer) outcome(g *ir.Graph, best state, explored, parts int, t0 time.Time) (*Outcome, error) {
	before, err := cost.Roofline(g, o.opts.Device)
	if err != nil {
		return nil, err
	}
	final, err := o.rw.keepOutputNames(g, best.g)
	if err != nil {
		return nil, err
	}
	after, err := cost.Roofline(final, o.opts.Device)
	if err != nil {
		return nil, err
	}
	return &Outcome{Graph: final, Before: before, After: after, Steps: best.steps, Explored: explored, Time: time.Since(t0), Parts: parts,
		Verified: append([]smt.Result(nil), o.rw.inst.Results...)}, nil
}

// queue is a min-heap of states by cost.
type queue []state

func (q queue) Len() int           { return len(q) }
func (q queue) Less(i, j int) bool { return q[i].cost < q[j].cost }
func (q queue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *queue) Push(x any)        { *q = append(*q, x.(state)) }
func (q *queue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}
