package smt

import (
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/aclements/go-z3/z3"

	"tofuc/analysis/check"
	"tofuc/lang"
	"tofuc/runtime/tensor"
)

// Status is the outcome of verifying a rule.
type Status string

// Statuses, from strongest to weakest.
const (
	Proved  Status = "proved"  // equal for every shape
	Bounded Status = "bounded" // equal for every shape symbol in 1..Bound
	Refuted Status = "refuted" // a counterexample the interpreter confirms
	Unknown Status = "unknown" // the solver gave up, or the rule is beyond the encoding
)

// Result is the verdict on one rule.
type Result struct {
	Rule   string
	Status Status
	Bound  int // for Bounded (and a refutation found while bounding): N
	Shapes int // how many shape assignments were checked
	Time   time.Duration
	Reason string          // why, for Unknown; the unmatched term when not Proved
	Cex    *Counterexample // for Refuted
}

// Level says how far a verdict reaches, as the CLI prints it.
func (r Result) Level() string {
	switch r.Status {
	case Proved:
		return "all shapes"
	case Bounded:
		return fmt.Sprintf("shapes 1..%d", r.Bound)
	}
	return "-"
}

// Options tunes verification.
type Options struct {
	Timeout   time.Duration // per solver call; 0 means 10s
	MaxShapes int           // shape assignments a bounded check may try; 0 means 128
}

func (o Options) timeout() time.Duration {
	if o.Timeout == 0 {
		return 10 * time.Second
	}
	return o.Timeout
}

func (o Options) maxShapes() int {
	if o.MaxShapes == 0 {
		return 128
	}
	return o.MaxShapes
}

// errSolver marks a solver that gave up.
var errSolver = errors.New("solver gave up")

// Verify proves, bounds or refutes one checked rule.
func Verify(r *check.Rule, opts Options) Result {
	start := time.Now()
	res := verify(r, opts)
	res.Rule = r.Decl.Name
	res.Time = time.Since(start)
	return res
}

func verify(r *check.Rule, opts Options) Result {
	for _, in := range r.Inputs {
		if !in.DType.IsFloat() {
			return Result{Status: Unknown, Reason: "input " + in.Name + " is not a float tensor"}
		}
	}
	out := r.LHS.Outputs[0]
	l := newLowerer(r.LHS, r.RHS)
	idx := outputVars(len(out.Shape))
	lhs, err := l.value(out, idx)
	if err != nil {
		return Result{Status: Unknown, Reason: err.Error()}
	}
	rhs, err := l.value(r.RHS.Outputs[0], idx)
	if err != nil {
		return Result{Status: Unknown, Reason: err.Error()}
	}
	cfg := z3.NewContextConfig()
	cfg.SetUint("timeout", uint(opts.timeout().Milliseconds()))
	ctx := z3.NewContext(cfg)
	e := newEnc(ctx)
	p := &prover{e: e, ctx: shapeContext(e, r, out.Shape, idx)}
	ok, reason, err := p.zero(lhs.sub(rhs))
	if err == nil && ok {
		return Result{Status: Proved}
	}
	b := &bounder{rule: r, ctx: ctx, lhs: lhs, rhs: rhs, out: out.Shape, opts: opts}
	res := b.run()
	if res.Status == Bounded && reason != "" {
		res.Reason = "not proved for all shapes: no match for " + reason
	}
	return res
}

// symbols lists the shape symbols of the rule's inputs, sorted.
func symbols(r *check.Rule) []string {
	set := map[string]bool{}
	for _, in := range r.Inputs {
		for _, d := range in.Shape {
			for _, s := range d.Symbols() {
				set[s] = true
			}
		}
	}
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// shapeContext assumes every shape symbol and input extent positive and
// every output index inside the output's shape.
func shapeContext(e *enc, r *check.Rule, shape []lang.Dim, idx []lin) z3.Bool {
	out := e.ctx.FromBool(true)
	for _, s := range symbols(r) {
		out = out.And(e.name(s).GE(e.int(1)))
	}
	for _, in := range r.Inputs {
		for _, d := range in.Shape {
			out = out.And(e.lin(dimLin(d)).GE(e.int(1)))
		}
	}
	for i, x := range idx {
		v := e.lin(x)
		out = out.And(v.GE(e.int(0)), v.LT(e.lin(dimLin(shape[i]))))
	}
	return out
}

// Counterexample is a concrete case where the sides differ, as the
// interpreter computed it.
type Counterexample struct {
	Shape    map[string]int64
	Inputs   map[string]*tensor.Tensor
	LHS, RHS *tensor.Tensor
	Where    string // the first differing element, or the side that failed
}
