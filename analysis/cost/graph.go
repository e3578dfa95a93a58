package cost

import (
	"fmt"
	"math/bits"
	"slices"
	"strings"
	"sync"

	"tofuc/analysis/strategy"
	"tofuc/lang"
	"tofuc/lang/ir"
)

// Graph is a dataflow graph prepared for pricing: concrete shapes, and one
// View per distinct instance, shared by every step and every caller.
// Instances are told apart by their text (operator, attributes, dtypes,
// shapes and lambdas: Instance.String), so the many nodes of a model that
// run the same operator on the same shapes — the convolutions of a Wide
// ResNet's blocks, an RNN's time steps — and the workers' instances
// derived from them are analysed once.
type Graph struct {
	IR     *ir.Graph
	Shapes map[*ir.Value][]int64
	// Index is each node's position in IR.Nodes.
	Index map[*ir.Node]int

	// traffic is the bytes every node reads and writes, summed over the
	// nodes, plus the graph's inputs and parameters: CheckScale bounds
	// every cost by it.
	traffic int64

	// tensors are the graph's tensors, as Tensors lists them.
	tensors []*ir.Value

	// partial marks the tensors that may be held as partial sums.
	partial map[*ir.Value]bool

	lifeOnce sync.Once
	life     *lifetimes

	mu     sync.Mutex
	roots  map[*ir.Instance]*View
	byText map[string]*View
}

// NewGraph prepares g. Every shape must be concrete (bind symbolic
// attributes first); the instances are analysed lazily.
func NewGraph(g *ir.Graph) (*Graph, error) {
	cg := &Graph{IR: g, Shapes: map[*ir.Value][]int64{}, Index: map[*ir.Node]int{},
		roots: map[*ir.Instance]*View{}, byText: map[string]*View{}}
	add := func(v *ir.Value) error {
		if _, ok := cg.Shapes[v]; ok || v.Const != nil {
			return nil
		}
		s, err := concrete(v.Shape)
		if err != nil {
			return fmt.Errorf("tensor %s: %w", v.Name, err)
		}
		cg.Shapes[v] = s
		cg.tensors = append(cg.tensors, v)
		return nil
	}
	for _, v := range g.Inputs {
		if err := add(v); err != nil {
			return nil, err
		}
	}
	for _, p := range g.Params {
		if err := add(p.Value); err != nil {
			return nil, err
		}
	}
	for i, n := range g.Nodes {
		cg.Index[n] = i
		for _, v := range append(append([]*ir.Value(nil), n.Inputs...), n.Outputs...) {
			if err := add(v); err != nil {
				return nil, fmt.Errorf("node %s: %w", n.Name, err)
			}
		}
	}
	if err := cg.sumTraffic(); err != nil {
		return nil, err
	}
	cg.partial = partialGradients(g)
	return cg, nil
}

// partialGradients marks the gradients of parameters and the gradient
// sums over them: a data-parallel plan keeps them as partial sums, each
// worker's over its part of the batch, until the optimizer needs the
// total (one all-reduce per step, not one per use of a shared weight).
// Graph outputs are never partial.
func partialGradients(g *ir.Graph) map[*ir.Value]bool {
	params := map[*ir.Value]bool{}
	for _, p := range g.Params {
		params[p.Value] = true
	}
	outputs := map[*ir.Value]bool{}
	for _, v := range g.Outputs {
		outputs[v] = true
	}
	out := map[*ir.Value]bool{}
	for _, n := range g.Nodes {
		for _, v := range n.Outputs {
			if !v.DType.IsFloat() || outputs[v] {
				continue
			}
			sum := n.Role == "gradient sum"
			for _, in := range n.Inputs {
				sum = sum && out[in]
			}
			out[v] = v.GradOf != nil && params[v.GradOf] || sum
		}
	}
	return out
}

// PartialOK reports whether v may be held as partial sums.
func (g *Graph) PartialOK(v *ir.Value) bool { return g.partial[v] }

// sumTraffic sets g.traffic, or fails when a size or the sum leaves int64.
func (g *Graph) sumTraffic() error {
	add := func(v *ir.Value) bool {
		if v.Const != nil {
			return true
		}
		n, ok := lang.ShapeBytes(v.DType, v.Shape)
		if ok {
			g.traffic, ok = lang.AddInt64(g.traffic, n)
		}
		return ok
	}
	for _, v := range g.IR.Inputs {
		if !add(v) {
			return fmt.Errorf("input %s: its size leaves 64-bit integers", v.Name)
		}
	}
	for _, p := range g.IR.Params {
		if !add(p.Value) {
			return fmt.Errorf("parameter %s: its size leaves 64-bit integers", p.Value.Name)
		}
	}
	for _, n := range g.IR.Nodes {
		for _, v := range append(append([]*ir.Value(nil), n.Inputs...), n.Outputs...) {
			if !add(v) {
				return fmt.Errorf("the tensors the operators read and write add up to more than 2^63 bytes (at node %s)", n.Name)
			}
		}
	}
	return nil
}

// CheckScale fails when pricing the graph over devices could leave int64:
// a worker fetches or stores at most twice its operator's tensors (a
// reduce-scatter), so a step moves at most 2 * devices * traffic bytes,
// and there are at most log2(devices) steps. Search, the baselines and
// Evaluate check it first, so no cost they compute wraps.
func (g *Graph) CheckScale(devices int) error {
	bound, ok := lang.MulInt64(g.traffic, 2*int64(devices))
	if ok {
		bound, ok = lang.MulInt64(bound, int64(bits.Len(uint(devices))))
	}
	if !ok {
		return fmt.Errorf("the model is too large to price over %d devices: its operators read and write %.3g bytes, so the communication could exceed 2^63 bytes", devices, float64(g.traffic))
	}
	return nil
}

func concrete(shape []lang.Dim) ([]int64, error) {
	out := make([]int64, len(shape))
	for i, d := range shape {
		n, ok := d.IsConst()
		if !ok {
			syms := d.Symbols()
			return nil, fmt.Errorf("shape %s is symbolic: bind %s with --set %s=VALUE", lang.ShapeString(shape), strings.Join(syms, ", "), syms[0])
		}
		out[i] = n
	}
	return out, nil
}

// Tensors lists the graph's tensors (constants aside) in a fixed order:
// inputs, parameters, then node outputs in node order.
func (g *Graph) Tensors() []*ir.Value { return slices.Clone(g.tensors) }

// Bytes is the size of a whole tensor.
func (g *Graph) Bytes(v *ir.Value) int64 { return volume(g.Shapes[v]) * elemSize(v.DType) }

// ElemSize is the bytes of one element of v.
func ElemSize(v *ir.Value) int64 { return elemSize(v.DType) }

// Root is the view of a node at the first step: its own instance. It is
// safe to call from several goroutines.
func (g *Graph) Root(n *ir.Node) *View {
	g.mu.Lock()
	v, ok := g.roots[n.Inst]
	g.mu.Unlock()
	if ok {
		return v
	}
	v = g.view(n.Inst)
	g.mu.Lock()
	g.roots[n.Inst] = v
	g.mu.Unlock()
	return v
}

// view is the analysed view of an instance, shared by every instance with
// the same text; the analysis runs once, outside the graph's lock, so
// distinct instances are analysed in parallel.
func (g *Graph) view(inst *ir.Instance) *View {
	key := inst.String()
	g.mu.Lock()
	v, ok := g.byText[key]
	if !ok {
		v = &View{Inst: inst, g: g, steps: map[int]*StepCost{}, subs: map[subKey]*View{}}
		g.byText[key] = v
	}
	g.mu.Unlock()
	v.once.Do(v.analyse)
	return v
}

func elemSize(t lang.DType) int64 { return int64(max(1, t.Size())) }

func volume(shape []int64) int64 {
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	return n
}

// Choice is an operator's choice at one step: an index into its view's
// Analysis.Strategies, Replicate or Accumulate.
type Choice int

const (
	// Replicate runs the operator whole on every worker of the step.
	Replicate Choice = -1
	// Accumulate runs a linear operator whole on every worker, on its
	// partial sums of the inputs: the outputs are partial sums (a
	// gradient sum of partial gradients costs nothing until the sum is
	// needed).
	Accumulate Choice = -2
)

// View is an operator instance as the workers of one step see it: the
// node's instance at the first step, afterwards the instance of the
// representative worker of the step before (the one with the largest
// part), whose inputs are the regions it reads.
type View struct {
	Inst *ir.Instance
	// Analysis is nil when the strategy analysis failed (Err says why):
	// the operator can then only be replicated.
	Analysis  *strategy.Analysis
	Err       error
	InShapes  [][]int64
	OutShapes [][]int64
	reads     []bool // per input: some lambda reads its elements

	g     *Graph
	once  sync.Once // the analysis
	mu    sync.Mutex
	steps map[int]*StepCost
	subs  map[subKey]*View

	kernelOnce sync.Once // the roofline's reading of the instance
	kernel     kernelSize
}

type subKey struct {
	c Choice
	k int
}

// analyse fills the shapes and the strategy analysis.
func (v *View) analyse() {
	inst := v.Inst
	for _, t := range inst.Inputs {
		s, _ := concrete(t.Shape)
		v.InShapes = append(v.InShapes, s)
	}
	for _, d := range inst.Outputs {
		s, _ := concrete(d.Tensor.Shape)
		v.OutShapes = append(v.OutShapes, s)
	}
	v.reads = reads(inst)
	v.Analysis, v.Err = strategy.Analyse(inst)
}

// Reads reports, per input, whether a lambda of the view reads its
// elements (an input used only for its shape is not read).
func (v *View) Reads() []bool { return v.reads }

// reads marks the inputs some lambda of inst accesses.
func reads(inst *ir.Instance) []bool {
	at := map[*ir.Tensor]int{}
	for i, t := range inst.Inputs {
		at[t] = i
	}
	out := make([]bool, len(inst.Inputs))
	mark := func(t *ir.Tensor) {
		if i, ok := at[t]; ok {
			out[i] = true
		}
	}
	for _, d := range append(append([]*ir.Def(nil), inst.Locals...), inst.Outputs...) {
		ir.Walk(d.Body, func(e ir.Expr) bool {
			switch x := e.(type) {
			case *ir.Access:
				mark(x.T)
			case *ir.Opaque:
				for _, a := range x.Args {
					mark(a.T)
				}
			}
			return true
		})
	}
	return out
}

// Strategies is the number of strategies (choices other than Replicate).
func (v *View) Strategies() int {
	if v.Analysis == nil {
		return 0
	}
	return len(v.Analysis.Strategies)
}

// Name says a choice in words: "split b", "reduce ci (sum)",
// "replicate" or "accumulate".
func (v *View) Name(c Choice) string {
	switch {
	case c == Accumulate:
		return "accumulate"
	case c < 0 || v.Analysis == nil || int(c) >= len(v.Analysis.Strategies):
		return "replicate"
	}
	return v.Analysis.Strategies[c].Words()
}

// Lookup finds a choice by its Name.
func (v *View) Lookup(name string) (Choice, bool) {
	switch {
	case name == "replicate":
		return Replicate, true
	case name == "accumulate" && v.Linear():
		return Accumulate, true
	}
	for c := range v.Strategies() {
		if v.Name(Choice(c)) == name {
			return Choice(c), true
		}
	}
	return 0, false
}

// Sub is the view of the next step after choice c over k workers: the
// representative worker's instance (Replicate and Accumulate keep the
// view). It is safe to call from several goroutines.
func (v *View) Sub(c Choice, k int) (*View, error) {
	if c < 0 {
		return v, nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	key := subKey{c, k}
	if s, ok := v.subs[key]; ok {
		return s, nil
	}
	s := v.Analysis.Strategies[c]
	w, err := v.Analysis.Worker(s, nil, representative(s, k), k)
	if err != nil {
		return nil, fmt.Errorf("%s: worker of %s: %w", v.Inst.Op, v.Name(c), err)
	}
	if w.Inst == nil {
		return nil, fmt.Errorf("%s: %s over %d workers leaves them nothing", v.Inst.Op, v.Name(c), k)
	}
	sub := v.g.view(w.Inst)
	v.subs[key] = sub
	return sub, nil
}

// representative is the worker with the largest part of s's variable.
func representative(s *strategy.Strategy, k int) int {
	n, _ := s.Var.Extent.IsConst()
	best, size := 0, int64(-1)
	for w := range k {
		lo, hi := strategy.Part(n, w, k)
		if hi-lo+1 > size {
			best, size = w, hi-lo+1
		}
	}
	return best
}

// Elementwise reports whether the view's operator reads every input at
// its output's own index (up to broadcasting).
func (v *View) Elementwise() bool { return v.Analysis != nil && v.Analysis.Elementwise }

// Linear reports whether the view's outputs are linear in its inputs
// taken together, so that it can Accumulate partial sums.
func (v *View) Linear() bool { return v.Analysis != nil && v.Analysis.Linear }
