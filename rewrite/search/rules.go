package search

import (
	"tofuc/analysis/check"
	"tofuc/lang"
	"tofuc/lang/ir"
)

// Rule is a verified rule used in one direction: matches of Src are
// replaced by Dst.
type Rule struct {
	Name     string
	Src, Dst *ir.Graph
	Vars     []*ir.Value
	// checked is the rule as elaborated, verified (once per rule, both
	// directions) before a match of it is first used.
	checked *check.Rule
	// tmpl is set for a rule with attributes (a template): Src and Dst are
	// its default instance, used only to find sites; each match binds the
	// attributes and uses the instance at those values.
	tmpl *template
	// sibling is set when Src is concat(L, R) and L and R share a
	// variable: L and R may also be matched at two graph values that are
	// not concatenated (see siblingSites). paths lead from the producers
	// of L and R to that variable (input indices, node by node).
	sibling bool
	paths   [2][]int
	// srcProd maps each value of Src to its producer, and top is the
	// node computing Src's result (see withRoot).
	srcProd map[*ir.Value]*ir.Node
	top     *ir.Node
}

// template is what binding a rule's attributes from a match needs: the
// rule, which side is the source, the source side's calls by position
// (the graph nodes carry the positions of the calls that made them).
type template struct {
	rule    *check.Rule
	reverse bool
	calls   map[lang.Pos]*lang.Call
	attrs   map[string]bool
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
			side     lang.Expr
			reverse  bool
		}{{r.Decl.Name, r.LHS, r.RHS, r.Decl.LHS, false}, {r.Decl.Name + "~", r.RHS, r.LHS, r.Decl.RHS, true}} {
			if len(dir.src.Nodes) == 0 || !usesAll(dir.src, r.Inputs) {
				continue
			}
			d := (&Rule{Name: dir.name, Src: dir.src, Dst: dir.dst, Vars: r.Inputs, checked: r}).withRoot()
			if len(r.Decl.Attrs) > 0 && r.Module != nil {
				t := &template{rule: r, reverse: dir.reverse, calls: map[lang.Pos]*lang.Call{}, attrs: map[string]bool{}}
				for _, a := range r.Decl.Attrs {
					t.attrs[a.Name] = true
				}
				collectCalls(dir.side, t.calls)
				d.tmpl = t
			}
			d.paths, d.sibling = siblingPattern(d)
			out = append(out, d)
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

// root is the node computing the source side's result.
func (r *Rule) root() *ir.Node { return r.top }

// withRoot sets r's producers and root from its source side, once for
// the matches of r, and returns r.
func (r *Rule) withRoot() *Rule {
	r.srcProd = producers(r.Src)
	r.top = r.srcProd[r.Src.Outputs[0]]
	return r
}

// siblingPattern reports whether r's source is concat(L, R) with L and R
// computed by nodes of the pattern that read a common variable, and the
// paths from those nodes to it.
func siblingPattern(r *Rule) ([2][]int, bool) {
	var paths [2][]int
	root := r.root()
	if root == nil || root.Inst.Op != "concat" || len(root.Inputs) != 2 {
		return paths, false
	}
	prod := r.srcProd
	a, b := prod[root.Inputs[0]], prod[root.Inputs[1]]
	if a == nil || b == nil {
		return paths, false
	}
	left, right := varPaths(a, prod), varPaths(b, prod)
	for _, v := range r.Vars {
		pa, okA := left[v]
		pb, okB := right[v]
		if okA && okB {
			return [2][]int{pa, pb}, true
		}
	}
	return paths, false
}

// varPaths maps each variable that node n reads (directly or through
// other pattern nodes) to the first path of input indices reaching it.
func varPaths(n *ir.Node, prod map[*ir.Value]*ir.Node) map[*ir.Value][]int {
	out := map[*ir.Value][]int{}
	var walk func(n *ir.Node, path []int)
	walk = func(n *ir.Node, path []int) {
		for i, v := range n.Inputs {
			p := append(append([]int(nil), path...), i)
			if pn := prod[v]; pn != nil {
				walk(pn, p)
			} else if _, seen := out[v]; !seen && v.Const == nil {
				out[v] = p
			}
		}
	}
	walk(n, nil)
	return out
}

// follow walks path from graph node n; nil when a step has no producer.
func follow(n *ir.Node, path []int, prod map[*ir.Value]*ir.Node) *ir.Value {
	for i, k := range path {
		if n == nil || k >= len(n.Inputs) {
			return nil
		}
		if i == len(path)-1 {
			return n.Inputs[k]
		}
		n = prod[n.Inputs[k]]
	}
	return nil
}

// collectCalls maps the position of every call in e to the call.
func collectCalls(e lang.Expr, out map[lang.Pos]*lang.Call) {
	switch e := e.(type) {
	case *lang.Call:
		out[e.Pos] = e
		for _, a := range e.Args {
			collectCalls(a, out)
		}
	case *lang.Binary:
		collectCalls(e.L, out)
		collectCalls(e.R, out)
	case *lang.Unary:
		collectCalls(e.X, out)
	case *lang.Paren:
		collectCalls(e.X, out)
	}
}
