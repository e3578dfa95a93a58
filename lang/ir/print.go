package ir

import (
	"fmt"
	"strconv"
	"strings"

	"tofuc/lang"
)

// String prints an instance as fixed-rank TDL-like text, for debugging,
// golden tests and error messages.
func (in *Instance) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "instance %s", in.Op)
	if len(in.Attrs) > 0 {
		parts := make([]string, len(in.Attrs))
		for i, a := range in.Attrs {
			parts[i] = a.Name + " = " + a.Value.String()
		}
		fmt.Fprintf(&b, "<%s>", strings.Join(parts, ", "))
	}
	ins := make([]string, len(in.Inputs))
	for i, t := range in.Inputs {
		ins[i] = t.Name + ": " + t.DType.String() + lang.ShapeString(t.Shape)
	}
	fmt.Fprintf(&b, "(%s)\n", strings.Join(ins, ", "))
	for _, d := range in.Locals {
		fmt.Fprintf(&b, "  let %s\n", d)
	}
	for _, d := range in.Outputs {
		fmt.Fprintf(&b, "  out %s\n", d)
	}
	return b.String()
}

func (d *Def) String() string {
	vars := make([]string, len(d.Vars))
	for i, v := range d.Vars {
		vars[i] = v.Name
	}
	return fmt.Sprintf("%s: %s%s = lambda %s: %s", d.Tensor.Name, d.Tensor.DType, lang.ShapeString(d.Tensor.Shape), strings.Join(vars, ", "), ExprString(d.Body))
}

func (a AttrValue) String() string {
	switch a.Kind {
	case AttrInt:
		return strconv.FormatInt(a.Int, 10)
	case AttrFloat:
		return strconv.FormatFloat(a.Float, 'g', -1, 64)
	case AttrBool:
		return strconv.FormatBool(a.Bool)
	case AttrString:
		return strconv.Quote(a.Str)
	}
	parts := make([]string, len(a.List))
	for i, e := range a.List {
		parts[i] = e.String()
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// ExprString prints an IR expression with full parentheses.
func ExprString(e Expr) string {
	switch e := e.(type) {
	case *Const:
		if e.T.IsFloat() {
			return strconv.FormatFloat(e.Float, 'g', -1, 64)
		}
		if e.T == lang.Bool {
			return strconv.FormatBool(e.Int != 0)
		}
		return strconv.FormatInt(e.Int, 10)
	case *Size:
		return "(" + e.D.String() + ")"
	case *VarRef:
		return e.V.Name
	case *Access:
		s := e.T.Name + "[" + exprList(e.Index) + "]"
		if e.Default != nil {
			s = "(" + s + " else " + ExprString(e.Default) + ")"
		}
		return s
	case *Binary:
		return "(" + ExprString(e.L) + " " + e.Op.String() + " " + ExprString(e.R) + ")"
	case *Unary:
		return e.Op + ExprString(e.X)
	case *Call:
		return e.Fn + "(" + exprList(e.Args) + ")"
	case *Select:
		return "select(" + ExprString(e.C) + ", " + ExprString(e.A) + ", " + ExprString(e.B) + ")"
	case *Cast:
		return e.T.String() + "(" + ExprString(e.X) + ")"
	case *Reduce:
		vars := make([]string, len(e.Vars))
		for i, v := range e.Vars {
			vars[i] = v.Name + " < " + v.Extent.String()
		}
		return e.Kind.String() + "(lambda " + strings.Join(vars, ", ") + ": " + ExprString(e.Body) + ")"
	case *Opaque:
		args := make([]string, len(e.Args))
		for i, v := range e.Args {
			idx := make([]string, len(v.Index))
			for j, x := range v.Index {
				idx[j] = ":"
				if x != nil {
					idx[j] = ExprString(x)
				}
			}
			args[i] = v.T.Name + "[" + strings.Join(idx, ", ") + "]"
		}
		return "opaque " + e.Fn + "(" + strings.Join(args, ", ") + ")[" + exprList(e.Index) + "]"
	}
	return "?"
}

func exprList(es []Expr) string {
	parts := make([]string, len(es))
	for i, x := range es {
		parts[i] = ExprString(x)
	}
	return strings.Join(parts, ", ")
}
