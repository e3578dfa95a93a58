package search

import (
	"tofuc/analysis/check"
	"tofuc/lang/ir"
)

// Rule is a verified rule used in one direction: matches of Src are
// replaced by Dst.
type Rule struct {
	Name     string
	Src, Dst *ir.Graph
	Vars     []*ir.Value
}

// Directions turns checked rules into rewrites: each rule left to right,
// and right to left too when the right side uses every variable (a side
// that drops a variable cannot be rebuilt from the other). Sides that are
// a bare variable are not matched.
func Directions(rules []*check.Rule) []*Rule {
	var out []*Rule
	for _, r := range rules {
		for _, dir := range []struct {
			name     string
			src, dst *ir.Graph
		}{{r.Decl.Name, r.LHS, r.RHS}, {r.Decl.Name + "~", r.RHS, r.LHS}} {
			if len(dir.src.Nodes) == 0 || !usesAll(dir.src, r.Inputs) {
				continue
			}
			out = append(out, &Rule{Name: dir.name, Src: dir.src, Dst: dir.dst, Vars: r.Inputs})
		}
	}
	return out
}

func usesAll(g *ir.Graph, vars []*ir.Value) bool {
	used := map[*ir.Value]bool{}
	for _, n := range g.Nodes {
		for _, v := range n.Inputs {
			used[v] = true
		}
	}
	for _, v := range g.Outputs {
		used[v] = true
	}
	for _, v := range vars {
		if !used[v] {
			return false
		}
	}
	return true
}

// root is the node computing the side's result.
func (r *Rule) root() *ir.Node {
	out := r.Src.Outputs[0]
	for _, n := range r.Src.Nodes {
		for _, v := range n.Outputs {
			if v == out {
				return n
			}
		}
	}
	return nil
}
