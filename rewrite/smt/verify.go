package smt

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/aclements/go-z3/z3"

	"tofuc/analysis/check"
	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/runtime/tensor"
)

// Status is the outcome of verifying a rule.
type Status string

// Statuses, from strongest to weakest.
const (
	Proved  Status = "proved"  // equal for every shape
	Bounded Status = "bounded" // equal for every shape symbol S in 1..Bounds[S]
	Refuted Status = "refuted" // a counterexample the interpreter confirms
	Unknown Status = "unknown" // the solver gave up, or the rule is beyond the encoding
)

// Result is the verdict on one rule.
type Result struct {
	Rule   string
	Status Status
	// Need is the bound each shape symbol must reach for a bounded
	// verdict (docs/rules.md), set whenever the rule could be expanded;
	// Bounds is what a bounded check covered: every shape symbol S from 1
	// to Bounds[S].
	Need, Bounds map[string]int
	Shapes       int // how many shape assignments the bounded check compared
	Time         time.Duration
	Reason       string          // why, for Unknown; the unmatched term when not Proved
	Cex          *Counterexample // for Refuted
}

// Usable reports whether an optimiser may rely on the rule: proved, or
// bounded at least as far as its constants need.
func (r Result) Usable() bool {
	if r.Status == Proved {
		return true
	}
	if r.Status != Bounded {
		return false
	}
	for s, n := range r.Need {
		if r.Bounds[s] < n {
			return false
		}
	}
	return true
}

// Level says how far a verdict reaches, as the CLI prints it: "all
// shapes", or the bound of each shape symbol ("shapes M,N<=2 H<=5").
func (r Result) Level() string {
	switch r.Status {
	case Proved:
		return "all shapes"
	case Bounded:
		return "shapes " + boundsText(r.Bounds)
	}
	return "-"
}

// boundsText groups the symbols by bound, smallest bound first.
func boundsText(bounds map[string]int) string {
	bySize := map[int][]string{}
	var sizes []int
	for s, n := range bounds {
		if bySize[n] == nil {
			sizes = append(sizes, n)
		}
		bySize[n] = append(bySize[n], s)
	}
	sort.Ints(sizes)
	parts := make([]string, len(sizes))
	for i, n := range sizes {
		sort.Strings(bySize[n])
		parts[i] = fmt.Sprintf("%s<=%d", strings.Join(bySize[n], ","), n)
	}
	if len(parts) == 0 {
		return "(none)"
	}
	return strings.Join(parts, " ")
}

// Options tunes verification.
type Options struct {
	Timeout   time.Duration // per rule, every phase included; 0 means 10s
	MaxShapes int           // shape assignments a bounded check may try; 0 means 1024
	// noProbe skips the interpreter runs beyond the bounds, so that tests
	// see what the proof and the bounded check decide alone.
	noProbe bool
}

func (o Options) timeout() time.Duration {
	if o.Timeout == 0 {
		return 10 * time.Second
	}
	return o.Timeout
}

func (o Options) maxShapes() int {
	if o.MaxShapes == 0 {
		return 1024
	}
	return o.MaxShapes
}

// Verify proves, bounds or refutes one checked rule, within opts' timeout.
func Verify(r *check.Rule, opts Options) (res Result) {
	start := time.Now()
	defer func() {
		res.Rule = r.Decl.Name
		res.Time = time.Since(start)
	}()
	defer recoverVerdict(&res, opts.timeout())
	dl := &deadline{at: start.Add(opts.timeout())}
	for _, in := range r.Inputs {
		if !in.DType.IsFloat() {
			return probeOnly(r, opts, dl, &unsupported{"input " + in.Name + " is not a float tensor"})
		}
	}
	v, err := newVerifier(r, opts, start)
	if err != nil {
		return probeOnly(r, opts, dl, err)
	}
	res = v.run()
	res.Need = v.need
	return res
}

// verifier holds one rule's verification: both sides in normal form, the
// conditions under which each fails in the interpreter, the bounds its
// constants need, and a Z3 context.
type verifier struct {
	rule     *check.Rule
	opts     Options
	dl       *deadline
	e        *enc
	lhs, rhs poly
	out      []lang.Dim
	idx      []lin
	syms     []string
	fails    [2][]obligation // of the left and the right side
	need     map[string]int
	defined  z3.Bool // the shapes where both sides run (set by checkDomain)
}

func newVerifier(r *check.Rule, opts Options, start time.Time) (*verifier, error) {
	cfg := z3.NewContextConfig()
	cfg.SetUint("timeout", uint(opts.timeout().Milliseconds()))
	ctx := z3.NewContext(cfg)
	dl := &deadline{at: start.Add(opts.timeout()), ctx: ctx}
	v := &verifier{rule: r, opts: opts, dl: dl, e: newEnc(ctx, dl), out: r.LHS.Outputs[0].Shape, syms: symbols(r)}
	v.idx = outputVars(len(v.out))
	l := newLowerer(dl, r.LHS, r.RHS)
	var err error
	if v.lhs, err = l.value(r.LHS.Outputs[0], v.idx); err != nil {
		return nil, err
	}
	if v.rhs, err = l.value(r.RHS.Outputs[0], v.idx); err != nil {
		return nil, err
	}
	n := newNeeds()
	n.poly(v.lhs)
	n.poly(v.rhs)
	n.dims(v.out, v.idx)
	for _, in := range r.Inputs {
		n.dims(in.Shape, nil)
	}
	for side, graph := range [2]*ir.Graph{r.LHS, r.RHS} {
		if v.fails[side], err = l.obligations(graph); err != nil {
			return nil, err
		}
		for _, o := range v.fails[side] {
			vars := map[string]bool{}
			for _, c := range o.fail {
				n.cond(c)
				c.names(vars)
			}
			n.scope(vars)
		}
	}
	v.need = n.bounds(v.syms)
	return v, nil
}

// run decides the rule: the sides must fail at the same shapes, agree
// in the interpreter beyond the bounds, and then be proved equal for all
// shapes or checked at every shape within the bounds.
func (v *verifier) run() Result {
	if res := v.checkDomain(); res != nil {
		return *res
	}
	if res := v.probe(); res != nil {
		return *res
	}
	var reason string
	if hasInfinity(v.lhs) || hasInfinity(v.rhs) {
		reason = "an infinity or a max/min reduction, which the proof does not model"
	} else {
		p := &prover{e: v.e, ctx: v.defined.And(v.indexRanges()), holdsSomewhere: v.holdsSomewhere}
		ok, unmatched, err := p.zero(v.lhs.sub(v.rhs))
		if err == nil && ok {
			return Result{Status: Proved}
		}
		reason = "no match for " + unmatched
	}
	res := v.bounded()
	if res.Status == Bounded {
		res.Reason = "not proved for all shapes: " + reason
	}
	return res
}

// holdsSomewhere looks for a point where g holds inside the proof's
// context: every shape symbol s in 1..5 (where both sides run and the
// output is not empty), every other name 0 or s - 1.
func (v *verifier) holdsSomewhere(g guard) bool {
	vars := map[string]bool{}
	for _, c := range g {
		c.names(vars)
	}
	for _, x := range v.idx {
		x.names(vars)
	}
	for _, s := range v.syms {
		delete(vars, s)
	}
	for s := int64(1); s <= 5; s++ {
		env := map[string]int64{}
		for _, sym := range v.syms {
			env[sym] = s
		}
		out, ok := positiveShape(v.out, env)
		if _, inputsOK := inputShapes(v.rule, env); !ok || !inputsOK || v.failsAt(env) {
			continue
		}
		for _, x := range []int64{0, s - 1} {
			for n := range vars {
				env[n] = x
			}
			if v.indicesFit(env, out) && g.holdsAt(env) {
				return true
			}
		}
	}
	return false
}

// indicesFit reports whether env's output indices lie inside out.
func (v *verifier) indicesFit(env map[string]int64, out []int) bool {
	for i, x := range v.idx {
		if c := mustEval(x, env); c < 0 || c >= int64(out[i]) {
			return false
		}
	}
	return true
}

// hasInfinity reports whether p holds an infinity or a max/min reduction
// (which is -inf when empty): the proof reasons over the reals, where
// -inf - -inf would be 0.
func hasInfinity(p poly) bool {
	for _, t := range p {
		for _, a := range t.atoms {
			if a.kind == aInf || a.kind == aRed && a.name != "prod" {
				return true
			}
			for _, q := range a.args {
				if hasInfinity(q) {
					return true
				}
			}
		}
	}
	return false
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
	return sortedNames(set)
}

// shapeBase is the rule's shape constraints: every shape symbol and input
// extent at least 1, every symbol below maxExtent.
func (v *verifier) shapeBase() z3.Bool {
	e := v.e
	out := e.ctx.FromBool(true)
	for _, s := range v.syms {
		out = out.And(e.name(s).GE(e.int(1)), e.name(s).LT(e.int(maxExtent)))
	}
	for _, in := range v.rule.Inputs {
		for _, d := range in.Shape {
			out = out.And(e.lin(dimLin(d)).GE(e.int(1)))
		}
	}
	return out
}

// indexRanges puts every output index inside the output's shape.
func (v *verifier) indexRanges() z3.Bool {
	out := v.e.ctx.FromBool(true)
	for i, x := range v.idx {
		out = out.And(v.e.guard(guard{}.inRange(x, dimLin(v.out[i]))))
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
