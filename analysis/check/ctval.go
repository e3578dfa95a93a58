package check

import (
	"fmt"
	"math"
	"strings"

	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/lang/suggest"
)

// cval is a compile-time value: an attribute, a shape symbol or extent, a
// pack of extents, or (inside operator bodies) index expressions.
type cval struct {
	kind  ckind
	dim   lang.Dim // cInt
	f     float64  // cFloat
	b     bool     // cBool
	s     string   // cString
	list  []cval   // cList
	exprs []ir.Expr
}

type ckind uint8

const (
	cInt ckind = iota
	cFloat
	cBool
	cString
	cList
	cIndex // a list of index expressions (a spliced pack of index variables)
)

func (k ckind) String() string {
	return [...]string{"int", "float", "bool", "string", "list", "index pack"}[k]
}

func intVal(n int64) cval    { return cval{kind: cInt, dim: lang.Const(n)} }
func dimVal(d lang.Dim) cval { return cval{kind: cInt, dim: d} }
func dimsVal(ds []lang.Dim) cval {
	l := make([]cval, len(ds))
	for i, d := range ds {
		l[i] = dimVal(d)
	}
	return cval{kind: cList, list: l}
}

func (v cval) String() string {
	switch v.kind {
	case cInt:
		return v.dim.String()
	case cFloat:
		return fmt.Sprint(v.f)
	case cBool:
		return fmt.Sprint(v.b)
	case cString:
		return fmt.Sprintf("%q", v.s)
	case cList:
		parts := make([]string, len(v.list))
		for i, e := range v.list {
			parts[i] = e.String()
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	return fmt.Sprintf("<%d index expressions>", len(v.exprs))
}

// constInt returns the value of a constant integer.
func (v cval) constInt() (int64, bool) {
	if v.kind != cInt {
		return 0, false
	}
	return v.dim.IsConst()
}

// dims returns the list as dimensions, if every element is an integer.
func (v cval) dims() ([]lang.Dim, bool) {
	if v.kind != cList {
		return nil, false
	}
	out := make([]lang.Dim, len(v.list))
	for i, e := range v.list {
		if e.kind != cInt {
			return nil, false
		}
		out[i] = e.dim
	}
	return out, true
}

// ints returns the list as constant integers.
func (v cval) ints() ([]int64, bool) {
	ds, ok := v.dims()
	if !ok {
		return nil, false
	}
	out := make([]int64, len(ds))
	for i, d := range ds {
		n, ok := d.IsConst()
		if !ok {
			return nil, false
		}
		out[i] = n
	}
	return out, true
}

// toAttr converts a compile-time value to an IR attribute value.
func (v cval) toAttr() (ir.AttrValue, bool) {
	switch v.kind {
	case cInt:
		n, ok := v.dim.IsConst()
		return ir.AttrValue{Kind: ir.AttrInt, Int: n}, ok
	case cFloat:
		return ir.AttrValue{Kind: ir.AttrFloat, Float: v.f}, true
	case cBool:
		return ir.AttrValue{Kind: ir.AttrBool, Bool: v.b}, true
	case cString:
		return ir.AttrValue{Kind: ir.AttrString, Str: v.s}, true
	case cList:
		out := ir.AttrValue{Kind: ir.AttrList}
		for _, e := range v.list {
			a, ok := e.toAttr()
			if !ok {
				return out, false
			}
			out.List = append(out.List, a)
		}
		return out, true
	}
	return ir.AttrValue{}, false
}

func fromAttr(a ir.AttrValue) cval {
	switch a.Kind {
	case ir.AttrInt:
		return intVal(a.Int)
	case ir.AttrFloat:
		return cval{kind: cFloat, f: a.Float}
	case ir.AttrBool:
		return cval{kind: cBool, b: a.Bool}
	case ir.AttrString:
		return cval{kind: cString, s: a.Str}
	}
	l := cval{kind: cList}
	for _, e := range a.List {
		l.list = append(l.list, fromAttr(e))
	}
	return l
}

// env resolves names for compile-time evaluation.
type env interface {
	lookupConst(name string) (cval, bool)
	names() []string // every visible name, for "did you mean"
}

// evaluator evaluates compile-time expressions: attribute values, shape
// dimensions and the arguments of shape functions.
type evaluator struct {
	env  env
	errs *lang.ErrorList
}

// errStop aborts evaluation of one expression after its error was reported.
type errStop struct{}

func (ev *evaluator) fail(pos lang.Pos, format string, args ...any) {
	ev.errs.Add(pos, format, args...)
	panic(errStop{})
}

// try runs f, turning a reported failure into ok == false.
func try(f func()) (ok bool) {
	defer func() {
		if r := recover(); r != nil {
			if _, stop := r.(errStop); !stop {
				panic(r)
			}
			ok = false
		}
	}()
	f()
	return true
}

func (ev *evaluator) eval(e lang.Expr) cval {
	switch e := e.(type) {
	case *lang.Num:
		if e.IsFloat {
			return cval{kind: cFloat, f: e.Float}
		}
		return intVal(e.Int)
	case *lang.BoolLit:
		return cval{kind: cBool, b: e.Value}
	case *lang.StrLit:
		return cval{kind: cString, s: e.Value}
	case *lang.Paren:
		return ev.eval(e.X)
	case *lang.List:
		l := cval{kind: cList}
		for _, x := range e.Elems {
			l.list = append(l.list, ev.eval(x))
		}
		return l
	case *lang.Ident:
		if v, ok := ev.env.lookupConst(e.Name); ok {
			return v
		}
		if v, ok := predeclared[e.Name]; ok {
			return v
		}
		ev.fail(e.Pos, "undefined: %s%s", e.Name, suggest.DidYouMean(e.Name, ev.env.names()))
	case *lang.Unary:
		x := ev.eval(e.X)
		switch {
		case e.Op == "-" && x.kind == cInt:
			return dimVal(x.dim.Neg())
		case e.Op == "-" && x.kind == cFloat:
			return cval{kind: cFloat, f: -x.f}
		case e.Op == "!" && x.kind == cBool:
			return cval{kind: cBool, b: !x.b}
		}
		ev.fail(e.Pos, "cannot apply %s to a %s", e.Op, x.kind)
	case *lang.Binary:
		return ev.binary(e)
	case *lang.Call:
		return ev.call(e)
	case *lang.Index:
		return ev.listIndex(e)
	case *lang.Lambda:
		ev.fail(e.Pos, "a lambda is not a compile-time value")
	}
	ev.fail(e.ExprPos(), "expected a compile-time value")
	return cval{}
}

func (ev *evaluator) listIndex(e *lang.Index) cval {
	x := ev.eval(e.X)
	if x.kind != cList || len(e.Idx) != 1 || e.Idx[0].Expr == nil {
		ev.fail(e.Pos, "only a list can be indexed at compile time, with one index")
	}
	i := ev.constInt(e.Idx[0].Expr)
	if i < 0 {
		i += int64(len(x.list))
	}
	if i < 0 || i >= int64(len(x.list)) {
		ev.fail(e.Pos, "index %d out of range for a list of %d", i, len(x.list))
	}
	return x.list[i]
}

func (ev *evaluator) constInt(e lang.Expr) int64 {
	v := ev.eval(e)
	n, ok := v.constInt()
	if !ok {
		ev.fail(e.ExprPos(), "expected a constant integer, found %s %s", v.kind, v)
	}
	return n
}

func (ev *evaluator) binary(e *lang.Binary) cval {
	l := ev.eval(e.L)
	if (e.Op == "&&" || e.Op == "||") && l.kind == cBool && l.b == (e.Op == "||") {
		// Decided by its left operand, which short-circuits as at run
		// time: `len(sizes) == 0 || sizes[0] > 0` guards the read, and
		// `causal && j > i` is false when causal is, though j and i vary.
		return l
	}
	r := ev.eval(e.R)
	switch e.Op {
	case "&&", "||":
		if l.kind != cBool || r.kind != cBool {
			ev.fail(e.Pos, "%s needs two bools, found %s and %s", e.Op, l.kind, r.kind)
		}
		if e.Op == "&&" {
			return cval{kind: cBool, b: l.b && r.b}
		}
		return cval{kind: cBool, b: l.b || r.b}
	}
	if l.kind == cInt && r.kind == cInt {
		return ev.intBinary(e, l.dim, r.dim)
	}
	if l.kind == cIndex || r.kind == cIndex {
		// Index variables vary: arithmetic on them builds index
		// expressions; anything else is not a compile-time value.
		if (l.kind == cInt || l.kind == cIndex) && (r.kind == cInt || r.kind == cIndex) {
			return ev.indexBinary(e, l, r)
		}
		ev.fail(e.Pos, "%s on index variables is not a compile-time value", e.Op)
	}
	if (l.kind == cInt || l.kind == cFloat) && (r.kind == cInt || r.kind == cFloat) {
		return ev.floatBinary(e, ev.toFloat(e.L.ExprPos(), l), ev.toFloat(e.R.ExprPos(), r))
	}
	if e.Op == "==" || e.Op == "!=" {
		eq := l.String() == r.String() && l.kind == r.kind
		return cval{kind: cBool, b: eq == (e.Op == "==")}
	}
	if e.Op == "+" && l.kind == cList && r.kind == cList {
		return cval{kind: cList, list: append(append([]cval(nil), l.list...), r.list...)}
	}
	ev.fail(e.Pos, "cannot apply %s to %s and %s", e.Op, l.kind, r.kind)
	return cval{}
}

// indexBinary builds index arithmetic on index variables at compile time,
// as in a list of indices `[o / 2 + c]`.
func (ev *evaluator) indexBinary(e *lang.Binary, l, r cval) cval {
	a, b := ev.asIndex(l), ev.asIndex(r)
	switch e.Op {
	case "+":
		return idxVal(ir.IndexAdd(a, b))
	case "-":
		return idxVal(ir.IndexAdd(a, ir.IndexBin(ir.OpMul, b, ir.IndexConst(-1))))
	case "*":
		return idxVal(ir.IndexBin(ir.OpMul, a, b))
	case "/":
		return idxVal(ir.IndexBin(ir.OpDiv, a, b))
	case "%":
		return idxVal(ir.IndexBin(ir.OpMod, a, b))
	}
	ev.fail(e.Pos, "%s on index variables is not a compile-time value; write it in the lambda", e.Op)
	return cval{}
}

func (ev *evaluator) asIndex(v cval) ir.Expr {
	if v.kind == cIndex {
		return v.exprs[0]
	}
	return ir.IndexDim(v.dim)
}

// predeclared names, visible unless an attribute or symbol shadows them.
var predeclared = map[string]cval{
	"inf": {kind: cFloat, f: math.Inf(1)},
	"nan": {kind: cFloat, f: math.NaN()},
}

func (ev *evaluator) toFloat(pos lang.Pos, v cval) float64 {
	switch v.kind {
	case cFloat:
		return v.f
	case cInt:
	case cIndex:
		ev.fail(pos, "an index is not a compile-time number: convert it in a lambda with f32(...) or f64(...)")
	default:
		ev.fail(pos, "expected a number, found %s %s", v.kind, v)
	}
	n, ok := v.dim.IsConst()
	if !ok {
		ev.fail(pos, "the symbolic dimension %s has no value at compile time", v.dim)
	}
	return float64(n)
}

func (ev *evaluator) intBinary(e *lang.Binary, a, b lang.Dim) cval {
	switch e.Op {
	case "+":
		return dimVal(a.Add(b))
	case "-":
		return dimVal(a.Sub(b))
	case "*":
		return dimVal(a.Mul(b))
	case "/", "%":
		c, ok := b.IsConst()
		if !ok {
			ev.fail(e.Pos, "dimensions can only be divided by constants, not by %s", b)
		}
		if c <= 0 {
			if x, ok := a.IsConst(); ok && c != 0 {
				// Constant operands: C-like truncation, as in integer TDL.
				if e.Op == "/" {
					return intVal(x / c)
				}
				return intVal(x % c)
			}
			ev.fail(e.Pos, "division of a dimension by %d", c)
		}
		if e.Op == "/" {
			return dimVal(a.FloorDiv(c))
		}
		return dimVal(a.Mod(c))
	}
	d := a.Sub(b)
	n, ok := d.IsConst()
	if !ok {
		if e.Op == "==" || e.Op == "!=" {
			return cval{kind: cBool, b: (e.Op == "==") == a.Equal(b)}
		}
		ev.fail(e.Pos, "cannot compare %s with %s at compile time", a, b)
	}
	return cval{kind: cBool, b: compareInt(e.Op, n)}
}

// compareInt evaluates `d op 0`.
func compareInt(op string, d int64) bool {
	switch op {
	case "==":
		return d == 0
	case "!=":
		return d != 0
	case "<":
		return d < 0
	case "<=":
		return d <= 0
	case ">":
		return d > 0
	}
	return d >= 0
}

func (ev *evaluator) floatBinary(e *lang.Binary, a, b float64) cval {
	switch e.Op {
	case "+":
		return cval{kind: cFloat, f: a + b}
	case "-":
		return cval{kind: cFloat, f: a - b}
	case "*":
		return cval{kind: cFloat, f: a * b}
	case "/":
		return cval{kind: cFloat, f: a / b}
	case "%":
		ev.fail(e.Pos, "%% needs integers")
	}
	var d int64
	switch {
	case a < b:
		d = -1
	case a > b:
		d = 1
	}
	return cval{kind: cBool, b: compareInt(e.Op, d)}
}

// article puts "a" or "an" before a word.
func article(word string) string {
	if word != "" && strings.ContainsRune("aeiou", rune(word[0])) {
		return "an " + word
	}
	return "a " + word
}
