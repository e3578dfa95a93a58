package search

import (
	"fmt"
	"sort"
	"strings"

	"tofuc/analysis/check"
	"tofuc/lang/ir"
	"tofuc/rewrite/smt"
)

// instances verifies the rules a search uses, each once: every rule
// before its first match is applied, the instances of rule templates at
// the attributes a match binds, and the split lemmas that sibling
// rewrites rely on. A rule is used only when rewrite/smt proves it, or
// bounds it as far as its constants need (smt.Result.Usable); a refuted,
// unknown or insufficiently bounded one is never applied.
type instances struct {
	prog   *check.Program
	opts   smt.Options
	rules  map[string]*Rule // by direction name and attributes; nil: unusable
	proofs map[string]bool  // by rule name and attributes: verified
	lemmas map[string]bool
	// Results lists every verification run, in order.
	Results []smt.Result
}

func newInstances(prog *check.Program) *instances {
	return &instances{prog: prog, rules: map[string]*Rule{}, proofs: map[string]bool{}, lemmas: map[string]bool{}}
}

// verified reports whether rule r (not a template) may be used,
// verifying it the first time.
func (in *instances) verified(r *Rule) bool {
	name, cr, _ := proofOf(r, nil)
	return in.verify(name, cr)
}

// verify verifies cr under name once and reports whether it is usable.
func (in *instances) verify(name string, cr *check.Rule) bool {
	ok, done := in.proofs[name]
	if !done {
		res := smt.Verify(cr, in.opts)
		res.Rule = name
		in.Results = append(in.Results, res)
		ok = res.Usable()
		in.proofs[name] = ok
	}
	return ok
}

// prefetch verifies, on every core, the rules and template instances
// that match g as it is, which a search would otherwise verify one after
// the other as it meets them; an instance that fails to elaborate is
// left to bind, which does not use it.
func (in *instances) prefetch(g *ir.Graph, rules []*Rule) {
	var names []string
	var pending []*check.Rule
	queued := map[string]bool{}
	for _, matches := range firstMatches(g, rules, nil, producers(g)) {
		for _, rm := range matches {
			name, cr, ok := proofOf(rm.r, rm.m)
			if _, done := in.proofs[name]; ok && !done && !queued[name] {
				queued[name] = true
				names, pending = append(names, name), append(pending, cr)
			}
		}
	}
	for i, res := range smt.VerifyAll(pending, in.opts) {
		res.Rule = names[i]
		in.Results = append(in.Results, res)
		in.proofs[names[i]] = res.Usable()
	}
}

// proofOf is the name and elaboration under which rule r, matched by m
// (loosely for a template), is verified: a template's instance at the
// attributes m binds; ok is false when they cannot be bound or the
// instance elaborated.
func proofOf(r *Rule, m *match) (name string, cr *check.Rule, ok bool) {
	if r.tmpl == nil {
		return r.checked.Decl.Name, r.checked, true
	}
	set, ok := bindAttrs(r, m)
	if !ok {
		return "", nil, false
	}
	name, cr, err := instanceOf(r, set)
	return name, cr, err == nil
}

// instanceOf is the name and elaboration of template r's instance at
// the attributes set (bindAttrs).
func instanceOf(r *Rule, set map[string]ir.AttrValue) (string, *check.Rule, error) {
	t := r.tmpl
	cr, err := t.rule.Module.RuleWith(t.rule.Decl.Name, set)
	return t.rule.Decl.Name + attrKey(set), cr, err
}

// bind returns the instance of template r at the attributes a loose match
// binds, verified; nil when binding, elaboration or verification fails.
func (in *instances) bind(r *Rule, loose *match) *Rule {
	set, ok := bindAttrs(r, loose)
	if !ok {
		return nil
	}
	key := r.Name + attrKey(set)
	if d, ok := in.rules[key]; ok {
		return d
	}
	in.rules[key] = nil
	name, cr, err := instanceOf(r, set)
	if err != nil {
		return nil
	}
	if !in.verify(name, cr) {
		return nil
	}
	t := r.tmpl
	src, dst := cr.LHS, cr.RHS
	if t.reverse {
		src, dst = dst, src
	}
	d := (&Rule{Name: r.Name + attrKey(set), Src: src, Dst: dst, Vars: cr.Inputs, sibling: r.sibling}).withRoot()
	in.rules[key] = d
	return d
}

func attrKey(set map[string]ir.AttrValue) string {
	if len(set) == 0 {
		return ""
	}
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = n + " = " + set[n].String()
	}
	return "<" + strings.Join(parts, ", ") + ">"
}

// splitLemma verifies, once per rank, axis and extents, that slicing
// concat(x, y) along axis at [0, ka) gives x and at [ka, ka + kb) gives
// y, the other extents symbolic: TASO's split axioms at the concrete
// split point.
func (in *instances) splitLemma(rank, axis int, ka, kb int64) bool {
	key := fmt.Sprintf("r%d_a%d_%d_%d", rank, axis, ka, kb)
	if ok, done := in.lemmas[key]; done {
		return ok
	}
	in.lemmas[key] = false
	src := splitLemmaSource(rank, axis, ka, kb)
	m, err := in.prog.LoadSource("split_lemma_"+key+".tdl", []byte(src))
	if err != nil {
		return false
	}
	for _, d := range m.File.Rules {
		cr, err := m.Rule(d.Name)
		if err != nil {
			return false
		}
		if !in.verify(d.Name+"_"+key, cr) {
			return false
		}
	}
	in.lemmas[key] = true
	return true
}

// splitLemmaSource is the TDL of the two split lemmas.
func splitLemmaSource(rank, axis int, ka, kb int64) string {
	shape := func(k int64) string {
		dims := make([]string, rank)
		for i := range dims {
			dims[i] = fmt.Sprintf("S%d", i)
		}
		dims[axis] = fmt.Sprint(k)
		return "[" + strings.Join(dims, ", ") + "]"
	}
	vars := fmt.Sprintf("x: %s, y: %s", shape(ka), shape(kb))
	cat := fmt.Sprintf("concat<axis = %d>(x, y)", axis)
	return fmt.Sprintf("rule slice_concat_first(%s): slice<starts = [0], ends = [%d], axes = [%d]>(%s) == x\n", vars, ka, axis, cat) +
		fmt.Sprintf("rule slice_concat_second(%s): slice<starts = [%d], ends = [%d], axes = [%d]>(%s) == y\n", vars, ka, ka+kb, axis, cat)
}
