package search

import (
	"fmt"

	"tofuc/analysis/check"
	"tofuc/lang"
	"tofuc/lang/ir"
)

// rewriter applies rules to graphs, instantiating the operators of the
// target sides at the matched shapes.
type rewriter struct {
	prog  *check.Program
	fresh int
}

// apply returns a copy of g with the match of r rooted at site replaced by
// r's target side; nil when the target cannot be built or makes a cycle.
func (rw *rewriter) apply(g *ir.Graph, r *Rule, m *match, site *ir.Node) *ir.Graph {
	out := clone(g)
	vals := map[*ir.Value]*ir.Value{}
	for _, v := range r.Vars {
		if gv, ok := m.vals[v]; ok {
			vals[v] = gv
		}
	}
	for _, n := range r.Dst.Nodes {
		node, err := rw.instantiate(n, vals, site.Pos)
		if err != nil {
			return nil
		}
		out.Nodes = append(out.Nodes, node)
	}
	result, ok := vals[r.Dst.Outputs[0]]
	if !ok {
		return nil
	}
	replaceUses(out, site.Outputs[0], result)
	if tidy(out) != nil {
		return nil
	}
	return out
}

func (rw *rewriter) instantiate(n *ir.Node, vals map[*ir.Value]*ir.Value, pos lang.Pos) (*ir.Node, error) {
	decl := rw.prog.StdOps()[n.Inst.Op]
	if decl == nil {
		return nil, fmt.Errorf("no operator %s", n.Inst.Op)
	}
	inputs := make([]*ir.Value, len(n.Inputs))
	types := make([]check.TensorType, len(n.Inputs))
	for i, v := range n.Inputs {
		gv, ok := vals[v]
		if !ok && v.Const != nil {
			c := *v
			gv = &c
			vals[v] = gv
		}
		if gv == nil {
			return nil, fmt.Errorf("unbound value %s", v.Name)
		}
		inputs[i] = gv
		types[i] = check.TensorType{DType: gv.DType, Shape: gv.Shape}
	}
	attrs := map[string]ir.AttrValue{}
	for _, a := range n.Inst.Attrs {
		attrs[a.Name] = a.Value
	}
	inst, err := rw.prog.Instantiate(decl, attrs, types, pos)
	if err != nil {
		return nil, err
	}
	rw.fresh++
	node := &ir.Node{Name: fmt.Sprintf("rw%d.%s", rw.fresh, n.Inst.Op), Inst: inst, Inputs: inputs, Pos: pos}
	for i, d := range inst.Outputs {
		v := &ir.Value{Name: fmt.Sprintf("rw%d.%d", rw.fresh, i), DType: d.Tensor.DType, Shape: d.Tensor.Shape}
		node.Outputs = append(node.Outputs, v)
		vals[n.Outputs[i]] = v
	}
	return node, nil
}

// candidates lists every graph one rewrite away from g, with the rule
// applied and the site, for matches with no node in outside (nodes made
// by rewrites are never outside).
func (rw *rewriter) candidates(g *ir.Graph, rules []*Rule, outside map[string]bool) []candidate {
	prod := producers(g)
	var out []candidate
	for _, n := range g.Nodes {
		if outside[n.Name] {
			continue
		}
		for _, r := range rules {
			if root := r.root(); root == nil || root.Inst.Op != n.Inst.Op {
				continue
			}
			m := matchAt(r, n, prod)
			if m == nil || touches(m, outside) {
				continue
			}
			if ng := rw.apply(g, r, m, n); ng != nil {
				out = append(out, candidate{g: ng, rule: r.Name, site: n.Name})
			}
		}
	}
	return out
}

func touches(m *match, outside map[string]bool) bool {
	for _, n := range m.nodes {
		if outside[n.Name] {
			return true
		}
	}
	return false
}

// candidate is a graph reached by one rewrite.
type candidate struct {
	g          *ir.Graph
	rule, site string
}
