package report

import (
	"encoding/json"
	"fmt"
	"os"

	"tofuc/analysis/cost"
	"tofuc/lang/ir"
)

// ToPlan writes a plan by names.
func ToPlan(g *cost.Graph, p *cost.Plan) Plan {
	out := Plan{Factors: p.Factors, Tensors: map[string][]int{}, Ops: map[string][]string{}}
	for _, v := range g.Tensors() {
		out.Tensors[v.Name] = p.Tensors[v]
	}
	for _, n := range g.IR.Nodes {
		out.Ops[n.Name] = Words(g, p, n)
	}
	return out
}

// ReadPlan reads a plan from a report.json (its "plan") or a file that
// holds only the plan object.
func ReadPlan(path string) (Plan, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Plan{}, err
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(data, &doc); err != nil {
		return Plan{}, fmt.Errorf("%s: %w", path, err)
	}
	if nested, ok := doc["plan"]; ok {
		data = nested
	}
	var p Plan
	if err := json.Unmarshal(data, &p); err != nil {
		return Plan{}, fmt.Errorf("%s: plan: %w", path, err)
	}
	if p.Factors == nil {
		return Plan{}, fmt.Errorf("%s: no plan (expected a report.json or an object with factors, tensors and ops)", path)
	}
	return p, nil
}

// FromPlan resolves a plan's names against g: every tensor and operator
// must be there, each choice a strategy of the operator's view at its step.
func FromPlan(g *cost.Graph, in Plan) (*cost.Plan, error) {
	p := cost.NewPlan(in.Factors)
	byName := map[string]*ir.Value{}
	for _, v := range g.Tensors() {
		byName[v.Name] = v
	}
	for name, ds := range in.Tensors {
		v, ok := byName[name]
		if !ok {
			return nil, fmt.Errorf("the plan splits %s, which the graph does not have", name)
		}
		p.Tensors[v] = ds
	}
	nodes := map[string]*ir.Node{}
	for _, n := range g.IR.Nodes {
		nodes[n.Name] = n
	}
	for name, words := range in.Ops {
		n, ok := nodes[name]
		if !ok {
			return nil, fmt.Errorf("the plan has operator %s, which the graph does not have", name)
		}
		if len(words) != len(in.Factors) {
			return nil, fmt.Errorf("operator %s: %d strategies for %d steps", name, len(words), len(in.Factors))
		}
		v := g.Root(n)
		for i, w := range words {
			c, ok := v.Lookup(w)
			if !ok {
				return nil, fmt.Errorf("operator %s has no strategy %q at step %d (it has %s)", name, w, i+1, choiceNames(v))
			}
			p.Ops[n] = append(p.Ops[n], c)
			sub, err := v.Sub(c, in.Factors[i])
			if err != nil {
				return nil, fmt.Errorf("operator %s: %w", name, err)
			}
			v = sub
		}
	}
	return p, g.Validate(p)
}

func choiceNames(v *cost.View) string {
	s := `"replicate"`
	for c := range v.Strategies() {
		s += fmt.Sprintf(", %q", v.Name(cost.Choice(c)))
	}
	return s
}
