package parser

import (
	"github.com/alecthomas/participle/v2"
	"github.com/alecthomas/participle/v2/lexer"
)

// tdlLexer splits TDL text into tokens. Comments are kept as tokens so the
// formatter can find them; the grammar elides them.
var tdlLexer = lexer.MustSimple([]lexer.SimpleRule{
	{Name: "Comment", Pattern: `//[^\n]*`},
	{Name: "Whitespace", Pattern: `[ \t\r\n]+`},
	{Name: "String", Pattern: `"(\\.|[^"\\\n])*"`},
	{Name: "Float", Pattern: `\d+\.\d+([eE][-+]?\d+)?|\d+[eE][-+]?\d+`},
	{Name: "Int", Pattern: `\d+`},
	{Name: "Ident", Pattern: `[A-Za-z_][A-Za-z0-9_]*`},
	{Name: "Punct", Pattern: `->|==|!=|<=|>=|&&|\|\||\.\.|[-+*/%<>=!()\[\]{},:;]`},
})

type gFile struct {
	Decls []*gDecl `parser:"( @@ ';'? )*"`
}

type gDecl struct {
	Import *gImport `parser:"  @@"`
	Op     *gOp     `parser:"| @@"`
	Model  *gModel  `parser:"| @@"`
	Rule   *gRule   `parser:"| @@"`
}

type gImport struct {
	Pos  lexer.Position
	Path string `parser:"'import' @String"`
}

type gAttrDecl struct {
	Pos     lexer.Position
	Name    string     `parser:"@Ident"`
	Type    string     `parser:"( ':' @Ident )?"`
	Default *gAttrExpr `parser:"( '=' @@ )?"`
}

type gAttrDecls struct {
	List []*gAttrDecl `parser:"'<' ( @@ ( ',' @@ )* )? '>'"`
}

type gOp struct {
	Pos     lexer.Position
	Name    string      `parser:"'op' @Ident"`
	Attrs   *gAttrDecls `parser:"@@?"`
	Inputs  []*gTensor  `parser:"'(' ( @@ ( ',' @@ )* )? ')'"`
	Outputs []*gTensor  `parser:"'->' ( '(' @@ ( ',' @@ )* ')' | @@ )"`
	Lets    []*gLet     `parser:"'=' @@*"`
	Bodies  []*gExpr    `parser:"( '(' @@ ( ',' @@ )* ')' | @@ )"`
}

type gTensor struct {
	Pos   lexer.Position
	Name  string     `parser:"( @Ident ':' )?"`
	DType string     `parser:"@Ident?"`
	Shape []*gDimPat `parser:"'[' ( @@ ( ',' @@ )* )? ']'"`
}

type gDimPat struct {
	Pos  lexer.Position
	Func *gCall  `parser:"  '*' @@"`
	Pack string  `parser:"| '*' @Ident"`
	Len  *gArith `parser:"  ( ':' @@ )?"`
	Expr *gArith `parser:"| @@"`
}

type gLet struct {
	Pos   lexer.Position
	Name  string      `parser:"'let' @Ident"`
	Shape *gShapeList `parser:"( ':' @@ )? '='"`
	Value *gExpr      `parser:"@@ 'in'"`
}

type gShapeList struct {
	Dims []*gDimPat `parser:"'[' ( @@ ( ',' @@ )* )? ']'"`
}

type gModel struct {
	Pos    lexer.Position
	Name   string      `parser:"'model' @Ident"`
	Attrs  *gAttrDecls `parser:"@@?"`
	Inputs []*gTensor  `parser:"'(' ( @@ ( ',' @@ )* )? ')'"`
	Body   *gBlockBody `parser:"@@"`
}

type gBlockBody struct {
	Stmts []*gStmt `parser:"'{' ( @@ ';'? )*"`
	Close *gClose  `parser:"@@"`
}

// gClose is a closing brace, kept for its position.
type gClose struct {
	Pos   lexer.Position
	Brace string `parser:"@'}'"`
}

type gRule struct {
	Pos   lexer.Position
	Name  string      `parser:"'rule' @Ident"`
	Attrs *gAttrDecls `parser:"@@?"`
	Vars  []*gTensor  `parser:"'(' ( @@ ( ',' @@ )* )? ')' ':'"`
	Body  *gExpr      `parser:"@@"`
}

type gStmt struct {
	Assert *gAssert `parser:"  @@"`
	Return *gReturn `parser:"| @@"`
	For    *gFor    `parser:"| @@"`
	If     *gIf     `parser:"| @@"`
	Block  *gBlock  `parser:"| @@"`
	Param  *gParam  `parser:"| @@"`
	Update *gUpdate `parser:"| @@"`
	Assign *gAssign `parser:"| @@"`
}

type gAssert struct {
	Pos  lexer.Position
	Cond *gExpr `parser:"'assert' @@"`
	Msg  string `parser:"( ',' @String )?"`
}

type gReturn struct {
	Pos    lexer.Position
	Values []*gExpr `parser:"'return' @@ ( ',' @@ )*"`
}

type gFor struct {
	Pos  lexer.Position
	Var  string      `parser:"'for' @Ident 'in'"`
	From *gArith     `parser:"@@ '..'"`
	To   *gArith     `parser:"@@"`
	Body *gBlockBody `parser:"@@"`
}

type gIf struct {
	Pos    lexer.Position
	Cond   *gExpr      `parser:"'if' @@"`
	Then   *gBlockBody `parser:"@@"`
	ElseIf *gIf        `parser:"( 'else' ( @@"`
	Else   *gBlockBody `parser:"| @@ ) )?"`
}

type gBlock struct {
	Pos    lexer.Position
	Name   string      `parser:"'block' @Ident"`
	Attrs  *gAttrDecls `parser:"@@?"`
	Params []string    `parser:"'(' ( @Ident ( ',' @Ident )* )? ')'"`
	Body   *gBlockBody `parser:"@@"`
}

type gParam struct {
	Pos   lexer.Position
	Name  string     `parser:"@Ident '=' 'param'"`
	DType string     `parser:"@Ident?"`
	Shape []*gDimPat `parser:"'[' ( @@ ( ',' @@ )* )? ']'"`
	Init  *gCall     `parser:"( 'init' @@ )?"`
	Label string     `parser:"( 'name' @String )?"`
}

type gUpdate struct {
	Pos   lexer.Position
	Name  string `parser:"'update' @Ident '='"`
	Value *gExpr `parser:"@@"`
}

type gAssign struct {
	Pos   lexer.Position
	Names []string `parser:"@Ident ( ',' @Ident )* '='"`
	Value *gExpr   `parser:"@@"`
}

// gExpr is a lambda or a flat sequence of binary operations.
type gExpr struct {
	Pos    lexer.Position
	Lambda *gLambda `parser:"  @@"`
	Binary *gBinary `parser:"| @@"`
}

type gLambda struct {
	Pos    lexer.Position
	Params []*gParamVar `parser:"'lambda' ( @@ ( ',' @@ )* )? ':'"`
	Body   *gExpr       `parser:"@@"`
}

type gParamVar struct {
	Pos   lexer.Position
	Pack  bool    `parser:"@'*'?"`
	Name  string  `parser:"@Ident"`
	Bound *gBound `parser:"( '<' @@ )?"`
}

// gBound is the extent of a lambda variable: like gDimPat, without a pack
// length (its ':' would be the lambda's).
type gBound struct {
	Pos  lexer.Position
	Func *gCall  `parser:"  '*' @@"`
	Pack string  `parser:"| '*' @Ident"`
	Expr *gArith `parser:"| @@"`
}

type gBinary struct {
	Pos   lexer.Position
	Head  *gUnary    `parser:"@@"`
	Terms []*gOpTerm `parser:"@@*"`
}

type gOpTerm struct {
	Pos lexer.Position
	Op  string  `parser:"@( '+' | '-' | '*' | '/' | '%' | '==' | '!=' | '<=' | '>=' | '<' | '>' | '&&' | '||' )"`
	X   *gUnary `parser:"@@"`
}

// gArith is a binary sequence without comparisons or logic, used where a
// following '>' or ':' must end the expression (attributes, dimensions).
type gArith struct {
	Pos   lexer.Position
	Head  *gUnary       `parser:"@@"`
	Terms []*gArithTerm `parser:"@@*"`
}

type gArithTerm struct {
	Pos lexer.Position
	Op  string  `parser:"@( '+' | '-' | '*' | '/' | '%' )"`
	X   *gUnary `parser:"@@"`
}

type gUnary struct {
	Pos      lexer.Position
	Ops      []string   `parser:"@( '-' | '!' )*"`
	Primary  *gPrimary  `parser:"@@"`
	Suffixes []*gSuffix `parser:"@@*"`
}

type gSuffix struct {
	Pos     lexer.Position
	Index   []*gIndexElem `parser:"'[' ( @@ ( ',' @@ )* )? ']'"`
	Default *gUnary       `parser:"( 'else' @@ )?"`
}

type gIndexElem struct {
	Pos   lexer.Position
	Slice bool   `parser:"  @':'"`
	Func  *gCall `parser:"| '*' @@"`
	Pack  string `parser:"| '*' @Ident"`
	Expr  *gExpr `parser:"| @@"`
}

type gPrimary struct {
	Pos   lexer.Position
	Call  *gCall     `parser:"  @@"`
	Float string     `parser:"| @Float"`
	Int   string     `parser:"| @Int"`
	Str   string     `parser:"| @String"`
	Ident string     `parser:"| @Ident"`
	Paren *gExpr     `parser:"| '(' @@ ')'"`
	List  *gAttrList `parser:"| @@"`
}

type gCall struct {
	Pos    lexer.Position
	Opaque bool       `parser:"@'opaque'?"`
	Name   string     `parser:"@Ident"`
	Attrs  *gAttrArgs `parser:"@@?"`
	Args   []*gExpr   `parser:"'(' ( @@ ( ',' @@ )* )? ')'"`
}

type gAttrArgs struct {
	List []*gAttrArg `parser:"'<' @@ ( ',' @@ )* '>'"`
}

type gAttrArg struct {
	Pos   lexer.Position
	Name  string     `parser:"@Ident '='"`
	Value *gAttrExpr `parser:"@@"`
}

type gAttrExpr struct {
	Pos   lexer.Position
	List  *gAttrList `parser:"  @@"`
	Arith *gArith    `parser:"| @@"`
}

type gAttrList struct {
	Pos   lexer.Position
	Elems []*gExpr `parser:"'[' ( @@ ( ',' @@ )* )? ']'"`
}

var tdlParser = participle.MustBuild[gFile](
	participle.Lexer(tdlLexer),
	participle.Elide("Whitespace", "Comment"),
	participle.UseLookahead(4),
)
