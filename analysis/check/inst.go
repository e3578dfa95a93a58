package check

import (
	"fmt"
	"sort"
	"strings"

	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/lang/suggest"
)

// TensorType is the dtype and shape of a value passed to an operator.
type TensorType struct {
	DType lang.DType
	Shape []lang.Dim
}

func (t TensorType) String() string { return t.DType.String() + lang.ShapeString(t.Shape) }

// instCtx elaborates one operator instance.
type instCtx struct {
	decl    *lang.OpDecl
	errs    *lang.ErrorList
	ev      *evaluator
	consts  map[string]cval       // attributes, shape symbols, packs
	origin  map[string]string     // shape symbol -> the input that bound it
	tensors map[string]*ir.Tensor // inputs and lets
	vars    map[string]*ir.Var
	packs   map[string][]*ir.Var
	weak    map[ir.Expr]bool // untyped literals and index arithmetic
	guarded map[*ir.Access]bool
	pending map[*ir.Var]bool // extents still to infer
	used    map[*ir.Var]bool
	inst    *ir.Instance
}

func (c *instCtx) lookupConst(name string) (cval, bool) {
	if v, ok := c.consts[name]; ok {
		return v, true
	}
	if v, ok := c.vars[name]; ok {
		c.used[v] = true
		return idxVal(&ir.VarRef{V: v}), true
	}
	if vs, ok := c.packs[name]; ok {
		l := cval{kind: cList}
		for _, v := range vs {
			c.used[v] = true
			l.list = append(l.list, idxVal(&ir.VarRef{V: v}))
		}
		return l, true
	}
	return cval{}, false
}

func (c *instCtx) names() []string {
	var out []string
	for n := range c.consts {
		out = append(out, n)
	}
	for n := range c.tensors {
		out = append(out, n)
	}
	for n := range c.vars {
		out = append(out, n)
	}
	for n := range c.packs {
		out = append(out, n)
	}
	return out
}

func (c *instCtx) fail(pos lang.Pos, format string, args ...any) {
	c.ev.fail(pos, format, args...)
}

// Instantiate specialises an operator to attribute values and input types.
// Errors found in the operator's own text are reported at its positions;
// errors of the call (arity, attributes, shapes) at site.
func Instantiate(decl *lang.OpDecl, attrs map[string]ir.AttrValue, inputs []TensorType, site lang.Pos) (*ir.Instance, error) {
	args := map[string]cval{}
	for k, v := range attrs {
		args[k] = fromAttr(v)
	}
	var errs lang.ErrorList
	inst := instantiate(decl, args, nil, inputs, site, &errs)
	if err := errs.Err(); err != nil {
		return nil, err
	}
	return inst, nil
}

// instantiate reports into errs and returns nil on failure. attrPos gives
// the position of each attribute argument, for messages.
func instantiate(decl *lang.OpDecl, attrs map[string]cval, attrPos map[string]lang.Pos, inputs []TensorType, site lang.Pos, errs *lang.ErrorList) (inst *ir.Instance) {
	c := &instCtx{
		decl: decl, errs: errs,
		consts: map[string]cval{}, origin: map[string]string{}, tensors: map[string]*ir.Tensor{},
		vars: map[string]*ir.Var{}, packs: map[string][]*ir.Var{},
		weak: map[ir.Expr]bool{}, guarded: map[*ir.Access]bool{}, pending: map[*ir.Var]bool{}, used: map[*ir.Var]bool{},
		inst: &ir.Instance{Op: decl.Name, Pos: decl.Pos},
	}
	c.ev = &evaluator{env: c, errs: errs}
	if !try(func() { c.bindAttrs(attrs, attrPos, site) }) {
		return nil
	}
	if !try(func() { c.bindInputs(inputs, site) }) {
		return nil
	}
	ok := try(func() {
		c.defineLets()
		c.defineOutputs()
	})
	if !ok {
		return nil
	}
	before := len(*errs)
	c.checkBounds()
	c.checkSizes(site)
	if len(*errs) > before {
		return nil
	}
	return c.inst
}

// dtypeClass interprets the dtype written on an operator input: a dtype,
// or `int` (any integer dtype) or `float` (any floating dtype). sample is
// the dtype a standalone check uses, Invalid for an unknown name.
func dtypeClass(name string) (accepts func(lang.DType) bool, sample lang.DType) {
	switch name {
	case "int":
		return lang.DType.IsInt, lang.I64
	case "float":
		return lang.DType.IsFloat, lang.F32
	}
	dt := lang.ParseDType(name)
	return func(x lang.DType) bool { return x == dt }, dt
}

func dtypeClassNames() []string { return append(lang.DTypeNames(), "int", "float") }

func attrKindOf(d *lang.AttrDecl, v cval) string {
	switch d.Type {
	case "":
		return ""
	case "int":
		if v.kind == cInt {
			return ""
		}
	case "float":
		if v.kind == cFloat || v.kind == cInt {
			return ""
		}
	case "bool":
		if v.kind == cBool {
			return ""
		}
	case "string":
		if v.kind == cString {
			return ""
		}
	case "list":
		if v.kind == cList {
			return ""
		}
	}
	return d.Type
}

func (c *instCtx) bindAttrs(args map[string]cval, argPos map[string]lang.Pos, site lang.Pos) {
	declared := map[string]*lang.AttrDecl{}
	var names []string
	for _, d := range c.decl.Attrs {
		if declared[d.Name] != nil {
			c.fail(d.Pos, "attribute %s is declared twice", d.Name)
		}
		declared[d.Name] = d
		names = append(names, d.Name)
	}
	var unknown []string
	for name := range args {
		if declared[name] == nil {
			unknown = append(unknown, name)
		}
	}
	sort.Strings(unknown)
	for _, name := range unknown {
		pos := site
		if p, ok := argPos[name]; ok {
			pos = p
		}
		c.errs.Add(pos, "%s has no attribute %s%s", c.decl.Name, name, suggest.DidYouMean(name, names))
	}
	if len(unknown) > 0 {
		panic(errStop{})
	}
	for _, d := range c.decl.Attrs {
		v, given := args[d.Name]
		switch {
		case given:
			if want := attrKindOf(d, v); want != "" {
				pos := site
				if p, ok := argPos[d.Name]; ok {
					pos = p
				}
				c.fail(pos, "attribute %s of %s must be %s, found %s %s", d.Name, c.decl.Name, article(want), v.kind, v)
			}
			if def := d.Default; def != nil && d.Type == "" {
				var dv cval
				if try(func() { dv = c.ev.eval(def) }) && !compatibleKinds(dv, v) {
					pos := site
					if p, ok := argPos[d.Name]; ok {
						pos = p
					}
					c.fail(pos, "attribute %s of %s must be %s like its default %s, found %s %s", d.Name, c.decl.Name, article(dv.kind.String()), dv, v.kind, v)
				}
			}
			if d.Type == "float" && v.kind == cInt {
				v = cval{kind: cFloat, f: c.ev.toFloat(site, v)}
			}
		case d.Default != nil:
			v = c.ev.eval(d.Default)
			if want := attrKindOf(d, v); want != "" {
				c.fail(d.Pos, "default of attribute %s must be %s, found %s", d.Name, article(want), v.kind)
			}
		default:
			c.fail(site, "%s needs attribute %s", c.decl.Name, d.Name)
		}
		c.consts[d.Name] = v
		if a, ok := v.toAttr(); ok {
			c.inst.Attrs = append(c.inst.Attrs, ir.Attr{Name: d.Name, Value: a})
		}
	}
}

// compatibleKinds accepts an int where a float is expected.
func compatibleKinds(def, v cval) bool {
	if def.kind == v.kind {
		return true
	}
	return def.kind == cFloat && v.kind == cInt
}

func (c *instCtx) bindInputs(inputs []TensorType, site lang.Pos) {
	if len(inputs) != len(c.decl.Inputs) {
		c.fail(site, "%s takes %d inputs, found %d", c.decl.Name, len(c.decl.Inputs), len(inputs))
	}
	for i, in := range c.decl.Inputs {
		actual := inputs[i]
		if in.DType != "" {
			accepts, sample := dtypeClass(in.DType)
			if sample == lang.Invalid {
				c.fail(in.Pos, "unknown dtype %s%s", in.DType, suggest.DidYouMean(in.DType, dtypeClassNames()))
			}
			if !accepts(actual.DType) {
				c.fail(site, "input %s of %s must be %s, found %s", in.Name, c.decl.Name, in.DType, actual)
			}
		}
		c.matchShape(in, actual, site, inputs)
		t := &ir.Tensor{Name: in.Name, DType: actual.DType, Shape: actual.Shape}
		if c.tensors[in.Name] != nil {
			c.fail(in.Pos, "input %s declared twice", in.Name)
		}
		c.tensors[in.Name] = t
		c.inst.Inputs = append(c.inst.Inputs, t)
	}
}

// packLens works out how many dimensions each entry of a shape pattern
// matches in a tensor of the given rank.
func (c *instCtx) packLens(pat []lang.DimPat, rank int, what string, pos lang.Pos) []int {
	lens := make([]int, len(pat))
	free := -1
	used := 0
	for i, p := range pat {
		switch {
		case p.Func != nil:
			c.fail(p.Pos, "a shape function cannot appear in an input shape")
		case p.Pack == "":
			lens[i] = 1
		case c.consts[p.Pack].kind == cList && c.consts[p.Pack].list != nil || c.hasPack(p.Pack):
			lens[i] = len(c.consts[p.Pack].list)
		case p.Len != nil:
			n := c.ev.constInt(p.Len)
			if n < 0 {
				n += int64(rank)
			}
			if n < 0 {
				c.fail(pos, "%s has rank %d, too small for pack *%s of length %s", what, rank, p.Pack, exprString(p.Len))
			}
			lens[i] = int(n)
		default:
			if free >= 0 {
				c.fail(p.Pos, "two packs of unknown length (*%s and *%s) in one shape", pat[free].Pack, p.Pack)
			}
			free = i
			continue
		}
		used += lens[i]
	}
	if free >= 0 {
		lens[free] = rank - used
		if lens[free] < 0 {
			c.fail(pos, "%s has rank %d but the pattern %s needs rank at least %d", what, rank, patString(pat), used)
		}
	} else if used != rank {
		c.fail(pos, "%s has rank %d but the pattern %s needs rank %d", what, rank, patString(pat), used)
	}
	return lens
}

func (c *instCtx) hasPack(name string) bool {
	v, ok := c.consts[name]
	return ok && v.kind == cList
}

func (c *instCtx) matchShape(in *lang.TensorDecl, actual TensorType, site lang.Pos, inputs []TensorType) {
	what := fmt.Sprintf("input %s (%s)", in.Name, actual)
	lens := c.packLens(in.Shape, len(actual.Shape), what, site)
	at := 0
	for i, p := range in.Shape {
		got := actual.Shape[at : at+lens[i]]
		at += lens[i]
		if p.Pack != "" {
			if prev, ok := c.consts[p.Pack]; ok {
				if ds, _ := prev.dims(); !lang.ShapeEqual(ds, got) {
					c.fail(site, "%s: pack *%s is %s in %s but %s in %s", c.decl.Name, p.Pack, lang.ShapeString(ds), c.origin[p.Pack], lang.ShapeString(got), in.Name)
				}
				continue
			}
			c.consts[p.Pack] = dimsVal(got)
			c.origin[p.Pack] = in.Name
			continue
		}
		if id, ok := p.Expr.(*lang.Ident); ok {
			if _, bound := c.consts[id.Name]; !bound {
				c.consts[id.Name] = dimVal(got[0])
				c.origin[id.Name] = in.Name
				continue
			}
		}
		if c.solveMultiple(p.Expr, got[0], in, site, inputs) {
			continue
		}
		want := c.ev.eval(p.Expr)
		if want.kind != cInt {
			c.fail(p.Pos, "a dimension must be an integer, found %s %s", want.kind, want)
		}
		if !want.dim.Equal(got[0]) {
			c.fail(site, "%s(%s): %s must be %s where %s", c.decl.Name, typesString(inputs), in.Name, patString(in.Shape), c.explain(p.Expr))
		}
	}
}

// solveMultiple binds the symbol of a pattern `k * S` (or `S * k`), k a
// compile-time integer, to the actual extent divided by k, which must be
// exact: `x: [*Z, S, heads * D]` splits the last dimension into heads.
func (c *instCtx) solveMultiple(e lang.Expr, actual lang.Dim, in *lang.TensorDecl, site lang.Pos, inputs []TensorType) bool {
	b, ok := e.(*lang.Binary)
	if !ok || b.Op != "*" {
		return false
	}
	for _, side := range [][2]lang.Expr{{b.L, b.R}, {b.R, b.L}} {
		id, ok := side[1].(*lang.Ident)
		if !ok || c.hasConst(id.Name) {
			continue
		}
		kv, known := c.compileTime(side[0])
		k, isInt := kv.constInt()
		if !known || !isInt || k <= 0 {
			continue
		}
		q := actual.FloorDiv(k)
		if !q.Scale(k).Equal(actual) {
			c.fail(site, "%s(%s): %s must be %s, but %s is not a multiple of %s = %d", c.decl.Name, typesString(inputs), in.Name, patString(in.Shape), actual, exprString(side[0]), k)
		}
		c.consts[id.Name] = dimVal(q)
		c.origin[id.Name] = in.Name
		return true
	}
	return false
}

func typesString(ts []TensorType) string {
	parts := make([]string, len(ts))
	for i, t := range ts {
		parts[i] = t.String()
	}
	return strings.Join(parts, ", ")
}

// explain says where the symbols of a dimension expression were bound.
func (c *instCtx) explain(e lang.Expr) string {
	var parts []string
	seen := map[string]bool{}
	walkIdents(e, func(name string) {
		if seen[name] {
			return
		}
		seen[name] = true
		if v, ok := c.consts[name]; ok && v.kind == cInt {
			if from, ok := c.origin[name]; ok {
				parts = append(parts, fmt.Sprintf("%s = %s from %s", name, v.dim, from))
			} else {
				parts = append(parts, fmt.Sprintf("%s = %s", name, v.dim))
			}
		}
	})
	if len(parts) == 0 {
		return exprString(e) + " is a constant"
	}
	return strings.Join(parts, ", ")
}

func walkIdents(e lang.Expr, f func(string)) {
	switch e := e.(type) {
	case *lang.Ident:
		f(e.Name)
	case *lang.Binary:
		walkIdents(e.L, f)
		walkIdents(e.R, f)
	case *lang.Unary:
		walkIdents(e.X, f)
	case *lang.Paren:
		walkIdents(e.X, f)
	case *lang.Call:
		for _, a := range e.Args {
			walkIdents(a, f)
		}
	}
}

// evalShape evaluates a shape pattern into groups of dimensions, one group
// per entry (a pack or shape function gives several).
func (c *instCtx) evalShape(pat []lang.DimPat) [][]lang.Dim {
	groups := make([][]lang.Dim, len(pat))
	for i, p := range pat {
		groups[i] = c.evalDimPat(p)
	}
	return groups
}

func (c *instCtx) evalDimPat(p lang.DimPat) []lang.Dim {
	var v cval
	switch {
	case p.Func != nil:
		v = c.ev.eval(p.Func)
	case p.Pack != "":
		pv, ok := c.consts[p.Pack]
		if !ok || pv.kind != cList {
			c.fail(p.Pos, "undefined pack *%s%s", p.Pack, suggest.DidYouMean(p.Pack, c.names()))
		}
		v = pv
	default:
		d := c.ev.eval(p.Expr)
		if d.kind != cInt {
			c.fail(p.Pos, "a dimension must be an integer, found %s %s", d.kind, d)
		}
		return []lang.Dim{d.dim}
	}
	ds, ok := v.dims()
	if !ok {
		c.fail(p.Pos, "expected a list of dimensions, found %s", v)
	}
	for _, d := range ds {
		if n, ok := d.IsConst(); ok && n < 0 {
			c.fail(p.Pos, "negative dimension %d in %s", n, lang.ShapeString(ds))
		}
	}
	return ds
}

func flatten(groups [][]lang.Dim) []lang.Dim {
	var out []lang.Dim
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}

// bindParams creates the variables of a lambda whose extents are given by a
// shape's groups: a pack parameter takes a whole group; a lone pack takes
// every dimension.
func (c *instCtx) bindParams(l *lang.Lambda, groups [][]lang.Dim, what string) []*ir.Var {
	if len(l.Params) == 1 && l.Params[0].Pack {
		return c.newPack(l.Params[0], flatten(groups))
	}
	if len(l.Params) != len(groups) {
		c.fail(l.Pos, "the lambda of %s has %s but its shape %s has %s", what, plural(len(l.Params), "parameter"), lang.ShapeString(flatten(groups)), plural(len(groups), "entry"))
	}
	var vars []*ir.Var
	for i, p := range l.Params {
		if p.Bound != nil {
			c.fail(p.Pos, "the extent of %s comes from the shape of %s; remove the bound", p.Name, what)
		}
		if p.Pack {
			vars = append(vars, c.newPack(p, groups[i])...)
			continue
		}
		if len(groups[i]) != 1 {
			c.fail(p.Pos, "%s stands for %d dimensions of %s; write *%s", p.Name, len(groups[i]), what, p.Name)
		}
		vars = append(vars, c.newVar(p, groups[i][0]))
	}
	return vars
}

func (c *instCtx) checkFresh(p *lang.LambdaParam) {
	_, isVar := c.vars[p.Name]
	_, isPack := c.packs[p.Name]
	_, isConst := c.consts[p.Name]
	_, isTensor := c.tensors[p.Name]
	if isVar || isPack || isConst || isTensor {
		c.fail(p.Pos, "%s is already defined; choose another name for the lambda variable", p.Name)
	}
}

func (c *instCtx) newVar(p *lang.LambdaParam, extent lang.Dim) *ir.Var {
	c.checkFresh(p)
	v := &ir.Var{Name: p.Name, Extent: extent}
	c.vars[p.Name] = v
	return v
}

func (c *instCtx) newPack(p *lang.LambdaParam, extents []lang.Dim) []*ir.Var {
	c.checkFresh(p)
	vs := make([]*ir.Var, len(extents))
	for i, d := range extents {
		vs[i] = &ir.Var{Name: fmt.Sprintf("%s%d", p.Name, i), Extent: d}
	}
	c.packs[p.Name] = vs
	return vs
}

func (c *instCtx) popParams(l *lang.Lambda) {
	for _, p := range l.Params {
		delete(c.vars, p.Name)
		delete(c.packs, p.Name)
	}
}

func (c *instCtx) lambdaOf(e lang.Expr, what string) *lang.Lambda {
	for {
		p, ok := e.(*lang.Paren)
		if !ok {
			break
		}
		e = p.X
	}
	l, ok := e.(*lang.Lambda)
	if !ok {
		c.fail(e.ExprPos(), "%s must be a lambda", what)
	}
	return l
}

func (c *instCtx) defineLets() {
	for _, let := range c.decl.Lets {
		if c.tensors[let.Name] != nil || c.hasConst(let.Name) {
			c.fail(let.Pos, "%s is already defined", let.Name)
		}
		l := c.lambdaOf(let.Value, "the value of let "+let.Name)
		var vars []*ir.Var
		if let.Shape != nil {
			vars = c.bindParams(l, c.evalShape(let.Shape), let.Name)
		} else {
			vars = c.pendingParams(l, "let "+let.Name)
		}
		body := c.elabTop(l.Body)
		c.inferExtents(vars, body, l)
		c.popParams(l)
		shape := make([]lang.Dim, len(vars))
		for i, v := range vars {
			shape[i] = v.Extent
		}
		t := &ir.Tensor{Name: let.Name, DType: c.settle(body), Shape: shape}
		c.tensors[let.Name] = t
		c.inst.Locals = append(c.inst.Locals, &ir.Def{Pos: let.Pos, Tensor: t, Vars: vars, Body: c.castTo(body, t.DType)})
	}
}

func (c *instCtx) hasConst(name string) bool { _, ok := c.consts[name]; return ok }

// pendingParams creates variables whose extents are inferred from the body.
func (c *instCtx) pendingParams(l *lang.Lambda, what string) []*ir.Var {
	var vars []*ir.Var
	for _, p := range l.Params {
		if p.Pack {
			if p.Bound == nil {
				c.fail(p.Pos, "the pack *%s of %s needs explicit extents: *%s < *SHAPE", p.Name, what, p.Name)
			}
			vars = append(vars, c.newPack(p, c.evalDimPat(*p.Bound))...)
			continue
		}
		if p.Bound != nil {
			ds := c.evalDimPat(*p.Bound)
			if len(ds) != 1 {
				c.fail(p.Bound.Pos, "the extent of %s must be one dimension, found %s", p.Name, lang.ShapeString(ds))
			}
			if n, ok := ds[0].IsConst(); ok && n < 0 {
				c.fail(p.Bound.Pos, "the extent of %s is negative (%d)", p.Name, n)
			}
			vars = append(vars, c.newVar(p, ds[0]))
			continue
		}
		v := c.newVar(p, lang.Dim{})
		c.pending[v] = true
		vars = append(vars, v)
	}
	return vars
}

// inferExtents gives each pending variable the extent of a dimension it
// indexes on its own (preferring accesses without an else default).
func (c *instCtx) inferExtents(vars []*ir.Var, body ir.Expr, l *lang.Lambda) {
	for i, v := range vars {
		if !c.pending[v] {
			continue
		}
		var found, fallback *lang.Dim
		ir.Walk(body, func(e ir.Expr) bool {
			a, ok := e.(*ir.Access)
			if !ok {
				return true
			}
			for d, x := range a.Index {
				if r, ok := x.(*ir.VarRef); ok && r.V == v {
					ext := a.T.Shape[d]
					switch {
					case a.Default == nil && found == nil:
						found = &ext
					case fallback == nil:
						fallback = &ext
					}
				}
			}
			return true
		})
		if found == nil {
			found = fallback
		}
		pos := l.Pos
		if i < len(l.Params) {
			pos = l.Params[i].Pos
		}
		if found == nil {
			if !c.used[v] {
				c.fail(pos, "lambda variable %s is never used", v.Name)
			}
			c.fail(pos, "cannot infer the range of %s: it never indexes a tensor on its own; write `%s < EXTENT`", v.Name, v.Name)
		}
		v.Extent = *found
		delete(c.pending, v)
	}
}

func (c *instCtx) defineOutputs() {
	if len(c.decl.Bodies) != len(c.decl.Outputs) {
		c.fail(c.decl.Pos, "%s declares %d outputs but defines %d", c.decl.Name, len(c.decl.Outputs), len(c.decl.Bodies))
	}
	seen := map[string]bool{}
	for i, out := range c.decl.Outputs {
		if out.Name != "" && seen[out.Name] {
			c.fail(out.Pos, "output %s is declared twice", out.Name)
		}
		seen[out.Name] = true
		name := out.Name
		if name == "" {
			name = "out"
			if len(c.decl.Outputs) > 1 {
				name = fmt.Sprintf("out%d", i)
			}
		}
		groups := c.evalShape(out.Shape)
		l := c.lambdaOf(c.decl.Bodies[i], "the body of "+c.decl.Name)
		vars := c.bindParams(l, groups, "output "+name)
		body := c.elabTop(l.Body)
		c.popParams(l)
		dt := c.settle(body)
		if out.DType != "" {
			want := lang.ParseDType(out.DType)
			if want == lang.Invalid {
				c.fail(out.Pos, "unknown dtype %s", out.DType)
			}
			if want != dt && !c.weak[body] && !(want.IsFloat() && dt.IsFloat()) {
				c.fail(l.Body.ExprPos(), "the body has dtype %s but the output is declared %s; convert with %s(...)", dt, want, want)
			}
			dt = want
		}
		t := &ir.Tensor{Name: name, DType: dt, Shape: flatten(groups)}
		c.inst.Outputs = append(c.inst.Outputs, &ir.Def{Pos: l.Pos, Tensor: t, Vars: vars, Body: c.castTo(body, dt)})
	}
}

// settle gives the dtype a body is stored with: untyped float literals are
// f32 and untyped integers (index arithmetic) i64.
func (c *instCtx) settle(e ir.Expr) lang.DType {
	return e.Type()
}

func (c *instCtx) castTo(e ir.Expr, t lang.DType) ir.Expr {
	if e.Type() == t {
		return e
	}
	if k, ok := e.(*ir.Const); ok {
		return retypeConst(k, t)
	}
	return &ir.Cast{X: e, T: t}
}

func retypeConst(k *ir.Const, t lang.DType) *ir.Const {
	out := &ir.Const{T: t}
	switch {
	case t.IsFloat() && k.T.IsFloat():
		out.Float = t.RoundFloat(k.Float)
	case t.IsFloat():
		out.Float = t.RoundFloat(float64(k.Int))
	case k.T.IsFloat():
		out.Int = t.WrapInt(int64(k.Float))
	default:
		out.Int = t.WrapInt(k.Int)
	}
	return out
}

func exprString(e lang.Expr) string { return lang.FormatExpr(e) }

func patString(p []lang.DimPat) string { return lang.FormatShape(p) }
