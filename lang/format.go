package lang

import (
	"bytes"
	"fmt"
	"strings"
)

// The canonical printer behind `tofuc fmt`. Formatting depends only on the
// syntax tree, the comments and where the source had blank lines, so it is
// a fixed point: formatting formatted text changes nothing.

const (
	indentUnit = "    "
	lineWidth  = 100
)

// FormatExpr prints an expression canonically on one line.
func FormatExpr(e Expr) string {
	var p printer
	p.expr(e)
	return unbroken(p.String())
}

// FormatShape prints a shape pattern, e.g. "[*A:axis, N, *B]".
func FormatShape(s []DimPat) string {
	var p printer
	p.shape(s)
	return p.String()
}

// Format prints a parsed file canonically; src is its text, consulted only
// for blank lines between declarations and statements.
func Format(f *File, src []byte) []byte {
	lines := bytes.Split(src, []byte("\n"))
	fm := &formatter{comments: f.Comments, lines: lines}
	for i, d := range f.Order {
		fm.leading(d.DeclPos(), i > 0, "")
		var p printer
		switch d := d.(type) {
		case *Import:
			p.printf("import %q", d.Path)
			fm.emit(p.String(), d.Pos, "")
		case *OpDecl:
			fm.op(d)
		case *ModelDecl:
			fm.model(d)
		case *RuleDecl:
			fm.rule(d)
		}
	}
	fm.leading(Pos{Line: len(lines) + 1}, true, "")
	return fm.out.Bytes()
}

type formatter struct {
	out      bytes.Buffer
	comments []Comment
	next     int // first comment not yet printed
	lines    [][]byte
}

// blankBefore reports whether the source line before line (1-based) is blank.
func (fm *formatter) blankBefore(line int) bool {
	i := line - 2
	return i >= 0 && i < len(fm.lines) && len(bytes.TrimSpace(fm.lines[i])) == 0
}

// leading prints the comments before pos, and a blank line where the source
// had one before the comments or the code.
func (fm *formatter) leading(pos Pos, allowBlank bool, indent string) {
	for fm.next < len(fm.comments) && fm.comments[fm.next].Pos.Line < pos.Line {
		c := fm.comments[fm.next]
		fm.next++
		if allowBlank && fm.blankBefore(c.Pos.Line) {
			fm.out.WriteString("\n")
		}
		fm.out.WriteString(indent + c.Text + "\n")
		allowBlank = true
	}
	if allowBlank && pos.Line <= len(fm.lines) && fm.blankBefore(pos.Line) {
		fm.out.WriteString("\n")
	}
}

// commentBefore reports whether a comment not yet printed stands on a line
// before pos (inside a declaration: it must stay there).
func (fm *formatter) commentBefore(pos Pos) bool {
	return fm.next < len(fm.comments) && fm.comments[fm.next].Pos.Line < pos.Line
}

// emit writes code that started at pos, with the trailing comment of that
// line if there is one.
func (fm *formatter) emit(code string, pos Pos, indent string) {
	fm.out.WriteString(indent + code)
	if fm.next < len(fm.comments) {
		c := fm.comments[fm.next]
		if c.Trailing && c.Pos.Line == pos.Line {
			fm.out.WriteString("  " + c.Text)
			fm.next++
		}
	}
	fm.out.WriteString("\n")
}

func (fm *formatter) op(d *OpDecl) {
	var head printer
	head.printf("op %s", d.Name)
	head.attrDecls(d.Attrs)
	head.tensors(d.Inputs)
	head.printf(" -> ")
	if len(d.Outputs) == 1 && d.Outputs[0].Name == "" {
		head.tensor(d.Outputs[0])
	} else {
		head.tensors(d.Outputs)
	}
	head.printf(" =")
	var body printer
	if len(d.Bodies) == 1 {
		body.expr(d.Bodies[0])
	} else {
		body.exprList("(", d.Bodies, ")")
	}
	oneLine := head.String() + " " + unbroken(body.String())
	if len(d.Lets) == 0 && len(oneLine) <= lineWidth && !fm.commentBefore(d.Bodies[0].ExprPos()) {
		fm.emit(oneLine, d.Pos, "")
		return
	}
	if h := head.String(); len(h) > lineWidth {
		// Put the output shape on a line of its own.
		at := strings.LastIndex(h, " -> ")
		fm.emit(h[:at], d.Pos, "")
		fm.out.WriteString(indentUnit + h[at+1:] + "\n")
	} else {
		fm.emit(h, d.Pos, "")
	}
	for _, l := range d.Lets {
		var p printer
		p.printf("let %s", l.Name)
		if l.Shape != nil {
			p.printf(": ")
			p.shape(l.Shape)
		}
		p.printf(" = ")
		p.expr(l.Value)
		p.printf(" in")
		fm.leading(l.Pos, false, indentUnit)
		fm.emit(breakLine(p.String(), indentUnit), l.Pos, indentUnit)
	}
	fm.leading(d.Bodies[0].ExprPos(), false, indentUnit)
	if len(d.Bodies) > 1 && len(indentUnit)+len(unbroken(body.String())) > lineWidth {
		// One output's lambda per line.
		parts := make([]string, len(d.Bodies))
		for i, e := range d.Bodies {
			var p printer
			p.expr(e)
			parts[i] = unbroken(p.String())
		}
		body = printer{}
		body.printf("(%s)", strings.Join(parts, ",\n"+indentUnit+" "))
	}
	fm.emit(breakLine(body.String(), indentUnit), d.Bodies[0].ExprPos(), indentUnit)
}

// lambdaBreak marks where a line may break: after the colon of a lambda
// nested in another expression.
const lambdaBreak = "\x00"

func unbroken(s string) string { return strings.ReplaceAll(s, lambdaBreak, "") }

// breakLine breaks a line that is too long after its first nested lambda's
// colon, indenting the rest one more level, and the rest likewise while it
// is too long (derived operators nest many reductions on a line); a line
// with no nested lambda left breaks after its outermost additions
// (breakSums).
func breakLine(s, indent string) string {
	if len(indent)+len(unbroken(s)) <= lineWidth {
		return unbroken(s)
	}
	first, rest, ok := strings.Cut(s, lambdaBreak)
	if !ok {
		return breakSums(s, indent, indent+indentUnit)
	}
	return first + "\n" + indent + indentUnit + breakRest(strings.TrimLeft(rest, " "), indent+indentUnit)
}

func breakRest(s, indent string) string {
	if len(indent)+len(unbroken(s)) <= lineWidth {
		return unbroken(s)
	}
	first, rest, ok := strings.Cut(s, lambdaBreak)
	if !ok {
		return breakSums(s, indent, indent)
	}
	return first + "\n" + indent + breakRest(strings.TrimLeft(rest, " "), indent)
}

// breakSums breaks s, a line starting at indent, after the last " + "
// outside brackets and strings that leaves the line within lineWidth
// (else after the first), the rest at next, likewise while it is too
// long: a derived operator's sum of terms, reductions read from locals,
// has no lambda to break after.
func breakSums(s, indent, next string) string {
	if len(indent)+len(s) <= lineWidth {
		return s
	}
	at, depth, quoted := -1, 0, false
	for i := 0; i < len(s); i++ {
		if quoted {
			quoted = s[i] != '"' || s[i-1] == '\\'
			continue
		}
		switch s[i] {
		case '"':
			quoted = true
		case '(', '[':
			depth++
		case ')', ']':
			depth--
		case '+':
			if depth == 0 && i > 0 && s[i-1] == ' ' && i+1 < len(s) && s[i+1] == ' ' && (at < 0 || len(indent)+i+1 <= lineWidth) {
				at = i
			}
		}
	}
	if at < 0 {
		return s
	}
	return s[:at+1] + "\n" + next + breakSums(s[at+2:], next, next)
}

func (fm *formatter) model(d *ModelDecl) {
	var head printer
	head.printf("model %s", d.Name)
	head.attrDecls(d.Attrs)
	head.tensors(d.Inputs)
	head.printf(" {")
	fm.emit(head.String(), d.Pos, "")
	fm.stmts(d.Body, d.End, indentUnit)
	fm.emit("}", d.End, "")
}

func (fm *formatter) rule(d *RuleDecl) {
	var p printer
	p.printf("rule %s", d.Name)
	p.attrDecls(d.Attrs)
	p.tensors(d.Vars)
	p.printf(":")
	var eq printer
	eq.expr(d.LHS)
	eq.printf(" == ")
	eq.expr(d.RHS)
	if one := p.String() + " " + eq.String(); len(one) <= lineWidth {
		fm.emit(one, d.Pos, "")
		return
	}
	fm.emit(p.String(), d.Pos, "")
	fm.leading(d.LHS.ExprPos(), false, indentUnit)
	fm.emit(eq.String(), d.LHS.ExprPos(), indentUnit)
}

func (fm *formatter) stmts(body []Stmt, end Pos, indent string) {
	for i, s := range body {
		fm.leading(s.StmtPos(), i > 0, indent)
		fm.stmt(s, indent)
	}
	fm.leading(end, len(body) > 0, indent)
}

func (fm *formatter) stmt(s Stmt, indent string) {
	var p printer
	switch s := s.(type) {
	case *AssignStmt:
		p.printf("%s = ", strings.Join(s.Names, ", "))
		p.expr(s.Value)
	case *ParamStmt:
		p.printf("%s = param ", s.Name)
		if s.DType != "" {
			p.printf("%s", s.DType)
		}
		p.shape(s.Shape)
		if s.Init != nil {
			p.printf(" init ")
			p.expr(s.Init)
		}
		if s.Label != "" {
			p.printf(" name %q", s.Label)
		}
	case *UpdateStmt:
		p.printf("update %s = ", s.Name)
		p.expr(s.Value)
	case *AssertStmt:
		p.printf("assert ")
		p.expr(s.Cond)
		if s.Msg != "" {
			p.printf(", %q", s.Msg)
		}
	case *ReturnStmt:
		p.printf("return ")
		p.exprs(s.Values)
	case *ForStmt:
		p.printf("for %s in ", s.Var)
		p.expr(s.From)
		p.printf("..")
		p.expr(s.To)
		p.printf(" {")
		fm.emit(p.String(), s.Pos, indent)
		fm.stmts(s.Body, s.End, indent+indentUnit)
		fm.emit("}", s.End, indent)
		return
	case *IfStmt:
		fm.ifStmt(s, indent, "")
		return
	case *BlockStmt:
		p.printf("block %s", s.Name)
		p.attrDecls(s.Attrs)
		p.printf("(%s) {", strings.Join(s.Params, ", "))
		fm.emit(p.String(), s.Pos, indent)
		fm.stmts(s.Body, s.End, indent+indentUnit)
		fm.emit("}", s.End, indent)
		return
	}
	fm.emit(unbroken(p.String()), s.StmtPos(), indent)
}

func (fm *formatter) ifStmt(s *IfStmt, indent, prefix string) {
	var p printer
	p.printf("%sif ", prefix)
	p.expr(s.Cond)
	p.printf(" {")
	if prefix != "" {
		fm.emit(p.String(), s.Pos, "") // continues the line of the "}"
	} else {
		fm.emit(p.String(), s.Pos, indent)
	}
	var thenEnd Pos
	if s.Else != nil {
		thenEnd = s.Pos // the else branch's comments come with it
		if len(s.Then) > 0 {
			thenEnd = s.Then[len(s.Then)-1].StmtPos()
		}
	} else {
		thenEnd = s.End
	}
	fm.stmts(s.Then, thenEnd, indent+indentUnit)
	switch {
	case s.Else == nil:
		fm.emit("}", s.End, indent)
	case len(s.Else) == 1 && isElseIf(s.Else[0]):
		fm.out.WriteString(indent + "}")
		fm.ifStmt(s.Else[0].(*IfStmt), indent, " else ")
	default:
		fm.out.WriteString(indent + "} else {\n")
		fm.stmts(s.Else, s.End, indent+indentUnit)
		fm.emit("}", s.End, indent)
	}
}

// isElseIf reports whether an else branch is a lone if, printed as
// `else if` (the canonical form of `else { if ... }`).
func isElseIf(s Stmt) bool {
	_, ok := s.(*IfStmt)
	return ok
}

type printer struct {
	b      strings.Builder
	nested int // depth of lambdas being printed
	tight  int // > 0 inside + - or comparisons: print * / % without spaces
}

func (p *printer) String() string { return p.b.String() }

func (p *printer) printf(format string, args ...any) {
	if len(args) == 0 {
		p.b.WriteString(format)
		return
	}
	p.b.WriteString(sprintf(format, args...))
}

func (p *printer) attrDecls(attrs []*AttrDecl) {
	if attrs == nil {
		return
	}
	p.printf("<")
	for i, a := range attrs {
		if i > 0 {
			p.printf(", ")
		}
		p.printf("%s", a.Name)
		if a.Type != "" {
			p.printf(": %s", a.Type)
		}
		if a.Default != nil {
			p.printf(" = ")
			p.expr(a.Default)
		}
	}
	p.printf(">")
}

func (p *printer) tensors(ts []*TensorDecl) {
	p.printf("(")
	for i, t := range ts {
		if i > 0 {
			p.printf(", ")
		}
		p.tensor(t)
	}
	p.printf(")")
}

func (p *printer) tensor(t *TensorDecl) {
	if t.Name != "" {
		p.printf("%s: ", t.Name)
	}
	p.printf("%s", t.DType)
	p.shape(t.Shape)
}

func (p *printer) shape(s []DimPat) {
	p.printf("[")
	for i, d := range s {
		if i > 0 {
			p.printf(", ")
		}
		p.dimPat(d)
	}
	p.printf("]")
}

func (p *printer) dimPat(d DimPat) {
	switch {
	case d.Func != nil:
		p.printf("*")
		p.expr(d.Func)
	case d.Pack != "":
		p.printf("*%s", d.Pack)
		if d.Len != nil {
			p.printf(":")
			p.expr(d.Len)
		}
	default:
		p.expr(d.Expr)
	}
}

func (p *printer) exprs(es []Expr) {
	for i, e := range es {
		if i > 0 {
			p.printf(", ")
		}
		p.expr(e)
	}
}

func (p *printer) exprList(open string, es []Expr, close string) {
	p.printf("%s", open)
	p.exprs(es)
	p.printf("%s", close)
}

func (p *printer) expr(e Expr) {
	switch e := e.(type) {
	case *Num:
		p.printf("%s", e.Text)
	case *StrLit:
		p.printf("%q", e.Value)
	case *BoolLit:
		p.printf("%t", e.Value)
	case *Ident:
		p.printf("%s", e.Name)
	case *Paren:
		saved := p.tight
		p.tight = 0
		p.printf("(")
		p.expr(e.X)
		p.printf(")")
		p.tight = saved
	case *List:
		p.exprList("[", e.Elems, "]")
	case *Unary:
		p.printf("%s", e.Op)
		p.expr(e.X)
	case *Binary:
		multiplicative := e.Op == "*" || e.Op == "/" || e.Op == "%"
		if !multiplicative {
			p.tight++
			defer func() { p.tight-- }()
		}
		p.expr(e.L)
		if multiplicative && p.tight > 0 {
			p.printf("%s", e.Op)
		} else {
			p.printf(" %s ", e.Op)
		}
		p.expr(e.R)
	case *Call:
		if e.Opaque {
			p.printf("opaque ")
		}
		p.printf("%s", e.Name)
		if len(e.Attrs) > 0 {
			p.printf("<")
			for i, a := range e.Attrs {
				if i > 0 {
					p.printf(", ")
				}
				p.printf("%s = ", a.Name)
				p.expr(a.Value)
			}
			p.printf(">")
		}
		p.exprList("(", e.Args, ")")
	case *Index:
		p.expr(e.X)
		p.printf("[")
		for i, x := range e.Idx {
			if i > 0 {
				p.printf(", ")
			}
			switch {
			case x.Slice:
				p.printf(":")
			case x.Pack != "":
				p.printf("*%s", x.Pack)
			case x.Func != nil:
				p.printf("*")
				p.expr(x.Func)
			default:
				p.expr(x.Expr)
			}
		}
		p.printf("]")
		if e.Default != nil {
			p.printf(" else ")
			p.expr(e.Default)
		}
	case *Lambda:
		p.printf("lambda")
		for i, v := range e.Params {
			if i > 0 {
				p.printf(",")
			}
			p.printf(" ")
			if v.Pack {
				p.printf("*")
			}
			p.printf("%s", v.Name)
			if v.Bound != nil {
				p.printf(" < ")
				p.dimPat(*v.Bound)
			}
		}
		p.printf(":")
		if p.nested > 0 {
			p.printf(lambdaBreak)
		}
		p.printf(" ")
		p.nested++
		p.expr(e.Body)
		p.nested--
	}
}

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }
