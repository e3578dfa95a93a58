package check

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/lang/suggest"
)

// Model elaboration: a model body runs at compile time (loops, conditionals,
// block calls) and leaves a dataflow graph of operator instances.

// mscope is a lexical scope of a model body. Values do not cross a barrier
// (a block sees only its parameters); constants and blocks do.
type mscope struct {
	parent  *mscope
	barrier bool
	values  map[string][]*ir.Value // one value, or the results of a multi-output call
	consts  map[string]cval
	blocks  map[string]*blockDef
}

type blockDef struct {
	decl  *lang.BlockStmt
	scope *mscope
}

func newScope(parent *mscope, barrier bool) *mscope {
	return &mscope{parent: parent, barrier: barrier, values: map[string][]*ir.Value{}, consts: map[string]cval{}, blocks: map[string]*blockDef{}}
}

func (s *mscope) lookupConst(name string) (cval, bool) {
	for sc := s; sc != nil; sc = sc.parent {
		if v, ok := sc.consts[name]; ok {
			return v, true
		}
	}
	return cval{}, false
}

func (s *mscope) names() []string {
	var out []string
	for sc := s; sc != nil; sc = sc.parent {
		for n := range sc.consts {
			out = append(out, n)
		}
		for n := range sc.values {
			out = append(out, n)
		}
		for n := range sc.blocks {
			out = append(out, n)
		}
	}
	return out
}

func (s *mscope) lookupValue(name string) ([]*ir.Value, bool) {
	for sc := s; sc != nil; sc = sc.parent {
		if v, ok := sc.values[name]; ok {
			return v, true
		}
		if sc.barrier {
			break
		}
	}
	return nil, false
}

func (s *mscope) lookupBlock(name string) *blockDef {
	for sc := s; sc != nil; sc = sc.parent {
		if b, ok := sc.blocks[name]; ok {
			return b
		}
	}
	return nil
}

// assign rebinds name where it is already bound (up to a barrier), so that
// `x = f(x)` in a loop body updates the x outside; otherwise binds it here.
func (s *mscope) assign(name string, v []*ir.Value) {
	for sc := s; sc != nil; sc = sc.parent {
		if _, ok := sc.values[name]; ok {
			sc.values[name] = v
			return
		}
		if sc.barrier {
			break
		}
	}
	s.values[name] = v
}

// assignConst rebinds a constant where it is bound (up to a barrier), so
// that `c = c + 1` in a loop body updates the c outside; otherwise binds it
// here.
func (s *mscope) assignConst(name string, v cval) {
	for sc := s; sc != nil; sc = sc.parent {
		if _, ok := sc.consts[name]; ok {
			sc.consts[name] = v
			return
		}
		if sc.barrier {
			break
		}
	}
	s.consts[name] = v
}

// elab builds one graph.
type elab struct {
	mod    *Module
	graph  *ir.Graph
	errs   lang.ErrorList
	names  map[string]int // uniquifier for node, value and parameter names
	path   []string       // enclosing block calls
	ret    []*ir.Value    // set by a return statement
	retPos lang.Pos
	depth  int
	steps  int // statements run so far
	// symbol is the attribute or input extent kept symbolic
	// (SymbolicModel), "" for none.
	symbol string
}

// maxBlockDepth bounds block recursion.
const maxBlockDepth = 64

// maxSteps bounds the statements one elaboration runs (through nested
// loops and block calls), so that checking always ends.
const maxSteps = 1_000_000

func (m *Module) elaborate(md *lang.ModelDecl, set map[string]ir.AttrValue, symbol string) (*ir.Graph, error) {
	el := &elab{mod: m, graph: &ir.Graph{Name: md.Name}, names: map[string]int{}, symbol: symbol}
	root := newScope(nil, true)
	ok := try(func() {
		el.bindModelAttrs(root, md, set)
		for _, in := range md.Inputs {
			el.modelInput(root, in)
		}
		el.stmts(root, md.Body)
	})
	if ok && el.ret == nil && len(el.errs) == 0 {
		el.errs.Add(md.End, "model %s has no return statement", md.Name)
	}
	if err := el.errs.Err(); err != nil {
		return nil, err
	}
	el.graph.Outputs = el.ret
	return el.graph, nil
}

func (el *elab) ev(s *mscope) *evaluator { return &evaluator{env: s, errs: &el.errs} }

func (el *elab) fail(pos lang.Pos, format string, args ...any) {
	el.errs.Add(pos, format, args...)
	panic(errStop{})
}

func (el *elab) bindModelAttrs(s *mscope, md *lang.ModelDecl, set map[string]ir.AttrValue) {
	declared := map[string]bool{}
	var names []string
	for _, a := range md.Attrs {
		if declared[a.Name] {
			el.fail(a.Pos, "attribute %s is declared twice", a.Name)
		}
		declared[a.Name] = true
		names = append(names, a.Name)
	}
	symbols := inputSymbols(md, declared)
	var unknown []string
	for n := range set {
		if !declared[n] && !symbols[n] {
			unknown = append(unknown, n)
		}
	}
	if el.symbol != "" && !declared[el.symbol] && !symbols[el.symbol] {
		unknown = append(unknown, el.symbol)
	}
	if _, ok := set[el.symbol]; ok && el.symbol != "" {
		el.fail(md.Pos, "%s is both set and kept symbolic", el.symbol)
	}
	sort.Strings(unknown)
	settable := append(names, keys(symbols)...)
	for _, n := range unknown {
		el.errs.Add(md.Pos, "model %s has no attribute or input extent %s%s (it has: %s)", md.Name, n, suggest.DidYouMean(n, settable), strings.Join(settable, ", "))
	}
	if len(unknown) > 0 {
		panic(errStop{})
	}
	// A symbolic extent of an input (x: f32[N, 8]) is bound by --set N=3
	// as an attribute would be: partition and the cost model need
	// concrete shapes.
	for n := range symbols {
		if v, ok := set[n]; ok {
			if v.Kind != ir.AttrInt {
				el.fail(md.Pos, "--set %s: the input extent %s must be an integer, found %s", n, n, v)
			}
			s.consts[n] = intVal(v.Int)
		}
	}
	for _, a := range md.Attrs {
		var v cval
		switch {
		case a.Name == el.symbol:
			v = el.symbolAttr(s, a)
		case set != nil && hasKey(set, a.Name):
			v = fromAttr(set[a.Name])
			if a.Default != nil {
				def := el.ev(s).eval(a.Default)
				if !compatibleKinds(def, v) {
					el.fail(a.Pos, "--set %s: expected %s like the default %s, found %s %s", a.Name, article(def.kind.String()), def, v.kind, v)
				}
				if def.kind == cFloat && v.kind == cInt {
					n, _ := v.constInt()
					v = cval{kind: cFloat, f: float64(n)}
				}
			}
		case a.Default != nil:
			v = el.ev(s).eval(a.Default)
		default:
			el.fail(a.Pos, "model attribute %s has no default; give it with --set %s=VALUE", a.Name, a.Name)
		}
		if want := attrKindOf(a, v); want != "" {
			el.fail(a.Pos, "attribute %s must be %s, found %s %s", a.Name, article(want), v.kind, v)
		}
		s.consts[a.Name] = v
	}
}

// symbolAttr is the value of the attribute kept symbolic: the shape
// symbol of its name, for an integer attribute (by its type or default).
func (el *elab) symbolAttr(s *mscope, a *lang.AttrDecl) cval {
	isInt := a.Type == "int"
	if a.Default != nil && a.Type == "" {
		isInt = el.ev(s).eval(a.Default).kind == cInt
	}
	if !isInt {
		el.fail(a.Pos, "attribute %s cannot stay symbolic: it is not an integer", a.Name)
	}
	return dimVal(lang.Sym(a.Name))
}

func hasKey(m map[string]ir.AttrValue, k string) bool { _, ok := m[k]; return ok }

// inputSymbols is the set of names in the model's input shapes that are
// not attributes: the shape symbols the inputs bind.
func inputSymbols(md *lang.ModelDecl, attrs map[string]bool) map[string]bool {
	out := map[string]bool{}
	for _, in := range md.Inputs {
		for _, p := range in.Shape {
			walkIdents(p.Expr, func(name string) {
				if !attrs[name] {
					out[name] = true
				}
			})
		}
	}
	return out
}

// modelInput declares a graph input; names in its shape that are not
// attributes become shape symbols (a symbolic batch).
func (el *elab) modelInput(s *mscope, in *lang.TensorDecl) {
	dt := lang.F32
	if in.DType != "" {
		if dt = lang.ParseDType(in.DType); dt == lang.Invalid {
			el.fail(in.Pos, "unknown dtype %s%s", in.DType, suggest.DidYouMean(in.DType, lang.DTypeNames()))
		}
	}
	shape := el.declShape(s, in.Shape)
	if p := shapeProblem(dt, shape); p != "" {
		el.fail(in.Pos, "input %s: %s", in.Name, p)
	}
	v := &ir.Value{Name: el.unique(in.Name), DType: dt, Shape: shape}
	if _, dup := s.values[in.Name]; dup {
		el.fail(in.Pos, "input %s declared twice", in.Name)
	}
	s.values[in.Name] = []*ir.Value{v}
	el.graph.Inputs = append(el.graph.Inputs, v)
}

// declShape evaluates a shape in a model or rule, where unknown names are
// shape symbols.
func (el *elab) declShape(s *mscope, pat []lang.DimPat) []lang.Dim {
	var shape []lang.Dim
	for _, p := range pat {
		if p.Pack != "" || p.Func != nil {
			el.fail(p.Pos, "packs are not allowed in model shapes")
		}
		walkIdents(p.Expr, func(name string) {
			if _, ok := s.lookupConst(name); !ok {
				if _, isValue := s.lookupValue(name); isValue {
					el.fail(p.Pos, "%s is a tensor, not a dimension", name)
				}
				s.consts[name] = dimVal(lang.Sym(name))
			}
		})
		d := el.ev(s).eval(p.Expr)
		if d.kind != cInt {
			el.fail(p.Pos, "a dimension must be an integer, found %s %s", d.kind, d)
		}
		if n, ok := d.dim.IsConst(); ok && n < 0 {
			el.fail(p.Pos, "negative dimension %d", n)
		}
		if d.dim.Overflows() {
			el.fail(p.Pos, "this dimension overflows 64-bit integers")
		}
		shape = append(shape, d.dim)
	}
	return shape
}

func (el *elab) unique(name string) string {
	full := strings.Join(append(append([]string(nil), el.path...), name), "/")
	n := el.names[full]
	el.names[full] = n + 1
	if n == 0 {
		return full
	}
	return fmt.Sprintf("%s.%d", full, n)
}

func (el *elab) stmts(s *mscope, body []lang.Stmt) {
	for _, st := range body {
		if el.ret != nil {
			el.fail(st.StmtPos(), "unreachable statement after return (at %s)", el.retPos)
		}
		if el.steps++; el.steps > maxSteps {
			if el.steps == maxSteps+1 {
				el.errs.Add(st.StmtPos(), "elaboration runs more than %d statements (loops nested too deep?)", maxSteps)
			}
			panic(errStop{})
		}
		if !try(func() { el.stmt(s, st) }) {
			if len(el.errs) >= lang.MaxErrors {
				panic(errStop{})
			}
			poison(s, st)
		}
	}
}

// poison binds the names a failed statement should have bound, so that
// their uses do not report them undefined on top of the real error.
func poison(s *mscope, st lang.Stmt) {
	var names []string
	switch st := st.(type) {
	case *lang.AssignStmt:
		names = st.Names
	case *lang.ParamStmt:
		names = []string{st.Name}
	}
	for _, n := range names {
		if _, ok := s.lookupValue(n); !ok {
			if _, isConst := s.lookupConst(n); !isConst {
				s.values[n] = nil
			}
		}
	}
}

func (el *elab) stmt(s *mscope, st lang.Stmt) {
	switch st := st.(type) {
	case *lang.AssignStmt:
		el.assign(s, st)
	case *lang.ParamStmt:
		el.param(s, st)
	case *lang.UpdateStmt:
		el.update(s, st)
	case *lang.AssertStmt:
		c := el.ev(s).eval(st.Cond)
		if c.kind != cBool {
			el.fail(st.Cond.ExprPos(), "the condition of assert must be a compile-time bool, found %s %s", c.kind, c)
		}
		if !c.b {
			msg := st.Msg
			if msg == "" {
				msg = "assertion failed: " + lang.FormatExpr(st.Cond)
			}
			el.fail(st.Pos, "%s", msg)
		}
	case *lang.ReturnStmt:
		var vals []*ir.Value
		for _, e := range st.Values {
			for _, v := range el.tensorExpr(s, e, "") {
				for _, prev := range vals {
					if prev == v {
						el.fail(e.ExprPos(), "%s is returned twice", v.Name)
					}
				}
				vals = append(vals, v)
			}
		}
		el.ret, el.retPos = vals, st.Pos
	case *lang.ForStmt:
		ev := el.ev(s)
		from, to := ev.constInt(st.From), ev.constInt(st.To)
		if to-from > 1_000_000 {
			el.fail(st.Pos, "a loop of %d iterations is too long", to-from)
		}
		for i := from; i < to; i++ {
			inner := newScope(s, false)
			inner.consts[st.Var] = intVal(i)
			el.stmts(inner, st.Body)
			if el.ret != nil {
				return
			}
		}
	case *lang.IfStmt:
		c := el.ev(s).eval(st.Cond)
		if c.kind != cBool {
			el.fail(st.Cond.ExprPos(), "the condition of if must be a compile-time bool, found %s %s", c.kind, c)
		}
		if c.b {
			el.stmts(newScope(s, false), st.Then)
		} else if st.Else != nil {
			el.stmts(newScope(s, false), st.Else)
		}
	case *lang.BlockStmt:
		if s.blocks[st.Name] != nil {
			el.fail(st.Pos, "block %s is already defined", st.Name)
		}
		s.blocks[st.Name] = &blockDef{decl: st, scope: s}
	}
}

func (el *elab) assign(s *mscope, st *lang.AssignStmt) {
	name := st.Names[0]
	if len(st.Names) == 1 && el.isConstExpr(s, st.Value) {
		if _, isValue := s.lookupValue(name); isValue {
			el.fail(st.Pos, "%s is a tensor; it cannot be rebound to a constant", name)
		}
		s.assignConst(name, el.ev(s).eval(st.Value))
		return
	}
	node := strings.Join(st.Names, ",")
	vals := el.tensorExpr(s, st.Value, node)
	if len(vals) != len(st.Names) {
		el.fail(st.Pos, "%s on the left but the right side gives %s", plural(len(st.Names), "name"), plural(len(vals), "value"))
	}
	for i, n := range st.Names {
		if _, isConst := s.consts[n]; isConst {
			el.fail(st.Pos, "%s is a constant; it cannot be rebound to a tensor", n)
		}
		if len(vals) > 1 && outputOf(vals[i].Name, node) {
			vals[i].Name = el.unique(n) // the outputs of `a, b = split(x)` are a and b
		}
		s.assign(n, vals[i:i+1])
	}
}

// outputOf says whether value name is an output of the node a statement
// binding names (joined by commas) made: PATH/NODE.K:I, where PATH is
// the blocks' path and .K makes the node's name unique.
func outputOf(value, node string) bool {
	at := strings.LastIndexByte(value, ':')
	if at < 0 {
		return false
	}
	name := value[:at]
	name = name[strings.LastIndexByte(name, '/')+1:]
	if name == node {
		return true
	}
	base, k, ok := strings.Cut(strings.TrimPrefix(name, node), ".")
	return ok && base == "" && k != "" && strings.Trim(k, "0123456789") == ""
}

// isConstExpr reports whether e mentions no tensor, operator or block.
func (el *elab) isConstExpr(s *mscope, e lang.Expr) bool {
	switch e := e.(type) {
	case *lang.Num, *lang.BoolLit, *lang.StrLit:
		return true
	case *lang.Ident:
		_, ok := s.lookupConst(e.Name)
		return ok
	case *lang.Paren:
		return el.isConstExpr(s, e.X)
	case *lang.Unary:
		return el.isConstExpr(s, e.X)
	case *lang.Binary:
		return el.isConstExpr(s, e.L) && el.isConstExpr(s, e.R)
	case *lang.List:
		for _, x := range e.Elems {
			if !el.isConstExpr(s, x) {
				return false
			}
		}
		return true
	case *lang.Call:
		if _, ok := builtins[e.Name]; !ok || s.lookupBlock(e.Name) != nil || len(e.Attrs) > 0 {
			return false
		}
		for _, x := range e.Args {
			if !el.isConstExpr(s, x) {
				return false
			}
		}
		return true
	}
	return false
}

var initKinds = map[string][2]int{ // kind -> min, max number of arguments
	"normal": {0, 2}, "uniform": {0, 2}, "zeros": {0, 0}, "ones": {0, 0},
	"const": {1, 1}, "glorot": {0, 0}, "he": {0, 0},
}

func (el *elab) param(s *mscope, st *lang.ParamStmt) {
	dt := lang.F32
	if st.DType != "" {
		if dt = lang.ParseDType(st.DType); dt == lang.Invalid {
			el.fail(st.Pos, "unknown dtype %s%s", st.DType, suggest.DidYouMean(st.DType, lang.DTypeNames()))
		}
	}
	var shape []lang.Dim
	for _, p := range st.Shape {
		if p.Pack != "" || p.Func != nil {
			el.fail(p.Pos, "packs are not allowed in parameter shapes")
		}
		d := el.ev(s).eval(p.Expr)
		n, ok := d.constInt()
		if d.kind == cInt && d.dim.Overflows() {
			el.fail(p.Pos, "this dimension overflows 64-bit integers")
		}
		if !ok || n < 0 {
			el.fail(p.Pos, "a parameter's dimensions must be non-negative constants, found %s", d)
		}
		shape = append(shape, lang.Const(n))
	}
	if p := shapeProblem(dt, shape); p != "" {
		el.fail(st.Pos, "parameter %s: %s", st.Name, p)
	}
	init := ir.Init{Kind: "normal"}
	if !dt.IsFloat() {
		init.Kind = "zeros"
	}
	if st.Init != nil {
		lim, ok := initKinds[st.Init.Name]
		if !ok {
			el.fail(st.Init.Pos, "unknown initialiser %s%s", st.Init.Name, suggest.DidYouMean(st.Init.Name, keys(initKinds)))
		}
		if len(st.Init.Args) < lim[0] || len(st.Init.Args) > lim[1] {
			el.fail(st.Init.Pos, "%s takes %d to %d arguments, found %d", st.Init.Name, lim[0], lim[1], len(st.Init.Args))
		}
		init.Kind = st.Init.Name
		for _, a := range st.Init.Args {
			init.Args = append(init.Args, el.ev(s).toFloat(a.ExprPos(), el.ev(s).eval(a)))
		}
		el.checkInit(st, dt, init)
	}
	v := &ir.Value{Name: el.paramName(st), DType: dt, Shape: shape}
	el.graph.Params = append(el.graph.Params, &ir.Param{Value: v, Init: init, Pos: st.Pos})
	if _, isConst := s.consts[st.Name]; isConst {
		el.fail(st.Pos, "%s is a constant; it cannot be rebound to a parameter", st.Name)
	}
	s.assign(st.Name, []*ir.Value{v})
}

// paramName is a parameter's name in the graph: its label, which must
// not be another value's, or its binding's.
func (el *elab) paramName(st *lang.ParamStmt) string {
	if st.Label == "" {
		return el.unique(st.Name)
	}
	if el.names[st.Label] > 0 {
		el.fail(st.Pos, "parameter name %q is taken", st.Label)
	}
	el.names[st.Label]++
	return st.Label
}

// update records a parameter's value for the next training step.
func (el *elab) update(s *mscope, st *lang.UpdateStmt) {
	vals, ok := s.lookupValue(st.Name)
	var p *ir.Param
	if ok && len(vals) == 1 {
		for _, q := range el.graph.Params {
			if q.Value == vals[0] {
				p = q
			}
		}
	}
	if p == nil {
		el.fail(st.Pos, "update %s: %s", st.Name, el.notParam(s, st.Name))
	}
	if p.Update != nil {
		el.fail(st.Pos, "update %s: %s already has an update (at %s)", st.Name, st.Name, p.UpdatePos)
	}
	v := el.tensorExpr(s, st.Value, st.Name+".update")
	if len(v) != 1 {
		el.fail(st.Pos, "update %s: the right side gives %s, not one tensor", st.Name, plural(len(v), "value"))
	}
	if v[0].DType != p.Value.DType || !lang.ShapeEqual(v[0].Shape, p.Value.Shape) {
		el.fail(st.Pos, "update %s: %s%s for a parameter of %s%s", st.Name, v[0].DType, lang.ShapeString(v[0].Shape), p.Value.DType, lang.ShapeString(p.Value.Shape))
	}
	for _, q := range el.graph.Params {
		if q.Update == v[0] && v[0] != q.Value {
			el.fail(st.Pos, "update %s: %s is already the update of %s", st.Name, v[0].Name, q.Value.Name)
		}
	}
	p.Update, p.UpdatePos = v[0], st.Pos
}

// notParam says what name is, which an update statement took for a
// parameter of the model.
func (el *elab) notParam(s *mscope, name string) string {
	vals, ok := s.lookupValue(name)
	switch {
	case !ok && s.lookupBlock(name) != nil:
		return name + " is a block, not a parameter"
	case !ok:
		if _, isConst := s.lookupConst(name); isConst {
			return name + " is a constant, not a parameter"
		}
		return name + " is not defined here (a parameter of a block is updated inside the block)"
	case len(vals) == 1 && slices.Contains(el.graph.Inputs, vals[0]):
		return name + " is an input of the model, not a parameter"
	}
	return name + " is computed by the model, not a parameter (update the parameter it was bound to before being rebound)"
}

// checkInit rejects initialisers that cannot draw what they say.
func (el *elab) checkInit(st *lang.ParamStmt, dt lang.DType, init ir.Init) {
	switch {
	case init.Kind == "uniform" && len(init.Args) == 2 && init.Args[0] > init.Args[1]:
		el.fail(st.Init.Pos, "uniform(%g, %g): the low bound is above the high one", init.Args[0], init.Args[1])
	case init.Kind == "normal" && len(init.Args) == 2 && init.Args[1] < 0:
		el.fail(st.Init.Pos, "normal(%g, %g): a negative standard deviation", init.Args[0], init.Args[1])
	case !dt.IsFloat() && init.Kind != "zeros" && init.Kind != "ones" && init.Kind != "const":
		el.fail(st.Init.Pos, "%s() draws floats; %s parameter takes zeros(), ones() or const(v)", init.Kind, article(dt.String()))
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// operand is a tensor value or a compile-time scalar awaiting a dtype.
type operand struct {
	vals  []*ir.Value
	c     *cval
	pos   lang.Pos
	isVal bool
}

// tensorExpr evaluates a model expression to graph values; name is the
// binding it is assigned to, used to name the nodes it creates.
func (el *elab) tensorExpr(s *mscope, e lang.Expr, name string) []*ir.Value {
	o := el.operand(s, e, name)
	if !o.isVal {
		return []*ir.Value{el.constValue(*o.c, lang.Invalid, o.pos)}
	}
	return o.vals
}

func (el *elab) operand(s *mscope, e lang.Expr, name string) operand {
	if el.isConstExpr(s, e) {
		c := el.ev(s).eval(e)
		return operand{c: &c, pos: e.ExprPos()}
	}
	switch e := e.(type) {
	case *lang.Ident:
		if v, ok := s.lookupValue(e.Name); ok {
			if v == nil {
				panic(errStop{}) // poisoned by an earlier error, already reported
			}
			return operand{vals: v, pos: e.Pos, isVal: true}
		}
		if s.lookupBlock(e.Name) != nil || el.mod.Op(e.Name) != nil {
			el.fail(e.Pos, "%s must be called: %s(...)", e.Name, e.Name)
		}
		el.fail(e.Pos, "undefined: %s%s", e.Name, suggest.DidYouMean(e.Name, s.names()))
	case *lang.Paren:
		return el.operand(s, e.X, name)
	case *lang.Unary:
		if e.Op == "-" {
			return el.callOp(s, e.Pos, "neg", "-", nil, []lang.Expr{e.X}, name)
		}
		return el.callOp(s, e.Pos, "not", "!", nil, []lang.Expr{e.X}, name)
	case *lang.Binary:
		return el.callOp(s, e.Pos, tensorBinOps[e.Op], e.Op, nil, []lang.Expr{e.L, e.R}, name)
	case *lang.Call:
		if e.Opaque {
			el.fail(e.Pos, "opaque functions can only be used inside operator lambdas")
		}
		if b := s.lookupBlock(e.Name); b != nil {
			return el.callBlock(s, b, e, name)
		}
		return el.callOp(s, e.Pos, e.Name, "", e.Attrs, e.Args, name)
	case *lang.Index:
		el.fail(e.Pos, "tensors cannot be indexed in a model; use slice, gather or split")
	case *lang.Lambda:
		el.fail(e.Pos, "a lambda cannot appear in a model; define an op")
	}
	el.fail(e.ExprPos(), "unexpected expression in a model")
	return operand{}
}

var tensorBinOps = map[string]string{
	"+": "add", "-": "sub", "*": "mul", "/": "div", "%": "mod",
	"<": "less", "<=": "less_equal", ">": "greater", ">=": "greater_equal",
	"==": "equal", "!=": "not_equal", "&&": "and", "||": "or",
}

// constValue makes a rank-0 constant; dt is the dtype of a tensor beside it.
func (el *elab) constValue(c cval, dt lang.DType, pos lang.Pos) *ir.Value {
	v := &ir.Value{Name: el.unique("const"), Const: &ir.ConstData{}}
	switch c.kind {
	case cFloat:
		v.DType, v.Const.Float = lang.F32, c.f
		if dt.IsFloat() {
			v.DType = dt
		}
	case cInt:
		n, ok := c.dim.IsConst()
		if !ok {
			el.fail(pos, "the symbolic dimension %s is not a tensor", c.dim)
		}
		v.DType, v.Const.Int, v.Const.Float = lang.I64, n, float64(n)
		if dt != lang.Invalid && dt != lang.Bool {
			v.DType = dt
		}
	case cBool:
		v.DType = lang.Bool
		if c.b {
			v.Const.Int, v.Const.Float = 1, 1
		}
	default:
		el.fail(pos, "a %s is not a tensor", c.kind)
	}
	return v
}

func (el *elab) callOp(s *mscope, pos lang.Pos, opName, symbol string, attrArgs []*lang.AttrArg, argExprs []lang.Expr, name string) operand {
	decl := el.mod.Op(opName)
	if decl == nil {
		if symbol != "" {
			el.fail(pos, "no operator %s in scope for %s", opName, symbol)
		}
		el.fail(pos, "undefined operator %s%s", opName, suggest.DidYouMean(opName, append(el.mod.OpNames(), s.names()...)))
	}
	attrs := map[string]cval{}
	attrPos := map[string]lang.Pos{}
	for _, a := range attrArgs {
		if _, dup := attrs[a.Name]; dup {
			el.fail(a.Pos, "attribute %s given twice", a.Name)
		}
		attrs[a.Name] = el.ev(s).eval(a.Value)
		attrPos[a.Name] = a.Pos
	}
	ops := make([]operand, len(argExprs))
	for i, a := range argExprs {
		ops[i] = el.operand(s, a, nestedName(name))
		if ops[i].isVal && len(ops[i].vals) != 1 {
			el.fail(a.ExprPos(), "this call gives %d values; bind them with a, b = ... first", len(ops[i].vals))
		}
	}
	args := el.materialise(ops)
	types := make([]TensorType, len(args))
	for i, a := range args {
		types[i] = TensorType{DType: a.DType, Shape: a.Shape}
	}
	before := len(el.errs)
	inst := el.mod.prog.instance(decl, attrs, attrPos, types, pos, &el.errs)
	if inst == nil {
		el.relocate(before, pos, opName)
		panic(errStop{})
	}
	nodeName := name
	if nodeName == "" || strings.HasSuffix(nodeName, ".") {
		nodeName += opName
	}
	node := &ir.Node{Name: el.unique(nodeName), Inst: inst, Inputs: args, Pos: pos, Origin: el.mod.Origins[nodeName]}
	for i, out := range inst.Outputs {
		vname := node.Name
		if len(inst.Outputs) > 1 {
			vname = fmt.Sprintf("%s:%d", node.Name, i)
		}
		node.Outputs = append(node.Outputs, &ir.Value{Name: vname, DType: out.Tensor.DType, Shape: out.Tensor.Shape})
	}
	el.graph.Nodes = append(el.graph.Nodes, node)
	return operand{vals: node.Outputs, pos: pos, isVal: true}
}

// relocate moves the errors from index from on that lie in another file
// (an imported or standard-library operator) to the call site, where the
// user can act on them, saying where they arose; errors in an operator of
// the same file stay there and name the call.
func (el *elab) relocate(from int, site lang.Pos, opName string) {
	for i := from; i < len(el.errs); i++ {
		e := el.errs[i]
		switch {
		case e.Pos.File != site.File:
			el.errs[i] = &lang.Error{Pos: site, Msg: fmt.Sprintf("%s (in %s at %s)", e.Msg, opName, e.Pos)}
		case e.Pos != site:
			// An error in the operator's own text, for this call's attributes
			// or shapes: say which call.
			el.errs[i] = &lang.Error{Pos: e.Pos, Msg: fmt.Sprintf("%s (instantiating %s for the call at %d:%d)", e.Msg, opName, site.Line, site.Col)}
		}
	}
}

// nestedName is the prefix of the nodes an argument of a call creates:
// in `y = relu(conv(x))` the conv node is y.conv.
func nestedName(name string) string {
	if name == "" || strings.HasSuffix(name, ".") {
		return name
	}
	return name + "."
}

// materialise turns constant operands into rank-0 values with the dtype of
// the first tensor operand.
func (el *elab) materialise(ops []operand) []*ir.Value {
	dt := lang.Invalid
	for _, o := range ops {
		if o.isVal {
			dt = o.vals[0].DType
			break
		}
	}
	out := make([]*ir.Value, len(ops))
	for i, o := range ops {
		if o.isVal {
			out[i] = o.vals[0]
		} else {
			out[i] = el.constValue(*o.c, dt, o.pos)
		}
	}
	return out
}

func (el *elab) callBlock(s *mscope, b *blockDef, call *lang.Call, name string) operand {
	d := b.decl
	if len(call.Args) != len(d.Params) {
		el.fail(call.Pos, "block %s takes %d arguments, found %d", d.Name, len(d.Params), len(call.Args))
	}
	if el.depth >= maxBlockDepth {
		el.fail(call.Pos, "blocks nested more than %d deep (recursion?)", maxBlockDepth)
	}
	inner := newScope(b.scope, true)
	given := map[string]cval{}
	for _, a := range call.Attrs {
		given[a.Name] = el.ev(s).eval(a.Value)
	}
	var names []string
	for _, a := range d.Attrs {
		names = append(names, a.Name)
	}
	for n := range given {
		if !contains(names, n) {
			el.fail(call.Pos, "block %s has no attribute %s%s", d.Name, n, suggest.DidYouMean(n, names))
		}
	}
	for _, a := range d.Attrs {
		v, ok := given[a.Name]
		switch {
		case ok:
		case a.Default != nil:
			v = el.ev(inner).eval(a.Default)
		default:
			el.fail(call.Pos, "block %s needs attribute %s", d.Name, a.Name)
		}
		inner.consts[a.Name] = v
	}
	for i, p := range d.Params {
		inner.values[p] = el.tensorExpr(s, call.Args[i], name)
	}
	if name == "" || strings.HasSuffix(name, ".") {
		name += d.Name
	}
	savedPath, savedRet := el.path, el.ret
	el.path = append(append([]string(nil), el.path...), strings.TrimPrefix(el.unique(name), strings.Join(el.path, "/")+"/"))
	el.ret = nil
	el.depth++
	defer func() { el.path, el.ret = savedPath, savedRet; el.depth-- }()
	before := len(el.errs)
	el.stmts(inner, d.Body)
	if el.ret == nil {
		if len(el.errs) > before {
			panic(errStop{}) // the block's own errors explain it
		}
		el.fail(d.End, "block %s has no return statement", d.Name)
	}
	return operand{vals: el.ret, pos: call.Pos, isVal: true}
}

// plural says "1 name", "2 names", "2 entries".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	if strings.HasSuffix(noun, "y") {
		return fmt.Sprintf("%d %sies", n, strings.TrimSuffix(noun, "y"))
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}
