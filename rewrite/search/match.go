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
	// loose matches operators and edges only (attributes, constants and
	// shapes are not compared): the first step for a template.
	loose bool
	prod  map[*ir.Value]*ir.Node // the graph's producers
	rprod map[*ir.Value]*ir.Node // the rule side's producers
}

func newMatch(r *Rule, prod map[*ir.Value]*ir.Node, loose bool) *match {
	return &match{vals: map[*ir.Value]*ir.Value{}, nodes: map[*ir.Node]*ir.Node{}, syms: map[string]lang.Dim{},
		loose: loose, prod: prod, rprod: r.srcProd}
}

// matchAt tries to map rule r's source onto the graph with its root at n.
func matchAt(r *Rule, n *ir.Node, prod map[*ir.Value]*ir.Node, loose bool) *match {
	m := newMatch(r, prod, loose)
	root := r.root()
	if root == nil || len(n.Outputs) != len(root.Outputs) {
		return nil
	}
	if !m.node(root, n) || !m.shapesAgree() {
		return nil
	}
	return m
}

// matchPair maps the two operands of r's concat root onto the graph
// nodes a and b (siblings: values not concatenated in the graph).
func matchPair(r *Rule, a, b *ir.Node, prod map[*ir.Value]*ir.Node, loose bool) *match {
	m := newMatch(r, prod, loose)
	root := r.root()
	pa, pb := m.rprod[root.Inputs[0]], m.rprod[root.Inputs[1]]
	if len(a.Outputs) != len(pa.Outputs) || len(b.Outputs) != len(pb.Outputs) {
		return nil
	}
	if !m.node(pa, a) || !m.node(pb, b) || !m.shapesAgree() {
		return nil
	}
	return m
}

func (m *match) node(p, g *ir.Node) bool {
	if prev, ok := m.nodes[p]; ok {
		return prev == g
	}
	for _, prev := range m.nodes {
		if prev == g {
			return false // two pattern nodes on one graph node
		}
	}
	if p.Inst.Op != g.Inst.Op || len(p.Inputs) != len(g.Inputs) || len(p.Outputs) != len(g.Outputs) {
		return false
	}
	if !m.loose && !sameAttrs(p.Inst.Attrs, g.Inst.Attrs) {
		return false
	}
	m.nodes[p] = g
	for i, v := range p.Outputs {
		m.vals[v] = g.Outputs[i]
	}
	for i, pv := range p.Inputs {
		if !m.value(pv, g.Inputs[i]) {
			return false
		}
	}
	return true
}

func (m *match) value(pv, gv *ir.Value) bool {
	if prev, ok := m.vals[pv]; ok {
		return prev == gv
	}
	if pv.DType != gv.DType || len(pv.Shape) != len(gv.Shape) {
		return false
	}
	if pn := m.rprod[pv]; pn != nil {
		gn := m.prod[gv]
		return gn != nil && m.node(pn, gn)
	}
	if pv.Const != nil {
		if gv.Const == nil || (!m.loose && *gv.Const != *pv.Const) {
			return false
		}
	}
	m.vals[pv] = gv
	if !m.loose {
		m.bind(pv.Shape, gv.Shape)
	}
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

// bindAttrs reads a template's attributes off a loose match: an attribute
// written bare as a dimension of a variable takes the matched extent, and
// one written bare as an attribute argument of a source call (or as an
// element of a list argument) takes the matched node's value. It fails on
// two different values for one attribute or a symbolic extent.
func bindAttrs(r *Rule, m *match) (map[string]ir.AttrValue, bool) {
	t := r.tmpl
	set := map[string]ir.AttrValue{}
	put := func(name string, v ir.AttrValue) bool {
		if prev, ok := set[name]; ok {
			return prev.String() == v.String()
		}
		set[name] = v
		return true
	}
	for i, decl := range t.rule.Decl.Vars {
		gv := m.vals[r.Vars[i]]
		if gv == nil || len(gv.Shape) != len(decl.Shape) {
			continue
		}
		for j, d := range decl.Shape {
			id, ok := d.Expr.(*lang.Ident)
			if !ok || !t.attrs[id.Name] {
				continue
			}
			c, ok := gv.Shape[j].IsConst()
			if !ok || !put(id.Name, ir.AttrValue{Kind: ir.AttrInt, Int: c}) {
				return nil, false
			}
		}
	}
	for p, g := range m.nodes {
		call := t.calls[p.Pos]
		if call == nil {
			continue
		}
		for _, a := range call.Attrs {
			got, ok := attrNamed(g.Inst.Attrs, a.Name)
			if !ok {
				return nil, false
			}
			switch e := a.Value.(type) {
			case *lang.Ident:
				if t.attrs[e.Name] && !put(e.Name, got) {
					return nil, false
				}
			case *lang.List:
				for k, el := range e.Elems {
					id, ok := el.(*lang.Ident)
					if !ok || !t.attrs[id.Name] {
						continue
					}
					if got.Kind != ir.AttrList || k >= len(got.List) || !put(id.Name, got.List[k]) {
						return nil, false
					}
				}
			}
		}
	}
	return set, true
}

func attrNamed(as []ir.Attr, name string) (ir.AttrValue, bool) {
	for _, a := range as {
		if a.Name == name {
			return a.Value, true
		}
	}
	return ir.AttrValue{}, false
}
