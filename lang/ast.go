package lang

// The syntax tree of a TDL file, as written. Nothing here is resolved or
// checked; analysis/check turns it into IR.

// File is one parsed .tdl file.
type File struct {
	Path     string
	Imports  []*Import
	Ops      []*OpDecl
	Models   []*ModelDecl
	Rules    []*RuleDecl
	Comments []Comment // every comment, in source order, for the formatter
	Order    []Decl    // the declarations in source order
}

// Decl is a top-level declaration.
type Decl interface{ DeclPos() Pos }

// Comment is a `//` comment, Text including the slashes. Trailing marks a
// comment that follows code on its line.
type Comment struct {
	Pos      Pos
	Text     string
	Trailing bool
}

// Import is `import "PATH"`.
type Import struct {
	Pos  Pos
	Path string
}

// AttrDecl declares a compile-time attribute: `name = default`,
// `name: type` or `name: type = default`.
type AttrDecl struct {
	Pos     Pos
	Name    string
	Type    string // "", "int", "float", "bool", "string", "list"
	Default Expr   // nil when the attribute is required
}

// DimPat is one entry of a shape pattern: a dimension expression, a pack
// `*NAME` (optionally `*NAME:LEN`), or a spliced pack function `*f(...)`.
type DimPat struct {
	Pos  Pos
	Expr Expr   // a dimension expression, when Pack == "" and Func == nil
	Pack string // pack name for `*NAME`
	Len  Expr   // pack length for `*NAME:LEN`, may be nil
	Func *Call  // `*broadcast(A, B)` and friends
}

// TensorDecl is a named tensor with an optional dtype and a shape pattern:
// an operator input or output, a model input, or a rule variable.
type TensorDecl struct {
	Pos   Pos
	Name  string
	DType string // "" when not written
	Shape []DimPat
}

// LetDecl is `let NAME = EXPR in` inside an operator body: a local tensor.
type LetDecl struct {
	Pos   Pos
	Name  string
	Shape []DimPat // nil: extents inferred from the body's accesses
	Value Expr
}

// OpDecl is `op NAME<attrs>(inputs) -> outputs = body`.
type OpDecl struct {
	Pos     Pos
	Name    string
	Attrs   []*AttrDecl
	Inputs  []*TensorDecl
	Outputs []*TensorDecl // Name may be empty
	Lets    []*LetDecl
	Bodies  []Expr // one lambda (or opaque expression) per output
}

// ModelDecl is `model NAME<attrs>(inputs) { statements }`.
type ModelDecl struct {
	Pos    Pos
	Name   string
	Attrs  []*AttrDecl
	Inputs []*TensorDecl
	Body   []Stmt
	End    Pos // the closing brace
}

// RuleDecl is `rule NAME(vars): lhs == rhs`.
type RuleDecl struct {
	Pos   Pos
	Name  string
	Attrs []*AttrDecl
	Vars  []*TensorDecl
	LHS   Expr
	RHS   Expr
}

func (d *Import) DeclPos() Pos    { return d.Pos }
func (d *OpDecl) DeclPos() Pos    { return d.Pos }
func (d *ModelDecl) DeclPos() Pos { return d.Pos }
func (d *RuleDecl) DeclPos() Pos  { return d.Pos }

// Stmt is a statement in a model or block body.
type Stmt interface{ StmtPos() Pos }

// AssignStmt binds names: `y = EXPR` or `a, b = EXPR` for several outputs.
type AssignStmt struct {
	Pos   Pos
	Names []string
	Value Expr
}

// ParamStmt declares a parameter: `w = param f32[784, hidden] init normal(std = 0.02)`,
// optionally with the name it has in the graph and in parameter files
// (`name "h.2/w1"`; default: its binding's, after the blocks' path).
type ParamStmt struct {
	Pos   Pos
	Name  string
	DType string
	Shape []DimPat
	Init  *Call  // nil: the default initialiser
	Label string // "": the binding's name
}

// UpdateStmt is `update w = EXPR`: in a training graph, parameter w's
// value for the next step is EXPR instead of an optimizer's update, and no
// gradient trains it (a buffer, such as batch norm's running mean);
// `update w = w` freezes w. A model's inference graph ignores it.
type UpdateStmt struct {
	Pos   Pos
	Name  string
	Value Expr
}

// AssertStmt is `assert COND, "message"`: a compile-time condition on
// attributes that must hold (e.g. a supported depth).
type AssertStmt struct {
	Pos  Pos
	Cond Expr
	Msg  string // "" when not given
}

// ReturnStmt is `return a, b`.
type ReturnStmt struct {
	Pos    Pos
	Values []Expr
}

// ForStmt is a compile-time loop `for i in FROM..TO { ... }` (TO excluded).
type ForStmt struct {
	Pos      Pos
	Var      string
	From, To Expr
	Body     []Stmt
	End      Pos
}

// IfStmt is a compile-time conditional.
type IfStmt struct {
	Pos  Pos
	Cond Expr
	Then []Stmt
	Else []Stmt // nil when absent
	End  Pos
}

// BlockStmt defines a reusable block: `block NAME<attrs>(params) { ... }`.
type BlockStmt struct {
	Pos    Pos
	Name   string
	Attrs  []*AttrDecl
	Params []string
	Body   []Stmt
	End    Pos
}

func (s *AssignStmt) StmtPos() Pos { return s.Pos }
func (s *ParamStmt) StmtPos() Pos  { return s.Pos }
func (s *UpdateStmt) StmtPos() Pos { return s.Pos }
func (s *ReturnStmt) StmtPos() Pos { return s.Pos }
func (s *AssertStmt) StmtPos() Pos { return s.Pos }
func (s *ForStmt) StmtPos() Pos    { return s.Pos }
func (s *IfStmt) StmtPos() Pos     { return s.Pos }
func (s *BlockStmt) StmtPos() Pos  { return s.Pos }

// Expr is an expression node.
type Expr interface{ ExprPos() Pos }

// Num is a numeric literal; IsFloat when written with a point or exponent.
type Num struct {
	Pos     Pos
	Text    string
	IsFloat bool
	Int     int64
	Float   float64
}

// StrLit is a string literal (attribute values only).
type StrLit struct {
	Pos   Pos
	Value string
}

// BoolLit is true or false.
type BoolLit struct {
	Pos   Pos
	Value bool
}

// Ident is a name: an index variable, tensor, attribute or symbol.
type Ident struct {
	Pos  Pos
	Name string
}

// Binary is `L op R` for + - * / % == != < <= > >= && ||.
type Binary struct {
	Pos  Pos
	Op   string
	L, R Expr
}

// Unary is `-X` or `!X`.
type Unary struct {
	Pos Pos
	Op  string
	X   Expr
}

// AttrArg is `name = value` at a call site.
type AttrArg struct {
	Pos   Pos
	Name  string
	Value Expr
}

// Call is `NAME<attrs>(args)`: an operator, a block, a math function, a
// reducer, select, or a compile-time function. Opaque marks `opaque NAME(...)`.
type Call struct {
	Pos    Pos
	Name   string
	Attrs  []*AttrArg
	Args   []Expr
	Opaque bool
}

// IndexElem is one position of an index list: an expression, a full slice
// `:`, a pack splice `*i`, or a spliced compile-time function `*f(...)`.
type IndexElem struct {
	Pos   Pos
	Expr  Expr // nil for `:` and splices
	Slice bool // `:`
	Pack  string
	Func  *Call
}

// Index is `X[idx, ...]`, with `else DEFAULT` for out-of-range accesses.
type Index struct {
	Pos     Pos
	X       Expr
	Idx     []*IndexElem
	Default Expr // nil when absent
}

// LambdaParam is a lambda variable: `i`, `k < K`, a pack `*i`, or a pack
// with explicit extents `*r < *pick(S, axes)`.
type LambdaParam struct {
	Pos   Pos
	Name  string
	Pack  bool
	Bound *DimPat // explicit extent(s), nil when inferred
}

// Lambda is `lambda params: body`.
type Lambda struct {
	Pos    Pos
	Params []*LambdaParam
	Body   Expr
}

// List is `[a, b, c]` (attribute values).
type List struct {
	Pos   Pos
	Elems []Expr
}

// Paren is a parenthesised expression, kept for the formatter.
type Paren struct {
	Pos Pos
	X   Expr
}

func (e *Num) ExprPos() Pos     { return e.Pos }
func (e *StrLit) ExprPos() Pos  { return e.Pos }
func (e *BoolLit) ExprPos() Pos { return e.Pos }
func (e *Ident) ExprPos() Pos   { return e.Pos }
func (e *Binary) ExprPos() Pos  { return e.Pos }
func (e *Unary) ExprPos() Pos   { return e.Pos }
func (e *Call) ExprPos() Pos    { return e.Pos }
func (e *Index) ExprPos() Pos   { return e.Pos }
func (e *Lambda) ExprPos() Pos  { return e.Pos }
func (e *List) ExprPos() Pos    { return e.Pos }
func (e *Paren) ExprPos() Pos   { return e.Pos }
