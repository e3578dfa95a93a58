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
	inst  *instances
}

// site is one way to apply a rule: the rule (an instance, for a
// template), the match, and the graph values it replaces with the target
// side's result (one, or two for siblings, which get slices of it).
type site struct {
	rule  *Rule
	m     *match
	roots []*ir.Value
	axis  int // for siblings: the concatenation axis
}

// apply returns a copy of g with the site rewritten, the nodes it makes
// after g's, not tidied (see Optimizer.score); nil when the target cannot
// be built.
func (rw *rewriter) apply(g *ir.Graph, s site, pos lang.Pos) *ir.Graph {
	r := s.rule
	out := clone(g)
	vals := map[*ir.Value]*ir.Value{}
	for _, v := range r.Vars {
		if gv, ok := s.m.vals[v]; ok {
			vals[v] = gv
		}
	}
	for _, n := range r.Dst.Nodes {
		node, err := rw.instantiate(n, vals, pos)
		if err != nil {
			return nil
		}
		out.Nodes = append(out.Nodes, node)
	}
	result, ok := vals[r.Dst.Outputs[0]]
	if !ok {
		return nil
	}
	if len(s.roots) == 1 {
		replaceUses(out, s.roots[0], result)
	} else {
		start := int64(0)
		for _, old := range s.roots {
			ext, _ := old.Shape[s.axis].IsConst()
			attrs := map[string]ir.AttrValue{
				"starts": ir.IntList(start), "ends": ir.IntList(start + ext), "axes": ir.IntList(int64(s.axis)),
			}
			node, err := rw.node("slice", attrs, []*ir.Value{result}, pos)
			if err != nil {
				return nil
			}
			out.Nodes = append(out.Nodes, node)
			replaceUses(out, old, node.Outputs[0])
			start += ext
		}
	}
	return out
}

// instantiate builds the graph node for rule node n, its inputs looked up
// in vals (constants copied), and records its outputs there.
func (rw *rewriter) instantiate(n *ir.Node, vals map[*ir.Value]*ir.Value, pos lang.Pos) (*ir.Node, error) {
	inputs := make([]*ir.Value, len(n.Inputs))
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
	}
	attrs := map[string]ir.AttrValue{}
	for _, a := range n.Inst.Attrs {
		attrs[a.Name] = a.Value
	}
	node, err := rw.node(n.Inst.Op, attrs, inputs, pos)
	if err != nil {
		return nil, err
	}
	for i, v := range node.Outputs {
		vals[n.Outputs[i]] = v
	}
	return node, nil
}

// node instantiates operator op at attrs on inputs, with fresh names.
func (rw *rewriter) node(op string, attrs map[string]ir.AttrValue, inputs []*ir.Value, pos lang.Pos) (*ir.Node, error) {
	decl := rw.prog.StdOps()[op]
	if decl == nil {
		return nil, fmt.Errorf("no operator %s", op)
	}
	types := make([]check.TensorType, len(inputs))
	for i, v := range inputs {
		types[i] = check.TensorType{DType: v.DType, Shape: v.Shape}
	}
	inst, err := rw.prog.Instantiate(decl, attrs, types, pos)
	if err != nil {
		return nil, err
	}
	rw.fresh++
	node := &ir.Node{Name: fmt.Sprintf("rw%d.%s", rw.fresh, op), Inst: inst, Inputs: inputs, Pos: pos}
	for i, d := range inst.Outputs {
		node.Outputs = append(node.Outputs, &ir.Value{Name: fmt.Sprintf("rw%d.%d", rw.fresh, i), DType: d.Tensor.DType, Shape: d.Tensor.Shape})
	}
	return node, nil
}

// sites lists the matches of r rooted at n, given first, r's match at n
// (firstMatches): exact for a rule, verified before its first use; loose
// for a template, whose attributes it binds, the verified instance then
// matching exactly.
func (rw *rewriter) sites(r *Rule, n *ir.Node, first *match, prod map[*ir.Value]*ir.Node) []site {
	if r.tmpl == nil {
		if rw.inst.verified(r) {
			return []site{{rule: r, m: first, roots: []*ir.Value{n.Outputs[0]}}}
		}
		return nil
	}
	inst := rw.inst.bind(r, first)
	if inst == nil {
		return nil
	}
	if m := matchAt(inst, n, prod, false); m != nil {
		return []site{{rule: inst, m: m, roots: []*ir.Value{n.Outputs[0]}}}
	}
	return nil
}

// ruleMatch is a rule's match at a node.
type ruleMatch struct {
	r *Rule
	m *match
}

// firstMatches lists, for each node of g not in outside, the rules
// rooted at its operator that match there, in rule order: exactly, or
// loosely for a template. Matching reads the graph and the rules only,
// so it runs on every core.
func firstMatches(g *ir.Graph, rules []*Rule, outside map[string]bool, prod map[*ir.Value]*ir.Node) [][]ruleMatch {
	out := make([][]ruleMatch, len(g.Nodes))
	parallel(len(g.Nodes), func(i int) {
		n := g.Nodes[i]
		if outside[n.Name] {
			return
		}
		for _, r := range rules {
			if root := r.root(); root == nil || root.Inst.Op != n.Inst.Op {
				continue
			}
			if m := matchAt(r, n, prod, r.tmpl != nil); m != nil {
				out[i] = append(out[i], ruleMatch{r, m})
			}
		}
	})
	return out
}

// siblingSites lists the matches of a concat-rooted rule at two graph
// nodes a (the left operand) and b that are not concatenated: the target
// side computes concat(a, b), and a and b become slices of it. That is
// sound by the rule and the split lemmas slice(concat(x, y)) == x, y at
// the matched extents, which are verified too.
func (rw *rewriter) siblingSites(r *Rule, a, b *ir.Node, prod map[*ir.Value]*ir.Node) []site {
	inst := r
	if r.tmpl != nil {
		loose := matchPair(r, a, b, prod, true)
		if loose == nil {
			return nil
		}
		if inst = rw.inst.bind(r, loose); inst == nil {
			return nil
		}
	}
	m := matchPair(inst, a, b, prod, false)
	if m == nil || r.tmpl == nil && !rw.inst.verified(r) {
		return nil
	}
	root := inst.root()
	axis, ok := attrNamed(root.Inst.Attrs, "axis")
	rank := len(root.Outputs[0].Shape)
	if !ok || axis.Kind != ir.AttrInt {
		return nil
	}
	ax := int(axis.Int)
	if ax < 0 {
		ax += rank
	}
	ka, okA := a.Outputs[0].Shape[ax].IsConst()
	kb, okB := b.Outputs[0].Shape[ax].IsConst()
	if !okA || !okB || !rw.inst.splitLemma(rank, ax, ka, kb) {
		return nil
	}
	return []site{{rule: inst, m: m, roots: []*ir.Value{a.Outputs[0], b.Outputs[0]}, axis: ax}}
}

// candidates lists every graph one rewrite away from g, not tidied, with
// the rule applied, the site and the nodes the rewrite made, for matches
// with no node in outside (nodes made by rewrites are never outside) and,
// with near not nil, a node in near.
func (rw *rewriter) candidates(g *ir.Graph, rules []*Rule, outside, near map[string]bool) []candidate {
	prod := producers(g)
	var out []candidate
	add := func(s site, at string, pos lang.Pos) {
		if touches(s.m, outside) || near != nil && !touches(s.m, near) {
			return
		}
		if ng := rw.apply(g, s, pos); ng != nil {
			var made []string
			for _, n := range ng.Nodes[len(g.Nodes):] {
				made = append(made, n.Name)
			}
			out = append(out, candidate{g: ng, rule: s.rule.Name, site: at, made: made})
		}
	}
	for i, matches := range firstMatches(g, rules, outside, prod) {
		n := g.Nodes[i]
		for _, rm := range matches {
			for _, s := range rw.sites(rm.r, n, rm.m, prod) {
				add(s, n.Name, n.Pos)
			}
		}
	}
	for _, r := range rules {
		if !r.sibling {
			continue
		}
		root := r.root()
		opA, opB := r.srcProd[root.Inputs[0]].Inst.Op, r.srcProd[root.Inputs[1]].Inst.Op
		// pairs must reach one graph value along the paths to the shared
		// variable
		byShared := map[*ir.Value][]*ir.Node{}
		for _, b := range g.Nodes {
			if !outside[b.Name] && b.Inst.Op == opB {
				if v := follow(b, r.paths[1], prod); v != nil {
					byShared[v] = append(byShared[v], b)
				}
			}
		}
		for _, a := range g.Nodes {
			if outside[a.Name] || a.Inst.Op != opA {
				continue
			}
			v := follow(a, r.paths[0], prod)
			for _, b := range byShared[v] {
				if b == a || v == nil {
					continue
				}
				for _, s := range rw.siblingSites(r, a, b, prod) {
					add(s, a.Name+"+"+b.Name, a.Pos)
				}
			}
		}
	}
	return out
}

// touches reports whether match m includes a node named in names.
func touches(m *match, names map[string]bool) bool {
	for _, n := range m.nodes {
		if names[n.Name] {
			return true
		}
	}
	return false
}

// candidate is a graph reached by one rewrite, with the names of the
// nodes the rewrite made.
type candidate struct {
	g          *ir.Graph
	rule, site string
	made       []string
}
