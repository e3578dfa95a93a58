package parser

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode"

	"github.com/alecthomas/participle/v2"
	"github.com/alecthomas/participle/v2/lexer"

	"tofuc/lang"
)

// Keywords cannot name anything.
var keywords = map[string]bool{
	"op": true, "model": true, "rule": true, "import": true, "lambda": true,
	"let": true, "in": true, "param": true, "init": true, "return": true,
	"for": true, "if": true, "else": true, "block": true, "opaque": true, "assert": true,
}

// IsKeyword reports whether s is reserved.
func IsKeyword(s string) bool { return keywords[s] }

// Parse parses one file. On error it returns a lang.ErrorList.
func Parse(path string, src []byte) (f *lang.File, err error) {
	defer func() {
		// participle is robust, but a parser of untrusted input must never
		// take the process down: turn any internal failure into a diagnostic.
		if r := recover(); r != nil {
			f, err = nil, lang.ErrorList{lang.Errorf(lang.Pos{File: path}, "internal parser error: %v", r)}
		}
	}()
	if what := notTDL(path, src); what != "" {
		return nil, lang.ErrorList{lang.Errorf(lang.Pos{File: path, Line: 1, Col: 1}, "%s", what)}
	}
	if at, deep := tooDeep(path, src); deep {
		return nil, lang.ErrorList{lang.Errorf(pos(at), "syntax error: nested more than %d deep", maxNesting)}
	}
	g, perr := tdlParser.ParseBytes(path, src)
	if perr != nil {
		return nil, lang.ErrorList{syntaxError(path, perr)}
	}
	b := &builder{}
	f = b.file(g)
	f.Path = path
	f.Comments = comments(path, src)
	return f, b.errs.Err()
}

// grammarNames renames the grammar's node types in participle's messages.
var grammarNames = regexp.MustCompile(`\bG([A-Z][A-Za-z]*)\b`)

var readableNames = map[string]string{
	"Expr": "expression", "Binary": "expression", "Arith": "expression", "AttrExpr": "value",
	"Unary": "operand", "Primary": "operand", "Suffix": "index", "IndexElem": "index",
	"Call": "call", "AttrArgs": "attributes", "AttrArg": "attribute", "AttrDecls": "attributes",
	"AttrDecl": "attribute", "AttrList": "list", "Tensor": "tensor", "DimPat": "dimension",
	"ShapeList": "shape", "Lambda": "lambda", "ParamVar": "variable", "OpTerm": "operator",
	"ArithTerm": "operator", "Let": "let", "Stmt": "statement", "BlockBody": "block",
	"Return": "return", "For": "for", "If": "if", "Block": "block", "Param": "param",
	"Assign": "assignment", "Assert": "assert", "Decl": "declaration", "Op": "op", "Model": "model", "Rule": "rule",
	"Import": "import", "Close": `"}"`,
}

func readable(msg string) string {
	return grammarNames.ReplaceAllStringFunc(msg, func(g string) string {
		if r, ok := readableNames[g[1:]]; ok {
			return r
		}
		return strings.ToLower(g[1:])
	})
}

// expectedClause is participle's "(expected ...)", which spells out the
// rest of the grammar rule that failed; expectedToken the first element
// of it: a quoted token, a token type or a rule's name.
var (
	expectedClause = regexp.MustCompile(`\(expected (.*)\)$`)
	expectedToken  = regexp.MustCompile(`^("(?:[^"\\]|\\.)*"|<[a-z]+>|[a-z]+)(.*)$`)
)

// expectedFirst keeps of an "(expected ...)" clause what a user can act
// on: its first element (a name for <ident>), or "an operand" where the
// rule is a call's (participle's last try where any operand would do;
// a declaration's rule also starts with a name and attributes, but its
// parenthesis holds tensors, not expressions).
func expectedFirst(msg string) string {
	clause := expectedClause.FindStringSubmatchIndex(msg)
	if clause == nil {
		return msg
	}
	rule := msg[clause[2]:clause[3]]
	m := expectedToken.FindStringSubmatch(rule)
	if m == nil || strings.TrimSpace(m[2]) == "" {
		return msg
	}
	first := m[1]
	switch rest := strings.TrimSpace(m[2]); {
	case first == "<ident>" && strings.HasPrefix(rest, `attributes? "(" (expression`):
		first = "an operand: a name, a number, a call or an expression in parentheses"
	case first == "<ident>":
		first = "a name"
	}
	return msg[:clause[0]] + "(expected " + first + ")"
}

// invalidText is how participle's lexer reports text no token matches.
var invalidText = regexp.MustCompile(`^(?:lexer: )?invalid input text "(.)`)

// lexicalMessage says what is wrong with text no token matches: an
// unterminated string, or an unexpected character.
func lexicalMessage(msg string) string {
	m := invalidText.FindStringSubmatch(msg)
	if m == nil {
		return msg
	}
	if m[1] == `\` { // the quote is escaped in participle's message
		return "unterminated string"
	}
	return fmt.Sprintf("unexpected character %q", m[1])
}

func syntaxError(path string, err error) *lang.Error {
	var pe participle.Error
	if errors.As(err, &pe) {
		msg := lexicalMessage(pe.Message())
		return &lang.Error{Pos: pos(pe.Position()), Msg: "syntax error: " + expectedFirst(readable(msg))}
	}
	return lang.Errorf(lang.Pos{File: path}, "syntax error: %v", err)
}

func comments(path string, src []byte) []lang.Comment {
	lx, err := tdlLexer.Lex(path, bytes.NewReader(src))
	if err != nil {
		return nil
	}
	var out []lang.Comment
	commentType := tdlLexer.Symbols()["Comment"]

	for {
		tok, err := lx.Next()
		if err != nil || tok.EOF() {
			return out
		}
		if tok.Type == commentType {
			lineStart := bytes.LastIndexByte(src[:tok.Pos.Offset], '\n') + 1
			trailing := len(bytes.TrimSpace(src[lineStart:tok.Pos.Offset])) > 0
			out = append(out, lang.Comment{Pos: pos(tok.Pos), Text: strings.TrimRight(tok.Value, " \t\r"), Trailing: trailing})
		}
	}
}

func pos(p lexer.Position) lang.Pos { return lang.Pos{File: p.Filename, Line: p.Line, Col: p.Column} }

type builder struct{ errs lang.ErrorList }

func (b *builder) name(p lexer.Position, s string) string {
	if keywords[s] {
		b.errs.Add(pos(p), "%q is a keyword and cannot be used as a name", s)
	}
	return s
}

func (b *builder) file(g *gFile) *lang.File {
	f := &lang.File{}
	for _, d := range g.Decls {
		switch {
		case d.Import != nil:
			path, err := strconv.Unquote(d.Import.Path)
			if err != nil {
				b.errs.Add(pos(d.Import.Pos), "bad import path %s", d.Import.Path)
			}
			imp := &lang.Import{Pos: pos(d.Import.Pos), Path: path}
			f.Imports = append(f.Imports, imp)
			f.Order = append(f.Order, imp)
		case d.Op != nil:
			op := b.op(d.Op)
			f.Ops = append(f.Ops, op)
			f.Order = append(f.Order, op)
		case d.Model != nil:
			m := b.model(d.Model)
			f.Models = append(f.Models, m)
			f.Order = append(f.Order, m)
		case d.Rule != nil:
			r := b.rule(d.Rule)
			f.Rules = append(f.Rules, r)
			f.Order = append(f.Order, r)
		}
	}
	return f
}

func (b *builder) attrDecls(g *gAttrDecls) []*lang.AttrDecl {
	if g == nil {
		return nil
	}
	var out []*lang.AttrDecl
	for _, a := range g.List {
		d := &lang.AttrDecl{Pos: pos(a.Pos), Name: b.name(a.Pos, a.Name), Type: a.Type}
		switch a.Type {
		case "", "int", "float", "bool", "string", "list":
		default:
			b.errs.Add(pos(a.Pos), "unknown attribute type %q (expected int, float, bool, string or list)", a.Type)
		}
		if a.Default != nil {
			d.Default = b.attrExpr(a.Default)
		}
		out = append(out, d)
	}
	return out
}

func (b *builder) op(g *gOp) *lang.OpDecl {
	op := &lang.OpDecl{Pos: pos(g.Pos), Name: b.name(g.Pos, g.Name), Attrs: b.attrDecls(g.Attrs)}
	for _, t := range g.Inputs {
		op.Inputs = append(op.Inputs, b.tensor(t))
	}
	for _, t := range g.Outputs {
		op.Outputs = append(op.Outputs, b.tensor(t))
	}
	for _, l := range g.Lets {
		let := &lang.LetDecl{Pos: pos(l.Pos), Name: b.name(l.Pos, l.Name), Value: b.expr(l.Value)}
		if l.Shape != nil {
			let.Shape = append(b.dims(l.Shape.Dims), []lang.DimPat{}...) // non-nil, even when empty
		}
		op.Lets = append(op.Lets, let)
	}
	for _, e := range g.Bodies {
		op.Bodies = append(op.Bodies, b.expr(e))
	}
	return op
}

func (b *builder) tensor(g *gTensor) *lang.TensorDecl {
	t := &lang.TensorDecl{Pos: pos(g.Pos), Name: g.Name, DType: g.DType}
	if g.Name != "" {
		b.name(g.Pos, g.Name)
	}
	t.Shape = b.dims(g.Shape)
	return t
}

func (b *builder) dims(gs []*gDimPat) []lang.DimPat {
	out := make([]lang.DimPat, 0, len(gs))
	for _, d := range gs {
		p := lang.DimPat{Pos: pos(d.Pos), Pack: d.Pack}
		switch {
		case d.Func != nil:
			p.Func = b.call(d.Func)
		case d.Pack != "":
			b.name(d.Pos, d.Pack)
			if d.Len != nil {
				p.Len = b.arith(d.Len)
			}
		default:
			p.Expr = b.arith(d.Expr)
		}
		out = append(out, p)
	}
	return out
}

func (b *builder) model(g *gModel) *lang.ModelDecl {
	m := &lang.ModelDecl{Pos: pos(g.Pos), Name: b.name(g.Pos, g.Name), Attrs: b.attrDecls(g.Attrs)}
	for _, t := range g.Inputs {
		m.Inputs = append(m.Inputs, b.tensor(t))
	}
	m.Body, m.End = b.stmts(g.Body)
	return m
}

func (b *builder) rule(g *gRule) *lang.RuleDecl {
	r := &lang.RuleDecl{Pos: pos(g.Pos), Name: b.name(g.Pos, g.Name), Attrs: b.attrDecls(g.Attrs)}
	for _, t := range g.Vars {
		r.Vars = append(r.Vars, b.tensor(t))
	}
	body := b.expr(g.Body)
	if eq, ok := body.(*lang.Binary); ok && eq.Op == "==" {
		r.LHS, r.RHS = eq.L, eq.R
	} else {
		b.errs.Add(body.ExprPos(), "a rule must have the form LHS == RHS")
	}
	return r
}

func (b *builder) stmts(g *gBlockBody) ([]lang.Stmt, lang.Pos) {
	var out []lang.Stmt
	for _, s := range g.Stmts {
		if st := b.stmt(s); st != nil {
			out = append(out, st)
		}
	}
	return out, pos(g.Close.Pos)
}

func (b *builder) stmt(g *gStmt) lang.Stmt {
	switch {
	case g.Assert != nil:
		a := &lang.AssertStmt{Pos: pos(g.Assert.Pos), Cond: b.expr(g.Assert.Cond)}
		if g.Assert.Msg != "" {
			msg, err := strconv.Unquote(g.Assert.Msg)
			if err != nil {
				b.errs.Add(a.Pos, "bad string %s", g.Assert.Msg)
			}
			a.Msg = msg
		}
		return a
	case g.Return != nil:
		r := &lang.ReturnStmt{Pos: pos(g.Return.Pos)}
		for _, v := range g.Return.Values {
			r.Values = append(r.Values, b.expr(v))
		}
		return r
	case g.For != nil:
		f := &lang.ForStmt{Pos: pos(g.For.Pos), Var: b.name(g.For.Pos, g.For.Var), From: b.arith(g.For.From), To: b.arith(g.For.To)}
		f.Body, f.End = b.stmts(g.For.Body)
		return f
	case g.If != nil:
		return b.ifStmt(g.If)
	case g.Block != nil:
		bl := &lang.BlockStmt{Pos: pos(g.Block.Pos), Name: b.name(g.Block.Pos, g.Block.Name), Attrs: b.attrDecls(g.Block.Attrs)}
		for _, p := range g.Block.Params {
			bl.Params = append(bl.Params, b.name(g.Block.Pos, p))
		}
		bl.Body, bl.End = b.stmts(g.Block.Body)
		return bl
	case g.Param != nil:
		p := &lang.ParamStmt{Pos: pos(g.Param.Pos), Name: b.name(g.Param.Pos, g.Param.Name), DType: g.Param.DType, Shape: b.dims(g.Param.Shape)}
		if g.Param.Init != nil {
			p.Init = b.call(g.Param.Init)
		}
		if g.Param.Label != "" {
			label, err := strconv.Unquote(g.Param.Label)
			if err != nil || label == "" || strings.ContainsFunc(label, unicode.IsControl) {
				b.errs.Add(p.Pos, "bad parameter name %s", g.Param.Label)
			}
			p.Label = label
		}
		return p
	case g.Update != nil:
		return &lang.UpdateStmt{Pos: pos(g.Update.Pos), Name: b.name(g.Update.Pos, g.Update.Name), Value: b.expr(g.Update.Value)}
	case g.Assign != nil:
		a := &lang.AssignStmt{Pos: pos(g.Assign.Pos), Value: b.expr(g.Assign.Value)}
		for _, n := range g.Assign.Names {
			a.Names = append(a.Names, b.name(g.Assign.Pos, n))
		}
		return a
	}
	return nil
}

func (b *builder) ifStmt(g *gIf) *lang.IfStmt {
	s := &lang.IfStmt{Pos: pos(g.Pos), Cond: b.expr(g.Cond)}
	s.Then, s.End = b.stmts(g.Then)
	switch {
	case g.ElseIf != nil:
		inner := b.ifStmt(g.ElseIf)
		s.Else = []lang.Stmt{inner}
		s.End = inner.End
	case g.Else != nil:
		s.Else, s.End = b.stmts(g.Else)
	}
	return s
}

func (b *builder) expr(g *gExpr) lang.Expr {
	if g.Lambda != nil {
		l := &lang.Lambda{Pos: pos(g.Lambda.Pos)}
		for _, p := range g.Lambda.Params {
			lp := &lang.LambdaParam{Pos: pos(p.Pos), Name: b.name(p.Pos, p.Name), Pack: p.Pack}
			if p.Bound != nil {
				bound := b.dims([]*gDimPat{{Pos: p.Bound.Pos, Func: p.Bound.Func, Pack: p.Bound.Pack, Expr: p.Bound.Expr}})[0]
				lp.Bound = &bound
			}
			l.Params = append(l.Params, lp)
		}
		l.Body = b.expr(g.Lambda.Body)
		return l
	}
	ops := make([]opTerm, len(g.Binary.Terms))
	for i, t := range g.Binary.Terms {
		ops[i] = opTerm{pos: pos(t.Pos), op: t.Op, x: b.unary(t.X)}
	}
	return b.climb(b.unary(g.Binary.Head), ops)
}

func (b *builder) arith(g *gArith) lang.Expr {
	ops := make([]opTerm, len(g.Terms))
	for i, t := range g.Terms {
		ops[i] = opTerm{pos: pos(t.Pos), op: t.Op, x: b.unary(t.X)}
	}
	return b.climb(b.unary(g.Head), ops)
}

func (b *builder) attrExpr(g *gAttrExpr) lang.Expr {
	if g.List != nil {
		return b.list(g.List)
	}
	return b.arith(g.Arith)
}

func (b *builder) list(g *gAttrList) lang.Expr {
	l := &lang.List{Pos: pos(g.Pos)}
	for _, e := range g.Elems {
		l.Elems = append(l.Elems, b.expr(e))
	}
	return l
}

type opTerm struct {
	pos lang.Pos
	op  string
	x   lang.Expr
}

// precedence of binary operators; comparisons do not chain.
var precedence = map[string]int{
	"||": 1, "&&": 2,
	"==": 3, "!=": 3, "<": 3, "<=": 3, ">": 3, ">=": 3,
	"+": 4, "-": 4,
	"*": 5, "/": 5, "%": 5,
}

// climb builds a left-associative tree from a flat sequence by precedence.
func (b *builder) climb(head lang.Expr, terms []opTerm) lang.Expr {
	i := 0
	var parse func(lhs lang.Expr, minPrec int) lang.Expr
	parse = func(lhs lang.Expr, minPrec int) lang.Expr {
		for i < len(terms) && precedence[terms[i].op] >= minPrec {
			t := terms[i]
			prec := precedence[t.op]
			i++
			rhs := t.x
			for i < len(terms) && precedence[terms[i].op] > prec {
				rhs = parse(rhs, prec+1)
			}
			if prec == 3 {
				if l, ok := lhs.(*lang.Binary); ok && precedence[l.Op] == 3 {
					b.errs.Add(t.pos, "comparisons do not chain: parenthesise %s", fmt.Sprintf("(a %s b) %s c", l.Op, t.op))
				}
			}
			lhs = &lang.Binary{Pos: t.pos, Op: t.op, L: lhs, R: rhs}
		}
		return lhs
	}
	return parse(head, 1)
}

func (b *builder) unary(g *gUnary) lang.Expr {
	x := b.primary(g.Primary)
	for _, s := range g.Suffixes {
		ix := &lang.Index{Pos: pos(s.Pos), X: x}
		for _, e := range s.Index {
			ix.Idx = append(ix.Idx, b.indexElem(e))
		}
		if s.Default != nil {
			ix.Default = b.unary(s.Default)
		}
		x = ix
	}
	for i := len(g.Ops) - 1; i >= 0; i-- {
		x = &lang.Unary{Pos: pos(g.Pos), Op: g.Ops[i], X: x}
	}
	return x
}

func (b *builder) indexElem(g *gIndexElem) *lang.IndexElem {
	e := &lang.IndexElem{Pos: pos(g.Pos), Slice: g.Slice, Pack: g.Pack}
	switch {
	case g.Func != nil:
		e.Func = b.call(g.Func)
	case g.Expr != nil:
		e.Expr = b.expr(g.Expr)
	}
	return e
}

func (b *builder) primary(g *gPrimary) lang.Expr {
	p := pos(g.Pos)
	switch {
	case g.Call != nil:
		return b.call(g.Call)
	case g.Float != "":
		v, err := strconv.ParseFloat(g.Float, 64)
		if err != nil {
			b.errs.Add(p, "bad number %s", g.Float)
		}
		return &lang.Num{Pos: p, Text: g.Float, IsFloat: true, Float: v}
	case g.Int != "":
		v, err := strconv.ParseInt(g.Int, 10, 64)
		if err != nil {
			b.errs.Add(p, "integer %s does not fit in 64 bits", g.Int)
		}
		return &lang.Num{Pos: p, Text: g.Int, Int: v, Float: float64(v)}
	case g.Str != "":
		s, err := strconv.Unquote(g.Str)
		if err != nil {
			b.errs.Add(p, "bad string %s", g.Str)
		}
		return &lang.StrLit{Pos: p, Value: s}
	case g.Ident != "":
		switch g.Ident {
		case "true", "false":
			return &lang.BoolLit{Pos: p, Value: g.Ident == "true"}
		}
		return &lang.Ident{Pos: p, Name: b.name(g.Pos, g.Ident)}
	case g.Paren != nil:
		return &lang.Paren{Pos: p, X: b.expr(g.Paren)}
	case g.List != nil:
		return b.list(g.List)
	}
	b.errs.Add(p, "expected an expression")
	return &lang.Num{Pos: p, Text: "0"}
}

func (b *builder) call(g *gCall) *lang.Call {
	c := &lang.Call{Pos: pos(g.Pos), Name: b.name(g.Pos, g.Name), Opaque: g.Opaque}
	if g.Attrs != nil {
		for _, a := range g.Attrs.List {
			c.Attrs = append(c.Attrs, &lang.AttrArg{Pos: pos(a.Pos), Name: b.name(a.Pos, a.Name), Value: b.attrExpr(a.Value)})
		}
	}
	for _, a := range g.Args {
		c.Args = append(c.Args, b.expr(a))
	}
	return c
}
