// Package generate discovers rewrite rules, TASO style (Jia's thesis,
// §2.3.2): it enumerates every graph of up to MaxOps operators drawn from
// TASO's operator set over a few input tensors with symbolic shapes,
// evaluates each with the reference interpreter on random integer inputs
// (the shape symbols set to small distinct extents), pairs the graphs with
// equal fingerprints (output shape and values), prunes the pairs that
// rename the inputs of another pair or only differ inside a common
// context, and verifies the rest with rewrite/smt. What is proved, or
// bounded as far as the rule's constants need, is written as a TDL rules
// file.
package generate

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"runtime"
	"sort"
	"strings"
	"time"

	"tofuc/analysis/check"
	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/rewrite/smt"
	"tofuc/runtime/interp"
	"tofuc/runtime/tensor"
)

// Options tunes a generation run.
type Options struct {
	MaxOps int     // operators per graph (TASO: 4; default 3)
	Worlds []World // default: Dense and Conv
	Seed   uint64
	Verify smt.Options
	// Stage, when set, is told each stage's counts as the stage ends.
	Stage func(st *Stats, stage string)
	// Progress, when set, is told how many candidates of the total are
	// verified, as verification goes (the longest stage).
	Progress func(done, total int)
}

// Stats counts each stage, TASO's Table 2.3 style.
type Stats struct {
	Graphs                            int // distinct single-output graphs enumerated
	Fingerprints                      int // distinct fingerprints among them
	Candidates                        int // pairs of graphs with equal fingerprints
	AfterRenaming                     int // left after dropping renamings of other pairs
	AfterCommon                       int // left after dropping pairs that differ only inside a common context
	Proved, Bounded, Refuted, Unknown int
	Enumerate, Prune, Verify          time.Duration
}

// Result is a generation run's rules and counts.
type Result struct {
	Stats Stats
	// Rules are the rules an optimiser may use (smt.Result.Usable):
	// proved, or bounded as far as their constants need.
	Rules []Rule
}

// Rule is one verified rule.
type Rule struct {
	Text    string // TDL, a comment with its level first
	Checked *check.Rule
	Verdict smt.Result
}

// node is one tensor of an enumerated graph: an input or an operator's
// output.
type node struct {
	text   string // TDL expression
	op     *Op    // nil for an input
	args   []*node
	shape  []lang.Dim
	dtype  lang.DType
	weight bool
	vals   []*tensor.Tensor // on each test input set, while the enumeration needs them
	fp     uint64           // the fingerprint of vals
	input  *Input
}

// graph is a recorded single-output graph.
type graph struct {
	world *World
	out   *node
	fp    uint64
	vars  []*Input // inputs used, in world order
}

// Generate runs the enumeration, pruning and verification.
func Generate(prog *check.Program, opts Options) (*Result, error) {
	if opts.MaxOps == 0 {
		opts.MaxOps = 3
	}
	if opts.Worlds == nil {
		opts.Worlds = []World{Dense(), Conv()}
	}
	res := &Result{}
	t0 := time.Now()
	var pairs [][2]*graph
	for wi, w := range opts.Worlds {
		e := &enumerator{prog: prog, world: w, rng: rand.New(rand.NewPCG(opts.Seed, uint64(wi))), seen: map[string]*graph{}, insts: map[string]*ir.Instance{}}
		if err := e.run(opts.MaxOps); err != nil {
			return nil, err
		}
		res.Stats.Graphs += len(e.seen)
		byFP := map[uint64][]*graph{}
		for _, g := range e.sorted() {
			byFP[g.fp] = append(byFP[g.fp], g)
		}
		res.Stats.Fingerprints += len(byFP)
		fps := make([]uint64, 0, len(byFP))
		for fp := range byFP {
			fps = append(fps, fp)
		}
		sort.Slice(fps, func(i, j int) bool { return byFP[fps[i]][0].out.text < byFP[fps[j]][0].out.text })
		for _, fp := range fps {
			gs := byFP[fp]
			for i := range gs {
				for j := i + 1; j < len(gs); j++ {
					pairs = append(pairs, [2]*graph{gs[i], gs[j]})
				}
			}
		}
	}
	res.Stats.Candidates = len(pairs)
	res.Stats.Enumerate = time.Since(t0)
	stage := func(name string) {
		if opts.Stage != nil {
			opts.Stage(&res.Stats, name)
		}
	}
	stage("enumerate")

	t1 := time.Now()
	pairs = dropRenamings(pairs)
	res.Stats.AfterRenaming = len(pairs)
	pairs = dropCommon(pairs)
	res.Stats.AfterCommon = len(pairs)
	res.Stats.Prune = time.Since(t1)
	stage("prune")

	t2 := time.Now()
	rules, err := verifyPairs(prog, pairs, opts, &res.Stats)
	res.Stats.Verify = time.Since(t2)
	res.Rules = rules
	if err == nil {
		stage("verify")
	}
	return res, err
}

type enumerator struct {
	prog  *check.Program
	world World
	rng   *rand.Rand
	seen  map[string]*graph // by the output's text
	insts map[string]*ir.Instance
}

func (e *enumerator) sorted() []*graph {
	out := make([]*graph, 0, len(e.seen))
	for _, g := range e.seen {
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].out.text < out[j].out.text })
	return out
}

// run enumerates graphs depth first: each step adds one operator whose
// arguments are inputs or outputs of earlier operators (TASO's Algorithm
// 1), skipping an operator that repeats one already in the graph. The
// inputs alone are graphs too (of no operator), so that x == f(x) is
// found. Each graph is enumerated in one order of its operators: an
// operator that does not read the previous one's output must come after
// it in text order (the greedy topological order by text, which every
// graph has), and a state with more unread outputs than the operators
// left can join is not extended.
func (e *enumerator) run(maxOps int) error {
	var nodes []*node
	for _, in := range e.world.Inputs {
		n := &node{text: in.Name, shape: in.shape(), dtype: lang.F32, weight: in.Weight, input: in}
		for set := range testSets {
			n.vals = append(n.vals, e.random(in, set))
		}
		nodes = append(nodes, n)
		n.fp = fingerprint(n)
		e.seen[n.text] = &graph{world: &e.world, out: n, fp: n.fp, vars: []*Input{in}}
	}
	var dfs func(nodes []*node, ops int) error
	dfs = func(nodes []*node, ops int) error {
		if ops > 0 {
			e.record(nodes, ops)
		}
		if ops == maxOps || dangling(nodes, ops) > maxOps-ops+1 {
			return nil
		}
		texts := map[string]bool{}
		for _, n := range nodes {
			texts[n.text] = true
		}
		var last *node
		if ops > 0 {
			last = nodes[len(nodes)-1]
		}
		for _, op := range e.world.Ops {
			for _, args := range argTuples(nodes, op) {
				if !op.accepts(args) {
					continue
				}
				n, err := e.apply(op, args)
				if err != nil {
					return err
				}
				if n == nil || texts[n.text] || last != nil && !reads(n, last) && n.text < last.text {
					continue
				}
				if err := dfs(append(nodes[:len(nodes):len(nodes)], n), ops+1); err != nil {
					return err
				}
				n.vals = nil // only the fingerprint is needed from now on
			}
		}
		return nil
	}
	return dfs(nodes, 0)
}

// dangling counts the operator outputs no other operator reads: a graph
// with one output needs all but one of them consumed, and each operator
// added consumes at most one more than it makes.
func dangling(nodes []*node, ops int) int {
	used := map[*node]bool{}
	for _, n := range nodes[len(nodes)-ops:] {
		for _, a := range n.args {
			used[a] = true
		}
	}
	k := 0
	for _, n := range nodes[len(nodes)-ops:] {
		if !used[n] {
			k++
		}
	}
	return k
}

func reads(n, m *node) bool {
	for _, a := range n.args {
		if a == m {
			return true
		}
	}
	return false
}

// argTuples lists the argument tuples for op: ordered, or unordered
// without repetition for a commutative operator.
func argTuples(nodes []*node, op *Op) [][]*node {
	var out [][]*node
	switch op.Arity {
	case 1:
		for _, a := range nodes {
			out = append(out, []*node{a})
		}
	case 2:
		for i, a := range nodes {
			for j, b := range nodes {
				if op.Commutative && j <= i {
					continue
				}
				out = append(out, []*node{a, b})
			}
		}
	}
	return out
}

// record keeps the graph ending at the last operator when every other
// operator's output is used (one output).
func (e *enumerator) record(nodes []*node, ops int) {
	last := nodes[len(nodes)-1]
	used := map[*node]bool{}
	for _, n := range nodes[len(nodes)-ops:] {
		for _, a := range n.args {
			used[a] = true
		}
	}
	for _, n := range nodes[len(nodes)-ops : len(nodes)-1] {
		if !used[n] {
			return
		}
	}
	if _, ok := e.seen[last.text]; ok {
		return
	}
	g := &graph{world: &e.world, out: last, fp: last.fp}
	vars := map[*Input]bool{}
	var walk func(n *node)
	walk = func(n *node) {
		if n.input != nil {
			vars[n.input] = true
		}
		for _, a := range n.args {
			walk(a)
		}
	}
	walk(last)
	for _, in := range e.world.Inputs {
		if vars[in] {
			g.vars = append(g.vars, in)
		}
	}
	e.seen[last.text] = g
}

// apply instantiates op on args (nil when the shapes do not fit) and
// evaluates it.
func (e *enumerator) apply(op *Op, args []*node) (*node, error) {
	types := make([]check.TensorType, len(args))
	texts := make([]string, len(args))
	key := op.Name
	for i, a := range args {
		types[i] = check.TensorType{DType: a.dtype, Shape: a.shape}
		texts[i] = a.text
		key += "|" + lang.ShapeString(a.shape)
	}
	inst, ok := e.insts[key]
	if !ok {
		decl := e.prog.StdOps()[op.Op]
		if decl == nil {
			return nil, fmt.Errorf("no operator %s", op.Op)
		}
		inst, _ = e.prog.Instantiate(decl, op.Attrs, types, lang.Pos{})
		e.insts[key] = inst
	}
	if inst == nil || len(inst.Outputs) != 1 {
		return nil, nil
	}
	for _, d := range inst.Outputs[0].Tensor.Shape {
		if c, err := d.Eval(e.world.Extents); err != nil || c < 1 {
			return nil, nil // empty at the test extents (a valid convolution of a small image)
		}
	}
	var outs []*tensor.Tensor
	for set := range testSets {
		vals := make([]*tensor.Tensor, len(args))
		for i, a := range args {
			vals[i] = a.vals[set]
		}
		out, err := interp.EvalInstance(inst, vals, e.world.Extents)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op.Name, err)
		}
		outs = append(outs, out[0])
	}
	weight := true
	for _, a := range args {
		weight = weight && a.weight
	}
	n := &node{text: op.format(texts), op: op, args: args, shape: inst.Outputs[0].Tensor.Shape, dtype: inst.Outputs[0].Tensor.DType,
		weight: weight, vals: outs}
	n.fp = fingerprint(n)
	return n, nil
}

// testSets is how many input sets each graph is evaluated on.
const testSets = 2

// random fills an input with nonzero integers in [-9, 9], so that every
// graph is evaluated exactly in float32 (TASO fingerprints on integers
// too); a scalar is positive in the first set and negative in the second,
// so that relu of it is the identity in one set only.
func (e *enumerator) random(in *Input, set int) *tensor.Tensor {
	shape := make([]int, len(in.Shape))
	for i, d := range in.Shape {
		shape[i] = int(e.world.extent(d))
	}
	t := tensor.New(lang.F32, shape)
	for i := range t.Len() {
		v := float64(e.rng.IntN(9) + 1)
		if len(shape) > 0 && e.rng.IntN(2) == 0 || len(shape) == 0 && set == 1 {
			v = -v
		}
		t.SetFlat(i, v)
	}
	return t
}

// fingerprint hashes the output's symbolic shape and values on every test
// set.
func fingerprint(n *node) uint64 {
	h := fnv.New64a()
	h.Write([]byte(lang.ShapeString(n.shape)))
	var buf [8]byte
	for _, val := range n.vals {
		for i := range val.Len() {
			bits := math.Float64bits(val.Flat(i))
			for k := range buf {
				buf[k] = byte(bits >> (8 * k))
			}
			h.Write(buf[:])
		}
	}
	return h.Sum64()
}

// dropRenamings keeps one pair of each class of pairs equal up to a
// renaming of the inputs (among inputs of one shape) and the order of the
// sides.
func dropRenamings(pairs [][2]*graph) [][2]*graph {
	seen := map[string]bool{}
	var out [][2]*graph
	for _, p := range pairs {
		k := canonicalPair(p)
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, p)
	}
	return out
}

func canonicalPair(p [2]*graph) string {
	best := ""
	for _, order := range [][2]*node{{p[0].out, p[1].out}, {p[1].out, p[0].out}} {
		ren := firstAppearance(order, p[0].world)
		s := rename(order[0], ren) + " == " + rename(order[1], ren)
		if best == "" || s < best {
			best = s
		}
	}
	return best
}

// firstAppearance renames the inputs of each class (same shape and kind)
// in the order they first appear in the sides to the class's inputs in
// world order.
func firstAppearance(sides [2]*node, w *World) map[*Input]*Input {
	class := func(in *Input) string { return strings.Join(in.Shape, ",") + fmt.Sprint(in.Weight) }
	next := map[string]int{}
	ren := map[*Input]*Input{}
	var walk func(n *node)
	walk = func(n *node) {
		if in := n.input; in != nil {
			if _, ok := ren[in]; !ok {
				k := class(in)
				var members []*Input
				for _, x := range w.Inputs {
					if class(x) == k {
						members = append(members, x)
					}
				}
				ren[in] = members[next[k]]
				next[k]++
			}
			return
		}
		for _, a := range n.args {
			walk(a)
		}
	}
	walk(sides[0])
	walk(sides[1])
	return ren
}

// rename prints n with its inputs renamed.
func rename(n *node, ren map[*Input]*Input) string {
	if n.input != nil {
		if r, ok := ren[n.input]; ok {
			return r.Name
		}
		return n.input.Name
	}
	args := make([]string, len(n.args))
	for i, a := range n.args {
		args[i] = rename(a, ren)
	}
	return n.op.format(args)
}

// dropCommon drops the pairs whose sides share a subgraph (an operator
// output computed the same way on both sides), which are instances of a
// smaller substitution with that subgraph as an input, and the pairs
// whose sides apply one operator to arguments that are pairwise equal or
// themselves equivalent (a smaller substitution inside a context).
func dropCommon(pairs [][2]*graph) [][2]*graph {
	var out [][2]*graph
	for _, p := range pairs {
		if sharesSubgraph(p[0].out, p[1].out) || inContext(p[0].out, p[1].out) {
			continue
		}
		out = append(out, p)
	}
	return out
}

func subgraphs(n *node, out map[string]bool) {
	if n.op == nil {
		return
	}
	out[n.text] = true
	for _, a := range n.args {
		subgraphs(a, out)
	}
}

func sharesSubgraph(a, b *node) bool {
	sa, sb := map[string]bool{}, map[string]bool{}
	subgraphs(a, sa)
	subgraphs(b, sb)
	for s := range sa {
		if sb[s] {
			return true
		}
	}
	return false
}

func inContext(a, b *node) bool {
	if a.op == nil || b.op == nil || a.op != b.op {
		return false
	}
	for i := range a.args {
		if a.args[i].text != b.args[i].text && a.args[i].fp != b.args[i].fp {
			return false
		}
	}
	return true
}

// verifyBatch rules are verified at a time, in parallel.
const verifyBatch = 32

// verifyPairs writes the pairs as TDL rules, verifies them in parallel
// and returns the usable ones.
func verifyPairs(prog *check.Program, pairs [][2]*graph, opts Options, st *Stats) ([]Rule, error) {
	var src strings.Builder
	var lines []string
	for i, p := range pairs {
		line := ruleText(fmt.Sprintf("gen_%04d", i+1), p)
		lines = append(lines, line)
		src.WriteString(line + "\n")
	}
	if len(pairs) == 0 {
		return nil, nil
	}
	m, err := prog.LoadSource(fmt.Sprintf("generated_%p.tdl", &pairs), []byte(src.String()))
	if err != nil {
		return nil, fmt.Errorf("generated rules: %w", err)
	}
	var rules []*check.Rule
	var kept []string
	for i, d := range m.File.Rules {
		r, err := m.Rule(d.Name)
		if err != nil {
			return nil, fmt.Errorf("generated rule %s: %w", lines[i], err)
		}
		rules = append(rules, r)
		kept = append(kept, lines[i])
	}
	var results []smt.Result
	for start := 0; start < len(rules); start += verifyBatch {
		results = append(results, smt.VerifyAll(rules[start:min(start+verifyBatch, len(rules))], opts.Verify)...)
		runtime.GC() // the solver's memory is released by finalizers
		if opts.Progress != nil {
			opts.Progress(len(results), len(rules))
		}
	}
	var out []Rule
	for i, res := range results {
		switch res.Status {
		case smt.Proved:
			st.Proved++
		case smt.Bounded:
			st.Bounded++
		case smt.Refuted:
			st.Refuted++
		default:
			st.Unknown++
		}
		if res.Usable() {
			out = append(out, Rule{Text: fmt.Sprintf("// %s (%s)\n%s", res.Status, res.Level(), kept[i]), Checked: rules[i], Verdict: res})
		}
	}
	return out, nil
}

// ruleText prints a pair as `rule NAME(vars): lhs == rhs`, the inputs in
// world order with their symbolic shapes.
func ruleText(name string, p [2]*graph) string {
	used := map[*Input]bool{}
	for _, g := range p {
		for _, v := range g.vars {
			used[v] = true
		}
	}
	var all []*Input
	for _, g := range p {
		for _, v := range g.vars {
			if used[v] {
				all = append(all, v)
				used[v] = false
			}
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].order < all[j].order })
	vars := make([]string, len(all))
	for i, v := range all {
		vars[i] = v.Name + ": [" + strings.Join(v.Shape, ", ") + "]"
	}
	return fmt.Sprintf("rule %s(%s): %s == %s", name, strings.Join(vars, ", "), p[0].out.text, p[1].out.text)
}
