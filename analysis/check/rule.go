package check

import (
	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/lang/suggest"
)

// Rule is a checked rewrite rule: both sides as graphs over the same inputs.
type Rule struct {
	Decl     *lang.RuleDecl
	Module   *Module // where the rule is declared (RuleWith makes other instances)
	Inputs   []*ir.Value
	LHS, RHS *ir.Graph
}

// Rule elaborates the rule called name: its variables become graph inputs
// with symbolic shapes, each side a graph; the two sides must agree in
// shape and dtype. Its attributes take their defaults.
func (m *Module) Rule(name string) (*Rule, error) { return m.RuleWith(name, nil) }

// RuleWith elaborates the rule called name with its attributes set as in
// set (the others take their defaults): the instance of a rule template
// that the optimiser binds from a match.
func (m *Module) RuleWith(name string, set map[string]ir.AttrValue) (*Rule, error) {
	var decl *lang.RuleDecl
	var names []string
	for _, r := range m.File.Rules {
		if r.Name == name {
			decl = r
		}
		names = append(names, r.Name)
	}
	if decl == nil {
		return nil, lang.ErrorList{lang.Errorf(lang.Pos{File: m.Path}, "no rule %s%s", name, suggest.DidYouMean(name, names))}
	}
	el := &elab{mod: m, graph: &ir.Graph{Name: name}, names: map[string]int{}}
	root := newScope(nil, true)
	r := &Rule{Decl: decl, Module: m}
	ok := try(func() {
		el.bindModelAttrs(root, &lang.ModelDecl{Name: name, Pos: decl.Pos, Attrs: decl.Attrs}, set)
		for _, v := range decl.Vars {
			el.modelInput(root, v)
		}
		r.Inputs = el.graph.Inputs
		r.LHS = el.side(root, decl.LHS, "lhs")
		r.RHS = el.side(root, decl.RHS, "rhs")
		l, rr := r.LHS.Outputs[0], r.RHS.Outputs[0]
		if l.DType != rr.DType || !lang.ShapeEqual(l.Shape, rr.Shape) {
			el.fail(decl.Pos, "the sides of rule %s differ: %s%s on the left, %s%s on the right", name, l.DType, lang.ShapeString(l.Shape), rr.DType, lang.ShapeString(rr.Shape))
		}
	})
	if err := el.errs.Err(); err != nil || !ok {
		return nil, err
	}
	return r, nil
}

// side elaborates one side of a rule into a graph of its own.
func (el *elab) side(s *mscope, e lang.Expr, name string) *ir.Graph {
	outer := el.graph
	el.graph = &ir.Graph{Name: outer.Name + "." + name, Inputs: outer.Inputs}
	vals := el.tensorExpr(s, e, name)
	if len(vals) != 1 {
		el.fail(e.ExprPos(), "each side of a rule must give one tensor, found %d", len(vals))
	}
	g := el.graph
	g.Outputs = vals
	el.graph = outer
	return g
}
