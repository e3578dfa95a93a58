package report

import (
	"fmt"
	"sort"
	"strings"
	"tofuc/lang"

	"tofuc/analysis/cost"
	"tofuc/analysis/partition"
	"tofuc/lang/ir"
)

// Input is what the partition report is built from.
type Input struct {
	Model, File string
	Train       bool
	Graph       *cost.Graph
	Coarse      *partition.Coarse
	Outcome     *partition.Outcome
	MemoryLimit int64
	// Checked is the plan read with --strategy from CheckedFile, or nil.
	Checked     *partition.Result
	CheckedFile string
}

// Partition builds the report of a partition search.
func Partition(in *Input) *Report {
	o := in.Outcome
	best := o.Best
	r := &Report{Version: Version, Model: in.Model, File: in.File, Train: in.Train,
		Devices: best.Plan.Devices(), Factors: best.Plan.Factors, SearchSeconds: best.Seconds,
		CommBytes: best.Cost.CommBytes, MaxMemoryBytes: best.Cost.Memory.Peak, StepSeconds: best.Sim.Seconds,
		MemoryLimit: in.MemoryLimit, Objective: o.Objective, Topology: o.Topology, Chosen: best.Chosen,
		Exact: best.Exact, Method: method(o), Bound: bound(o), Search: summary(o.Searched),
		Baselines: map[string]int64{}, BaselineDetails: map[string]BaselineDetail{}, MemoryTradeOff: []TradeOffRow{},
		Sections: []Section{}}
	if in.MemoryLimit > 0 && best.Cost.Memory.Peak > in.MemoryLimit {
		r.OverLimitBytes = best.Cost.Memory.Peak - in.MemoryLimit
	}
	for _, s := range best.Steps {
		r.Steps = append(r.Steps, Step{Workers: s.K, Bytes: s.Bytes, Method: s.Method, Variables: s.Variables, LargestTable: s.Largest})
	}
	for _, name := range partition.Baselines {
		b := o.Baselines[name]
		if b == nil {
			continue
		}
		r.Baselines[name] = b.Cost.CommBytes
		d := BaselineDetail{CommBytes: b.Cost.CommBytes, MaxMemoryBytes: b.Cost.Memory.Peak, StepSeconds: b.Sim.Seconds,
			Seconds: b.Seconds, OverMemory: in.MemoryLimit > 0 && b.Cost.Memory.Peak > in.MemoryLimit}
		if b.Cost.CommBytes > 0 {
			d.Ratio = float64(best.Cost.CommBytes) / float64(b.Cost.CommBytes)
		}
		if b.Sim.Seconds > 0 {
			d.TimeRatio = best.Sim.Seconds / b.Sim.Seconds
		}
		r.BaselineDetails[name] = d
	}
	for _, row := range o.TradeOff {
		t := TradeOffRow{LimitBytes: row.Limit}
		if p := row.Result; p != nil {
			t.Plan, t.CommBytes, t.MaxMemoryBytes, t.StepSeconds = planName(p), p.Cost.CommBytes, p.Cost.Memory.Peak, p.Sim.Seconds
		}
		r.MemoryTradeOff = append(r.MemoryTradeOff, t)
	}
	if m := o.MCMC; m != nil {
		r.MCMC = &MCMC{Seed: m.Seed, Steps: m.Steps, Accepted: m.Accepted, BeforeSeconds: m.Before, AfterSeconds: m.After}
	}
	r.Ops = ops(in.Graph, in.Coarse, best)
	r.Tensors = tensors(in.Graph, best.Plan)
	r.Contributors = contributors(in.Graph, best)
	r.Plan = ToPlan(in.Graph, best.Plan)
	if in.Checked != nil {
		r.Checked = checked(in)
	}
	return r
}

// summary is a plan's figures.
func summary(p *partition.Result) PlanSummary {
	return PlanSummary{CommBytes: p.Cost.CommBytes, MaxMemoryBytes: p.Cost.Memory.Peak, StepSeconds: p.Sim.Seconds,
		Exact: p.Exact, Method: searchMethod(p), Memory: p.Memory}
}

// planName says where a trade-off row's plan comes from.
func planName(p *partition.Result) string {
	switch {
	case p.Chosen != "":
		return "chosen plan"
	case p.Memory != "":
		return p.Memory
	}
	return "unconstrained search"
}

// method says how the chosen plan was found.
func method(o *partition.Outcome) string {
	s := searchMethod(o.Searched)
	in := "in bytes per step"
	if o.Objective == partition.Time {
		in = "in simulated step time"
	}
	if o.Best.Chosen != "search" {
		s += fmt.Sprintf("; the %s baseline's plan, operators refined, was better %s and was chosen", o.Best.Chosen, in)
	} else {
		s += "; its plan was at least as good as every baseline's " + in
	}
	if o.MCMC != nil {
		s += fmt.Sprintf("; MCMC refinement of the step time (%d proposals, seed %d, %d accepted)", o.MCMC.Steps, o.MCMC.Seed, o.MCMC.Accepted)
	}
	return s
}

// bound says what the method guarantees.
func bound(o *partition.Outcome) string {
	what := "communicates at most what every baseline plan does"
	if o.Objective == partition.Time {
		what = "takes at most the simulated step time of every baseline plan"
	}
	s := "the chosen plan " + what + " that fits the memory limit (it is the best of the search's plan and theirs)"
	if o.Searched.Exact {
		s += "; each recursion step of the search is an exact minimum of that step's cost, its bytes as weighed (variable elimination)"
	} else {
		s += "; steps beyond the table limit start from the data_parallel, allrow_greedy and spartan choices at that step (the best after local search kept) and block descent only improves on it"
	}
	if o.MCMC != nil {
		s += "; the MCMC refinement keeps the fastest plan it sees, never slower than its start"
	}
	return s
}

func searchMethod(r *partition.Result) string {
	s := "recursive elimination over the coarsened graph (exact at every step)"
	if !r.Exact {
		s = "recursive elimination; some steps exceeded the table limit and were solved by local search from the data_parallel, allrow_greedy and spartan choices and block descent (not proved optimal)"
	}
	if r.Memory != "" {
		s += "; within the memory limit: " + r.Memory
	}
	if r.Candidates > 1 {
		s += fmt.Sprintf("; the fastest in simulated step time of %d searches (recursions, and byte weightings on a training graph): steps %s", r.Candidates, joinInts(r.Plan.Factors, " x "))
		if r.Weighting != "" {
			s += ", " + r.Weighting
		} else {
			s += ", every byte alike"
		}
	}
	return s
}

// Words says the choices of a node at every step, through its views.
func Words(g *cost.Graph, p *cost.Plan, n *ir.Node) []string {
	v := g.Root(n)
	var out []string
	for i, c := range p.Ops[n] {
		out = append(out, v.Name(c))
		sub, err := v.Sub(c, p.Factors[i])
		if err != nil {
			break
		}
		v = sub
	}
	return out
}

func ops(g *cost.Graph, c *partition.Coarse, best *partition.Result) []Op {
	var out []Op
	for j, n := range g.IR.Nodes {
		role := n.Role
		if role == "" {
			role = "forward"
		}
		o := Op{Name: n.Name, Op: n.Inst.Op, Role: role, File: n.Pos.File, Line: n.Pos.Line, Origin: origin(n), Group: c.Group[j],
			Strategy: Words(g, best.Plan, n), Bytes: best.Cost.OpBytes[j], Inputs: []string{}, Outputs: []string{}}
		for _, v := range n.Inputs {
			o.Inputs = append(o.Inputs, valueString(g, v))
		}
		for _, v := range n.Outputs {
			o.Outputs = append(o.Outputs, valueString(g, v))
		}
		out = append(out, o)
	}
	return out
}

func valueString(g *cost.Graph, v *ir.Value) string {
	if v.Const != nil {
		return v.Name
	}
	return fmt.Sprintf("%s %s%v", v.Name, v.DType, g.Shapes[v])
}

func tensors(g *cost.Graph, p *cost.Plan) []Tensor {
	kinds := map[*ir.Value]string{}
	for _, v := range g.IR.Inputs {
		kinds[v] = "input"
	}
	for _, pr := range g.IR.Params {
		kinds[pr.Value] = "parameter"
	}
	var out []Tensor
	for _, v := range g.Tensors() {
		kind := kinds[v]
		switch {
		case kind != "":
		case v.GradOf != nil:
			kind = "gradient"
		default:
			kind = "activation"
		}
		t := Tensor{Name: v.Name, Kind: kind, DType: v.DType.String(), Shape: g.Shapes[v], Splits: p.Tensors[v],
			Tile: cost.TileShape(g.Shapes[v], p.Tensors[v], p.Factors), Bytes: g.Bytes(v), Repeat: 1}
		if n := len(out); n > 0 && foldable(out, t) {
			first := n - 1
			for first > 0 && out[first].Repeat == 0 {
				first--
			}
			out[first].Repeat++
			t.Repeat = 0
		}
		out = append(out, t)
	}
	return out
}

// foldable reports whether t repeats the last folded run of out.
func foldable(out []Tensor, t Tensor) bool {
	last := out[len(out)-1]
	return last.Kind == t.Kind && fmt.Sprint(last.Shape, last.Splits) == fmt.Sprint(t.Shape, t.Splits)
}

// contributors lists the ten operators communicating most, with why.
func contributors(g *cost.Graph, best *partition.Result) []Contributor {
	idx := make([]int, len(g.IR.Nodes))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return best.Cost.OpBytes[idx[a]] > best.Cost.OpBytes[idx[b]] })
	var out []Contributor
	for _, j := range idx[:min(10, len(idx))] {
		b := best.Cost.OpBytes[j]
		if b == 0 {
			break
		}
		n := g.IR.Nodes[j]
		out = append(out, Contributor{Op: n.Name, Bytes: b, Share: float64(b) / float64(max(1, best.Cost.CommBytes)), Why: why(g, best.Plan, n)})
	}
	return out
}

// why compares, at each step, the chosen strategy with the operator's
// cheapest alternative given the same tensor splits.
func why(g *cost.Graph, p *cost.Plan, n *ir.Node) string {
	v := g.Root(n)
	groups := int64(1)
	var parts []string
	for i, k := range p.Factors {
		pl := p.Placement(n, i)
		sc := v.Step(k)
		chosen := p.Ops[n][i]
		mine, _ := sc.Bytes(chosen, pl)
		mine *= groups
		alt, altName := int64(-1), ""
		for c := cost.Accumulate; int(c) < v.Strategies(); c++ {
			if c == chosen || c == cost.Replicate && v.Strategies() > 0 || c == cost.Accumulate && !v.Linear() {
				continue
			}
			if b, ok := sc.Bytes(c, pl); ok && (alt < 0 || groups*b < alt) {
				alt, altName = groups*b, v.Name(c)
			}
		}
		if mine > 0 {
			s := fmt.Sprintf("step %d: %s costs %s", i+1, v.Name(chosen), lang.FormatBytes(mine))
			if alt >= 0 {
				s += fmt.Sprintf(" (%s would cost %s with the same tensor splits", altName, lang.FormatBytes(alt))
				s += "; changing the splits moves the cost to neighbouring operators)"
			} else {
				s += " (no other strategy)"
			}
			parts = append(parts, s)
		}
		sub, err := v.Sub(chosen, k)
		if err != nil {
			break
		}
		v, groups = sub, groups*int64(k)
	}
	return strings.Join(parts, "; ")
}

func checked(in *Input) *Checked {
	c := &Checked{File: in.CheckedFile, CommBytes: in.Checked.Cost.CommBytes, MaxMemoryBytes: in.Checked.Cost.Memory.Peak,
		OptimumBytes: in.Outcome.Best.Cost.CommBytes, Worse: []Contributor{}}
	type diff struct {
		j int
		d int64
	}
	var ds []diff
	for j := range in.Graph.IR.Nodes {
		if d := in.Checked.Cost.OpBytes[j] - in.Outcome.Best.Cost.OpBytes[j]; d > 0 {
			ds = append(ds, diff{j, d})
		}
	}
	sort.SliceStable(ds, func(a, b int) bool { return ds[a].d > ds[b].d })
	for _, d := range ds[:min(10, len(ds))] {
		n := in.Graph.IR.Nodes[d.j]
		c.Worse = append(c.Worse, Contributor{Op: n.Name, Bytes: d.d,
			Why: fmt.Sprintf("yours: %s; optimum: %s", strings.Join(Words(in.Graph, in.Checked.Plan, n), " | "), strings.Join(Words(in.Graph, in.Outcome.Best.Plan, n), " | "))})
	}
	return c
}

// origin is the imported node n converts, or that its forward node
// does (a backward node's), "" for TDL source.
func origin(n *ir.Node) string {
	if n.Origin == "" && n.Forward != nil {
		return n.Forward.Origin
	}
	return n.Origin
}
