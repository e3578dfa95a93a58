package parser

import (
	"fmt"
	"strings"
	"testing"

	"tofuc/lang"
)

// sexpr prints an expression fully bracketed, to make grouping visible:
// binary and unary operators as (op a b), an else default as (else x d),
// parentheses as (paren x).
func sexpr(e lang.Expr) string {
	switch e := e.(type) {
	case *lang.Num:
		return e.Text
	case *lang.Ident:
		return e.Name
	case *lang.BoolLit:
		return fmt.Sprint(e.Value)
	case *lang.StrLit:
		return fmt.Sprintf("%q", e.Value)
	case *lang.Paren:
		return "(paren " + sexpr(e.X) + ")"
	case *lang.Binary:
		return "(" + e.Op + " " + sexpr(e.L) + " " + sexpr(e.R) + ")"
	case *lang.Unary:
		return "(" + e.Op + " " + sexpr(e.X) + ")"
	case *lang.List:
		return "[" + sexprs(e.Elems) + "]"
	case *lang.Lambda:
		var ps []string
		for _, p := range e.Params {
			s := p.Name
			if p.Pack {
				s = "*" + s
			}
			if p.Bound != nil {
				s += "<" + strings.Trim(lang.FormatShape([]lang.DimPat{*p.Bound}), "[]")
			}
			ps = append(ps, s)
		}
		return "(lambda " + strings.Join(ps, " ") + ": " + sexpr(e.Body) + ")"
	case *lang.Call:
		s := e.Name
		if e.Opaque {
			s = "opaque " + s
		}
		if len(e.Attrs) > 0 {
			var as []string
			for _, a := range e.Attrs {
				as = append(as, a.Name+"="+sexpr(a.Value))
			}
			s += "<" + strings.Join(as, " ") + ">"
		}
		return s + "(" + sexprs(e.Args) + ")"
	case *lang.Index:
		var is []string
		for _, x := range e.Idx {
			switch {
			case x.Slice:
				is = append(is, ":")
			case x.Pack != "":
				is = append(is, "*"+x.Pack)
			case x.Func != nil:
				is = append(is, "*"+sexpr(x.Func))
			default:
				is = append(is, sexpr(x.Expr))
			}
		}
		s := sexpr(e.X) + "[" + strings.Join(is, " ") + "]"
		if e.Default != nil {
			s = "(else " + s + " " + sexpr(e.Default) + ")"
		}
		return s
	}
	return fmt.Sprintf("<%T>", e)
}

func sexprs(es []lang.Expr) string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = sexpr(e)
	}
	return strings.Join(parts, " ")
}

// parseExpr parses src as the body of an operator's lambda.
func parseExpr(t *testing.T, src string) lang.Expr {
	t.Helper()
	f, err := Parse("e.tdl", []byte("op f() -> [N] = lambda q: "+src))
	if err != nil {
		t.Fatalf("%s: %v", src, err)
	}
	return f.Ops[0].Bodies[0].(*lang.Lambda).Body
}

func TestPrecedence(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{"a + b * c", "(+ a (* b c))"},
		{"a * b + c", "(+ (* a b) c)"},
		{"a - b - c", "(- (- a b) c)"},
		{"a / b * c % d", "(% (* (/ a b) c) d)"},
		{"a + b - c * d / e", "(- (+ a b) (/ (* c d) e))"},
		{"(a + b) * c", "(* (paren (+ a b)) c)"},
		{"-x[i]", "(- x[i])"},
		{"-a * b", "(* (- a) b)"},
		{"a - -b", "(- a (- b))"},
		{"--a", "(- (- a))"},
		{"!a && b", "(&& (! a) b)"},
		{"!x[i] || y", "(|| (! x[i]) y)"},
		{"x[i] else 0.0 * f[j]", "(* (else x[i] 0.0) f[j])"},
		{"x[i] else -1.0", "(else x[i] (- 1.0))"},
		{"x[i + 1] else 0.0 + y[i]", "(+ (else x[(+ i 1)] 0.0) y[i])"},
		{"x[y[i]]", "x[y[i]]"},
		{"a + b < c * d", "(< (+ a b) (* c d))"},
		{"a < b && c >= d || e == f", "(|| (&& (< a b) (>= c d)) (== e f))"},
		{"a || b && c", "(|| a (&& b c))"},
		{"a && b || c && d", "(|| (&& a b) (&& c d))"},
		{"a != b && c <= d", "(&& (!= a b) (<= c d))"},
		{"(a < b) < c", "(< (paren (< a b)) c)"},
		{"sum(lambda k: A[i, k] * B[k, j])", "sum((lambda k: (* A[i k] B[k j])))"},
		{"max(lambda k < K - 1: x[k + 1])", "max((lambda k<K - 1: x[(+ k 1)]))"},
		{"sum(lambda *r < *pick(S, axes): x[*o, *r])", "sum((lambda *r<*pick(S, axes): x[*o *r]))"},
		{"lambda i: a + b", "(lambda i: (+ a b))"},
		{"select(i > 0, x[i - 1], 0.0)", "select((> i 0) x[(- i 1)] 0.0)"},
		{"opaque cholesky(m[b, :, :])[i, j]", "opaque cholesky(m[b : :])[i j]"},
		{"x[*reduce_index(o, r, [0, 1], true)]", "x[*reduce_index(o r [0 1] true)]"},
		{"f32(i) * 2.5e-3", "(* f32(i) 2.5e-3)"},
		{"a % 2 == 0", "(== (% a 2) 0)"},
	} {
		if got := sexpr(parseExpr(t, c.src)); got != c.want {
			t.Errorf("%s\n got  %s\n want %s", c.src, got, c.want)
		}
	}
}

func TestComparisonsDoNotChain(t *testing.T) {
	for _, src := range []string{"a < b < c", "a == b != c", "a < b + 1 >= c", "a <= b == c && d"} {
		_, err := Parse("c.tdl", []byte("op f() -> [N] = lambda q: "+src))
		if err == nil || !strings.Contains(err.Error(), "comparisons do not chain") {
			t.Errorf("%s: got %v, want a chained-comparison error", src, err)
		}
	}
}

func TestAttributeExpressions(t *testing.T) {
	// Attribute values and dimensions stop at '>' and ':'.
	f, err := Parse("a.tdl", []byte("op f<a = 2 * 3, b = [1, -2], c = (1 > 0)>(x: [*S:a - 1, N / 2]) -> [N] = lambda i: x[i]\n"+
		"model m(x: f32[4]) { return f<a = 1 + 1, b = []>(x) }"))
	if err != nil {
		t.Fatal(err)
	}
	op := f.Ops[0]
	var got []string
	for _, a := range op.Attrs {
		got = append(got, a.Name+"="+sexpr(a.Default))
	}
	got = append(got, "len="+sexpr(op.Inputs[0].Shape[0].Len), "dim="+sexpr(op.Inputs[0].Shape[1].Expr))
	call := f.Models[0].Body[0].(*lang.ReturnStmt).Values[0].(*lang.Call)
	for _, a := range call.Attrs {
		got = append(got, a.Name+"="+sexpr(a.Value))
	}
	want := "a=(* 2 3) b=[1 (- 2)] c=(paren (> 1 0)) len=(- a 1) dim=(/ N 2) a=(+ 1 1) b=[]"
	if strings.Join(got, " ") != want {
		t.Errorf("got  %s\nwant %s", strings.Join(got, " "), want)
	}
}

const posSrc = `// positions
op scale<k = 2>(x: f32[N, M]) -> [N, M] =
    lambda i, j: x[i, j] * k

model m(x: f32[4, 8]) {
    w = param f32[8, 8] init zeros()
    for i in 0..2 {
        x = relu(x)
    }
    return matmul(x, w)
}

rule r(A: [N]): neg(neg(A)) == A
`

func TestPositions(t *testing.T) {
	f, err := Parse("p.tdl", []byte(posSrc))
	if err != nil {
		t.Fatal(err)
	}
	op := f.Ops[0]
	lam := op.Bodies[0].(*lang.Lambda)
	mul := lam.Body.(*lang.Binary)
	md := f.Models[0]
	param := md.Body[0].(*lang.ParamStmt)
	loop := md.Body[1].(*lang.ForStmt)
	ret := md.Body[2].(*lang.ReturnStmt)
	call := ret.Values[0].(*lang.Call)
	for _, c := range []struct {
		what string
		got  lang.Pos
		want string
	}{
		{"op", op.Pos, "p.tdl:2:1"},
		{"attribute", op.Attrs[0].Pos, "p.tdl:2:10"},
		{"input", op.Inputs[0].Pos, "p.tdl:2:17"},
		{"dimension", op.Inputs[0].Shape[1].Pos, "p.tdl:2:27"},
		{"output", op.Outputs[0].Pos, "p.tdl:2:34"},
		{"lambda", lam.Pos, "p.tdl:3:5"},
		{"lambda parameter", lam.Params[1].Pos, "p.tdl:3:15"},
		{"binary (at its operator)", mul.Pos, "p.tdl:3:26"},
		{"index (at its bracket)", mul.L.ExprPos(), "p.tdl:3:19"},
		{"indexed tensor", mul.L.(*lang.Index).X.ExprPos(), "p.tdl:3:18"},
		{"attribute reference", mul.R.ExprPos(), "p.tdl:3:28"},
		{"model", md.Pos, "p.tdl:5:1"},
		{"param", param.Pos, "p.tdl:6:5"},
		{"initialiser", param.Init.Pos, "p.tdl:6:30"},
		{"for", loop.Pos, "p.tdl:7:5"},
		{"for end", loop.End, "p.tdl:9:5"},
		{"assignment in for", loop.Body[0].StmtPos(), "p.tdl:8:9"},
		{"return", ret.Pos, "p.tdl:10:5"},
		{"call", call.Pos, "p.tdl:10:12"},
		{"argument", call.Args[1].ExprPos(), "p.tdl:10:22"},
		{"model end", md.End, "p.tdl:11:1"},
		{"rule", f.Rules[0].Pos, "p.tdl:13:1"},
		{"rule lhs", f.Rules[0].LHS.ExprPos(), "p.tdl:13:17"},
		{"rule rhs", f.Rules[0].RHS.ExprPos(), "p.tdl:13:32"},
	} {
		if c.got.String() != c.want {
			t.Errorf("%s at %s, want %s", c.what, c.got, c.want)
		}
	}
	// Declarations in source order.
	var order []string
	for _, d := range f.Order {
		order = append(order, d.DeclPos().String())
	}
	if got := strings.Join(order, " "); got != "p.tdl:2:1 p.tdl:5:1 p.tdl:13:1" {
		t.Errorf("order = %s", got)
	}
}

func TestSyntaxErrorPositions(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{"op f(x: [N]) -> [N] lambda i: x[i]", `s.tdl:1:21: syntax error: unexpected token "lambda"`},
		{"op f(x: [N]) -> [N] = lambda i: x[i] @", `s.tdl:1:38: syntax error:`},
		{"op f(x: [N]) -> [N] =\n    lambda i: x[i +\n", `s.tdl:3:1: syntax error: unexpected token "<EOF>"`},
		{"model m(x: f32[4]) {\n    return x\n    }\n}", `s.tdl:4:1: syntax error: unexpected token "}"`},
		{"op f(x: [N]) -> [N] = lambda i: x[i] * 99999999999999999999", "s.tdl:1:40: integer 99999999999999999999 does not fit in 64 bits"},
		{"model m(x: f32[4]) {\n    model = x\n    return x\n}", `s.tdl:2:5: "model" is a keyword and cannot be used as a name`},
		{"op f<t: tensor>(x: [N]) -> [N] = lambda i: x[i]", `s.tdl:1:6: unknown attribute type "tensor"`},
		{"rule r(A: [N]): A", "s.tdl:1:17: a rule must have the form LHS == RHS"},
		// The rest of a grammar rule is cut to what a user can act on.
		{"op f(x: [N]) -> [N] = lambda i: x[i] +* 2.0", `s.tdl:1:39: syntax error: unexpected token "*" (expected an operand: a name, a number, a call or an expression in parentheses)`},
		{"op f(x: [N] -> [N] = lambda i: x[i]", `s.tdl:1:13: syntax error: unexpected token "->" (expected ")")`},
		{"op f(x: [N]) -> [N] = lambda i x[i]", `s.tdl:1:32: syntax error: unexpected token "x" (expected ":")`},
		{"op (x: [N]) -> [N] = lambda i: x[i]", `s.tdl:1:4: syntax error: unexpected token "(" (expected a name)`},
		{"model (x: f32[4]) {\n    return x\n}", `s.tdl:1:7: syntax error: unexpected token "(" (expected a name)`},
	} {
		_, err := Parse("s.tdl", []byte(c.src))
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%q:\n got  %v\n want %s...", c.src, err, c.want)
		}
		if _, ok := err.(lang.ErrorList); err != nil && !ok {
			t.Errorf("%q: error of type %T, want lang.ErrorList", c.src, err)
		}
	}
}

func TestComments(t *testing.T) {
	src := "// head\n\nop f(x: [N]) -> [N] = lambda i: x[i] // trailing\n  // indented   \nmodel m(x: f32[4]) {\n    // inside\n    return x // after return\n}\n// tail"
	f, err := Parse("c.tdl", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range f.Comments {
		got = append(got, fmt.Sprintf("%s %q %v", c.Pos, c.Text, c.Trailing))
	}
	want := []string{
		`c.tdl:1:1 "// head" false`,
		`c.tdl:3:38 "// trailing" true`,
		`c.tdl:4:3 "// indented" false`,
		`c.tdl:6:5 "// inside" false`,
		`c.tdl:7:14 "// after return" true`,
		`c.tdl:9:1 "// tail" false`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("comments:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// A comment marker inside a string is not a comment.
	f, err = Parse("c.tdl", []byte(`op f<s = "a // b">(x: [N]) -> [N] = lambda i: x[i]`))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Comments) != 0 {
		t.Errorf("comments in a string: %v", f.Comments)
	}
}

func TestNestingLimit(t *testing.T) {
	deep := func(n int) string {
		return "op f(x: [N]) -> [N] = lambda i:\n    " + strings.Repeat("(", n) + "x[i]" + strings.Repeat(")", n)
	}
	if _, err := Parse("d.tdl", []byte(deep(maxNesting-10))); err != nil {
		t.Errorf("nesting %d: %v", maxNesting-10, err)
	}
	for _, src := range []string{
		deep(200000), // overflowed the stack (a fatal error) before the limit
		"op f(x: [N]) -> [N] = lambda i:\n    " + strings.Repeat("lambda a: ", 2000) + "x[i]",
		"op f(x: [N]) -> [N] = lambda i:\n    x[i]" + strings.Repeat(" else x[i]", 2000),
		"model m(x: f32[4]) {\n    " + strings.Repeat("if true {} else ", 2000) + "{}\n}",
	} {
		_, err := Parse("d.tdl", []byte(src))
		if err == nil || !strings.HasPrefix(err.Error(), "d.tdl:2:") || !strings.Contains(err.Error(), fmt.Sprintf("nested more than %d deep", maxNesting)) {
			t.Errorf("%.60q...: got %v", src, err)
		}
	}
	// Siblings do not add up: many arguments, lets, statements, else blocks.
	for _, src := range []string{
		"op f(x: [N]) -> [N] = lambda i: g(" + strings.Repeat("lambda a: x[i], ", 3000) + "x[i])",
		"op f(x: [N]) -> [N] =\n" + strings.Repeat("    let t = lambda i: x[i] else 0.0 in\n", 3000) + "    lambda i: t[i]",
		"model m(x: f32[4]) {\n" + strings.Repeat("    if true { x = x } else { x = x }\n", 3000) + "    return x\n}",
		strings.Repeat("op f(x: [N]) -> [N] = lambda i: x[i] else 0.0\n", 3000),
	} {
		if pos, deep := tooDeep("d.tdl", []byte(src)); deep {
			t.Errorf("%.60q...: reported too deep at %s", src, pos)
		}
	}
}

// TestNotTDL: a tensor, an archive, an ONNX model or a binary file given
// as TDL is named as what it is, at line 1.
func TestNotTDL(t *testing.T) {
	for _, tc := range []struct {
		path, src, want string
	}{
		{"x.npy", "\x93NUMPY\x01\x00v\x00{'descr': '<f4'", "NumPy .npy file"},
		{"w.npz", "PK\x03\x04\x14\x00", "NumPy .npz file"},
		{"m.onnx", "\x08\x07\x12\x07pytorch", "ONNX model"},
		{"m.tdl", "\x08\x07\x12\x07pytorch", "a binary file"},
	} {
		_, err := Parse(tc.path, []byte(tc.src))
		if err == nil || !strings.Contains(err.Error(), tc.path+":1:1: this is ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want %q", tc.path, err, tc.want)
		}
	}
	// Text named .onnx (an import's source) parses.
	if _, err := Parse("m.onnx", []byte("op f(x: [N]) -> [N] = lambda i: x[i]\n")); err != nil {
		t.Errorf("TDL text named .onnx: %v", err)
	}
}

// TestUpdateAndNameStatements: `update w = EXPR` and a parameter's
// `name "..."` clause parse, and update and name stay usable as names,
// also right after a parameter statement.
func TestUpdateAndNameStatements(t *testing.T) {
	src := `model m(x: f32[2, 4]) {
    w = param f32[4, 4] init zeros()
    name = matmul(x, w)
    v = param f32[4] init ones() name "h.2/v"
    update = add(name, v)
    update v = v
    return update
}
`
	f, err := Parse("m.tdl", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	body := f.Models[0].Body
	want := []string{"*lang.ParamStmt", "*lang.AssignStmt", "*lang.ParamStmt", "*lang.AssignStmt", "*lang.UpdateStmt", "*lang.ReturnStmt"}
	for i, st := range body {
		if got := fmt.Sprintf("%T", st); i >= len(want) || got != want[i] {
			t.Fatalf("statement %d is %s, want %v", i, got, want)
		}
	}
	if p := body[2].(*lang.ParamStmt); p.Label != "h.2/v" {
		t.Errorf("the name clause gave %q", p.Label)
	}
	if u := body[4].(*lang.UpdateStmt); u.Name != "v" || sexpr(u.Value) != "v" {
		t.Errorf("update statement %+v", u)
	}
	if a := body[3].(*lang.AssignStmt); a.Names[0] != "update" {
		t.Errorf("the binding of update is %v", a.Names)
	}
	if _, err := Parse("bad.tdl", []byte("model m(x: f32[2]) {\n    v = param f32[2] name \"a\\nb\"\n    return x\n}\n")); err == nil || !strings.Contains(err.Error(), "bad parameter name") {
		t.Errorf("a name with a line break: %v", err)
	}
}
