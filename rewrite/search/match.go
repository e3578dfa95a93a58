package search

import (
	"tofuc/lang"
	"tofuc/lang/ir"
)

// match is a mapping of a rule's source side onto graph nodes.
type match struct {
	vals  map[*ir.Value]*ir.Value // rule values (variables included) to graph values
	nodes map[*ir.Node]*ir.Node   // rule nodes to graph nodes
	syms  map[string]lang.Dim     // the rule's shape symbols
	dims  [][2][]lang.Dim         // variable shapes left to compare after binding
}

// matchAt tries to map rule r's source onto the graph with its root at n.
func matchAt(r *Rule, n *ir.Node, prod map[*ir.Value]*ir.Node) *match {
	m := &match{vals: map[*ir.Value]*ir.Value{}, nodes: map[*ir.Node]*ir.Node{}, syms: map[string]lang.Dim{}}
	root := r.root()
	if root == nil || len(n.Outputs) != len(root.Outputs) {
		return nil
	}
	if !m.node(root, n, prod, r) || !m.shapesAgree() {
		return nil
	}
	return m
}

func (m *match) node(p, g *ir.Node, prod map[*ir.Value]*ir.Node, r *Rule) bool {
	if prev, ok := m.nodes[p]; ok {
		return prev == g
	}
	if p.Inst.Op != g.Inst.Op || len(p.Inputs) != len(g.Inputs) || !sameAttrs(p.Inst.Attrs, g.Inst.Attrs) {
		return false
	}
	m.nodes[p] = g
	for i, v := range p.Outputs {
		m.vals[v] = g.Outputs[i]
	}
	rprod := producers(r.Src)
	for i, pv := range p.Inputs {
		if !m.value(pv, g.Inputs[i], prod, rprod, r) {
			return false
		}
	}
	return true
}

func (m *match) value(pv, gv *ir.Value, prod, rprod map[*ir.Value]*ir.Node, r *Rule) bool {
	if prev, ok := m.vals[pv]; ok {
		return prev == gv
	}
	if pv.DType != gv.DType || len(pv.Shape) != len(gv.Shape) {
		return false
	}
	if pn := rprod[pv]; pn != nil {
		gn := prod[gv]
		return gn != nil && m.node(pn, gn, prod, r)
	}
	if pv.Const != nil {
		return gv.Const != nil && *gv.Const == *pv.Const
	}
	m.vals[pv] = gv
	m.bind(pv.Shape, gv.Shape)
	return true
}

// bind binds the rule's bare shape symbols and keeps the other
// dimensions for shapesAgree.
func (m *match) bind(pat, got []lang.Dim) {
	for i, d := range pat {
		if s := d.Symbols(); len(s) == 1 && d.Equal(lang.Sym(s[0])) {
			if _, ok := m.syms[s[0]]; !ok {
				m.syms[s[0]] = got[i]
				continue
			}
		}
	}
	m.dims = append(m.dims, [2][]lang.Dim{pat, got})
}

func (m *match) shapesAgree() bool {
	for _, pg := range m.dims {
		for i, d := range pg[0] {
			bound := d.Subst(func(s string) (lang.Dim, bool) { v, ok := m.syms[s]; return v, ok })
			if !bound.Equal(pg[1][i]) {
				return false
			}
		}
	}
	return true
}

func sameAttrs(a, b []ir.Attr) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || a[i].Value.String() != b[i].Value.String() {
			return false
		}
	}
	return true
}
