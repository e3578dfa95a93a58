package ir

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"tofuc/lang"
)

// FormatTDL prints an instance as a TDL operator declaration named name,
// which `tofuc check` accepts on its own: inputs and outputs with their
// dtypes and shapes, locals as `let`, reductions with explicit extents,
// and every variable named uniquely. Shapes must be constants or bare
// shape symbols on the inputs (as an operator checked on its own has).
func FormatTDL(inst *Instance, name string) string {
	p := &tdlPrinter{names: map[*Var]string{}, used: map[string]bool{}}
	for _, t := range inst.Inputs {
		p.used[t.Name] = true
	}
	for _, d := range append(append([]*Def(nil), inst.Locals...), inst.Outputs...) {
		p.used[d.Tensor.Name] = true
	}
	var b strings.Builder
	ins := make([]string, len(inst.Inputs))
	for i, t := range inst.Inputs {
		ins[i] = t.Name + ": " + tensorType(t)
	}
	outs := make([]string, len(inst.Outputs))
	for i, d := range inst.Outputs {
		outs[i] = d.Tensor.Name + ": " + tensorType(d.Tensor)
	}
	fmt.Fprintf(&b, "op %s(%s) -> (%s) =\n", name, strings.Join(ins, ", "), strings.Join(outs, ", "))
	for _, d := range inst.Locals {
		fmt.Fprintf(&b, "    let %s: %s = %s in\n", d.Tensor.Name, shape(d.Tensor.Shape), p.lambda(d))
	}
	bodies := make([]string, len(inst.Outputs))
	for i, d := range inst.Outputs {
		bodies[i] = p.lambda(d)
	}
	fmt.Fprintf(&b, "    (%s)\n", strings.Join(bodies, ",\n     "))
	return b.String()
}

func tensorType(t *Tensor) string { return t.DType.String() + shape(t.Shape) }

func shape(s []lang.Dim) string { return lang.ShapeString(s) }

type tdlPrinter struct {
	names map[*Var]string
	used  map[string]bool
}

// name gives each variable a name of its own.
func (p *tdlPrinter) name(v *Var) string {
	if n, ok := p.names[v]; ok {
		return n
	}
	base := v.Name
	if base == "" {
		base = "v"
	}
	n := base
	for k := 1; p.used[n] || keyword[n]; k++ {
		n = fmt.Sprintf("%s_%d", base, k)
	}
	p.used[n] = true
	p.names[v] = n
	return n
}

var keyword = map[string]bool{
	"op": true, "model": true, "rule": true, "import": true, "lambda": true, "let": true, "in": true,
	"param": true, "init": true, "return": true, "for": true, "if": true, "else": true, "block": true,
	"opaque": true, "assert": true, "true": true, "false": true, "inf": true, "nan": true,
}

func (p *tdlPrinter) lambda(d *Def) string {
	vars := make([]string, len(d.Vars))
	for i, v := range d.Vars {
		vars[i] = p.name(v)
	}
	return "lambda " + strings.Join(vars, ", ") + ": " + p.expr(d.Body)
}

func (p *tdlPrinter) list(es []Expr) string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = p.expr(e)
	}
	return strings.Join(parts, ", ")
}

// Precedence levels of TDL expressions (docs/tdl.md), loosest first: an
// operand is parenthesised only where the grammar needs it.
const (
	precOr = iota + 1
	precAnd
	precCompare
	precAdd
	precMul
	precUnary
	precPostfix // accesses (with else), calls, literals, names
)

var binOpPrec = [...]int{OpAdd: precAdd, OpSub: precAdd, OpMul: precMul, OpDiv: precMul, OpMod: precMul,
	OpEq: precCompare, OpNe: precCompare, OpLt: precCompare, OpLe: precCompare, OpGt: precCompare, OpGe: precCompare,
	OpAnd: precAnd, OpOr: precOr}

func (p *tdlPrinter) expr(e Expr) string {
	s, _ := p.prec(e)
	return s
}

// operand prints e where the grammar needs at least precedence min.
func (p *tdlPrinter) operand(e Expr, min int) string {
	s, prec := p.prec(e)
	if prec < min {
		return "(" + s + ")"
	}
	return s
}

// binary prints l op r; operators are left-associative, so the right
// operand binds tighter (and comparisons do not chain).
func (p *tdlPrinter) binary(l Expr, op BinOp, r Expr) (string, int) {
	prec := binOpPrec[op]
	left := prec
	if prec == precCompare {
		left++
	}
	return p.operand(l, left) + " " + op.String() + " " + p.operand(r, prec+1), prec
}

// prec prints e and gives its precedence.
func (p *tdlPrinter) prec(e Expr) (string, int) {
	switch e := e.(type) {
	case *Const:
		if s := constant(e); !strings.HasPrefix(s, "(") {
			return s, precPostfix
		} else {
			return s[1 : len(s)-1], precUnary // a negative literal
		}
	case *Size:
		return sizeString(e.D)
	case *VarRef:
		return p.name(e.V), precPostfix
	case *Access:
		s := e.T.Name + "[" + p.list(e.Index) + "]"
		if e.Default != nil {
			s += " else " + p.operand(e.Default, precUnary)
		}
		return s, precPostfix
	case *Binary:
		if x, ok := negated(e.R); ok && e.Op == OpAdd {
			return p.binary(e.L, OpSub, x) // index arithmetic a + b*(-1)
		}
		if x, ok := negated(e); ok {
			return "-" + p.operand(x, precUnary), precUnary
		}
		return p.binary(e.L, e.Op, e.R)
	case *Unary:
		if e.Op == "-" || e.Op == "!" {
			return e.Op + p.operand(e.X, precUnary), precUnary
		}
		return e.Op + "(" + p.expr(e.X) + ")", precPostfix
	case *Call:
		return e.Fn + "(" + p.list(e.Args) + ")", precPostfix
	case *Select:
		return "select(" + p.expr(e.C) + ", " + p.expr(e.A) + ", " + p.expr(e.B) + ")", precPostfix
	case *Cast:
		return e.T.String() + "(" + p.expr(e.X) + ")", precPostfix
	case *Reduce:
		vars := make([]string, len(e.Vars))
		for i, v := range e.Vars {
			vars[i] = p.name(v) + " < " + e.Vars[i].Extent.String()
		}
		return e.Kind.String() + "(lambda " + strings.Join(vars, ", ") + ": " + p.expr(e.Body) + ")", precPostfix
	case *Opaque:
		args := make([]string, len(e.Args))
		for i, v := range e.Args {
			idx := make([]string, len(v.Index))
			for j, x := range v.Index {
				idx[j] = ":"
				if x != nil {
					idx[j] = p.expr(x)
				}
			}
			args[i] = v.T.Name + "[" + strings.Join(idx, ", ") + "]"
		}
		return "opaque " + e.Fn + "(" + strings.Join(args, ", ") + ")[" + p.list(e.Index) + "]", precPostfix
	}
	return "?", precPostfix
}

// sizeString prints a dimension used as a value: a name or a number as it
// is, anything else as a sum (the loosest form Dim.String writes).
func sizeString(d lang.Dim) (string, int) {
	if n, ok := d.IsConst(); ok {
		if n < 0 {
			return strconv.FormatInt(n, 10), precUnary
		}
		return strconv.FormatInt(n, 10), precPostfix
	}
	if syms := d.Symbols(); len(syms) == 1 && syms[0] == d.String() {
		return d.String(), precPostfix
	}
	return d.String(), precAdd
}

// negated recognises x * -1, as index builders write a negation.
func negated(e Expr) (Expr, bool) {
	b, ok := e.(*Binary)
	if !ok || b.Op != OpMul {
		return nil, false
	}
	if k, ok := ConstInt(b.R); ok && k == -1 {
		return b.L, true
	}
	return nil, false
}

// constant prints a constant as a TDL literal of the same kind: floats
// always with a point or an exponent.
func constant(k *Const) string {
	switch {
	case k.T == lang.Bool:
		return strconv.FormatBool(k.Int != 0)
	case !k.T.IsFloat():
		if k.Int < 0 {
			return "(" + strconv.FormatInt(k.Int, 10) + ")"
		}
		return strconv.FormatInt(k.Int, 10)
	case math.IsNaN(k.Float):
		return "nan"
	case math.IsInf(k.Float, 1):
		return "inf"
	case math.IsInf(k.Float, -1):
		return "(-inf)"
	}
	s := strconv.FormatFloat(math.Abs(k.Float), 'g', -1, 64)
	if !strings.ContainsAny(s, ".e") {
		s += ".0"
	}
	if strings.Contains(s, "e") && !strings.Contains(s, ".") {
		s = strings.Replace(s, "e", ".0e", 1)
	}
	if k.Float < 0 || math.Signbit(k.Float) {
		return "(-" + s + ")"
	}
	return s
}
