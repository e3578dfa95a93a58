// Package ir is tofuc's lambda IR: operator instances with fixed ranks and every attribute
// substituted, and the dataflow graph of a model built from them. Shapes may
// still hold shape symbols (a symbolic batch, or a standalone check of an
// operator); everything else is concrete. Lowering an instance to loops is
// direct: each Def is a loop nest over its Vars around its Body, and each
// Reduce is an inner loop nest. The checker (analysis/check) builds it; the
// interpreter, analyses and code generator read it.
package ir

import "tofuc/lang"

// Var is an index variable ranging over [0, Extent).
type Var struct {
	Name   string
	Extent lang.Dim
}

// Tensor is a typed, shaped tensor an instance reads or defines.
type Tensor struct {
	Name  string
	DType lang.DType
	Shape []lang.Dim
}

// Rank is the number of dimensions.
func (t *Tensor) Rank() int { return len(t.Shape) }

// Def defines a tensor element-wise: Tensor[Vars...] = Body.
type Def struct {
	Pos    lang.Pos
	Tensor *Tensor
	Vars   []*Var // one per dimension; Vars[i].Extent equals Tensor.Shape[i]
	Body   Expr
}

// AttrValue is a compile-time attribute value.
type AttrValue struct {
	Kind  AttrKind
	Int   int64
	Float float64
	Bool  bool
	Str   string
	List  []AttrValue
}

// IntList is the attribute value listing xs.
func IntList(xs ...int64) AttrValue {
	v := AttrValue{Kind: AttrList}
	for _, x := range xs {
		v.List = append(v.List, AttrValue{Kind: AttrInt, Int: x})
	}
	return v
}

// AttrKind is the kind of an attribute value.
type AttrKind uint8

// Attribute kinds.
const (
	AttrInt AttrKind = iota
	AttrFloat
	AttrBool
	AttrString
	AttrList
)

// Attr is a named attribute value of an instance, in declaration order.
type Attr struct {
	Name  string
	Value AttrValue
}

// Instance is an operator specialised to attribute values, input dtypes and
// input shapes: the unit that every pass after the checker reads.
type Instance struct {
	Op      string
	Pos     lang.Pos // the operator's declaration
	Attrs   []Attr
	Inputs  []*Tensor
	Locals  []*Def // `let` tensors, defined in order before the outputs
	Outputs []*Def
}

// Expr is an IR expression. Every node has a dtype; index arithmetic is I64
// and comparisons are Bool.
type Expr interface{ Type() lang.DType }

// Const is a constant; integers and bools use Int, floats use Float.
type Const struct {
	T     lang.DType
	Int   int64
	Float float64
}

// Size is a dimension expression used as a value (e.g. `n - N` in concat,
// or dividing by a reduced extent); it may hold shape symbols.
type Size struct{ D lang.Dim }

// VarRef reads an index variable.
type VarRef struct{ V *Var }

// Access reads T[Index...]; when Default is not nil it is the value of an
// access whose index falls outside T.
type Access struct {
	Pos     lang.Pos
	T       *Tensor
	Index   []Expr
	Default Expr
}

// BinOp is a binary operator.
type BinOp uint8

// Binary operators. Division and remainder truncate on integers, as in C.
const (
	OpAdd BinOp = iota
	OpSub
	OpMul
	OpDiv
	OpMod
	OpEq
	OpNe
	OpLt
	OpLe
	OpGt
	OpGe
	OpAnd
	OpOr
)

var binOpNames = [...]string{"+", "-", "*", "/", "%", "==", "!=", "<", "<=", ">", ">=", "&&", "||"}

func (o BinOp) String() string { return binOpNames[o] }

// IsComparison reports whether o yields a bool from two numbers.
func (o BinOp) IsComparison() bool { return o >= OpEq && o <= OpGe }

// Binary applies Op to L and R; T is the result dtype (operands are
// converted to the operand dtype Promote(L, R) first).
type Binary struct {
	Op   BinOp
	L, R Expr
	T    lang.DType
}

// Unary is negation ("-") or logical not ("!").
type Unary struct {
	Op string
	X  Expr
	T  lang.DType
}

// Call applies an element-wise math function (see MathFuncs).
type Call struct {
	Fn   string
	Args []Expr
	T    lang.DType
}

// Select is `select(C, A, B)`; only the chosen branch is evaluated.
type Select struct {
	C, A, B Expr
	T       lang.DType
}

// Cast converts X to T.
type Cast struct {
	X Expr
	T lang.DType
}

// Reducer is a commutative, associative combination with an identity.
type Reducer uint8

// Reducers.
const (
	Sum Reducer = iota
	Max
	Min
	Prod
)

var reducerNames = [...]string{"sum", "max", "min", "prod"}

func (r Reducer) String() string { return reducerNames[r] }

// Reduce combines Body over every value of Vars.
type Reduce struct {
	Kind Reducer
	Vars []*Var
	Body Expr
	T    lang.DType
}

// View is an argument of an opaque call: T with some dimensions fixed by
// Index and the others (nil entries) passed whole, in order.
type View struct {
	T     *Tensor
	Index []Expr
}

// Opaque reads element Index of the result of an opaque function applied to
// views of tensors (Tofu's Opaque, e.g. a batched Cholesky).
type Opaque struct {
	Pos   lang.Pos
	Fn    string
	Args  []*View
	Shape []lang.Dim // the shape of the function's result
	Index []Expr
	T     lang.DType
}

func (e *Const) Type() lang.DType  { return e.T }
func (e *Size) Type() lang.DType   { return lang.I64 }
func (e *VarRef) Type() lang.DType { return lang.I64 }
func (e *Access) Type() lang.DType { return e.T.DType }
func (e *Binary) Type() lang.DType { return e.T }
func (e *Unary) Type() lang.DType  { return e.T }
func (e *Call) Type() lang.DType   { return e.T }
func (e *Select) Type() lang.DType { return e.T }
func (e *Cast) Type() lang.DType   { return e.T }
func (e *Reduce) Type() lang.DType { return e.T }
func (e *Opaque) Type() lang.DType { return e.T }

// MathFuncs lists the element-wise functions of TDL with their arity.
var MathFuncs = map[string]int{
	"exp": 1, "log": 1, "sqrt": 1, "rsqrt": 1, "tanh": 1, "sigmoid": 1, "erf": 1,
	"abs": 1, "sin": 1, "cos": 1, "tan": 1, "asin": 1, "acos": 1, "atan": 1,
	"sinh": 1, "cosh": 1, "asinh": 1, "acosh": 1, "atanh": 1, "floor": 1,
	"ceil": 1, "round": 1, "sign": 1, "reciprocal": 1, "isnan": 1, "isinf": 1,
	"pow": 2, "max": 2, "min": 2, "atan2": 2,
}

// Children returns the expressions directly below e (an opaque view's
// whole dimensions, which have no expression, are skipped).
func Children(e Expr) []Expr {
	switch e := e.(type) {
	case *Access:
		if e.Default != nil {
			return append(append([]Expr(nil), e.Index...), e.Default)
		}
		return e.Index
	case *Binary:
		return []Expr{e.L, e.R}
	case *Unary:
		return []Expr{e.X}
	case *Call:
		return e.Args
	case *Select:
		return []Expr{e.C, e.A, e.B}
	case *Cast:
		return []Expr{e.X}
	case *Reduce:
		return []Expr{e.Body}
	case *Opaque:
		var out []Expr
		for _, v := range e.Args {
			for _, x := range v.Index {
				if x != nil {
					out = append(out, x)
				}
			}
		}
		return append(out, e.Index...)
	}
	return nil
}

// Walk calls f on e and every expression below it, parents first; when f
// returns false the children of that node are skipped.
func Walk(e Expr, f func(Expr) bool) {
	if e == nil || !f(e) {
		return
	}
	for _, c := range Children(e) {
		Walk(c, f)
	}
}

// Graph is a model's dataflow graph.
type Graph struct {
	Name    string
	Inputs  []*Value
	Params  []*Param
	Nodes   []*Node // in a topological order
	Outputs []*Value
}

// LabelClasses is the number of classes of an integer input that is the
// label of the graph's training loss (its prediction's last extent), or
// 0 when v is no such input.
func (g *Graph) LabelClasses(v *Value) int64 {
	if v.DType.IsFloat() {
		return 0
	}
	for _, n := range g.Nodes {
		if n.Role == "loss" && len(n.Inputs) == 2 && n.Inputs[1] == v {
			shape := n.Inputs[0].Shape
			c, _ := shape[len(shape)-1].IsConst()
			return c
		}
	}
	return 0
}

// Value is a tensor flowing along the graph's edges.
type Value struct {
	Name  string
	DType lang.DType
	Shape []lang.Dim
	Const *ConstData // non-nil for a literal constant in the model
	// GradOf is the value this one is the gradient of, in a training graph.
	GradOf *Value
}

// ConstData is a literal scalar in a model expression (`x * 0.5`).
type ConstData struct {
	Float float64
	Int   int64
}

// Param is a trained parameter with its initialiser.
type Param struct {
	Value *Value
	Init  Init
	Pos   lang.Pos
	// Update, when not nil, is the parameter's value for the next
	// training step (`update w = EXPR`): a buffer, which no gradient
	// trains; Update == Value freezes it. UpdatePos is the statement.
	Update    *Value
	UpdatePos lang.Pos
}

// Trained says whether an optimizer trains the parameter.
func (p *Param) Trained() bool { return p.Update == nil }

// Init says how a parameter is initialised from the seed.
type Init struct {
	Kind string    // "normal", "uniform", "zeros", "ones", "const", "glorot", "he"
	Args []float64 // kind-specific (mean and std; low and high; the constant)
}

// Node applies an instance to values.
type Node struct {
	Name    string // unique in the graph, e.g. "layer2.conv1"
	Inst    *Instance
	Inputs  []*Value
	Outputs []*Value
	Pos     lang.Pos // the call site
	// Origin says where the node came from when its source is not the
	// user's: the ONNX node an imported model's statement converts
	// (check.Module.Origins); empty otherwise.
	Origin string
	// Forward is the forward node a backward node belongs to, in a
	// training graph (Tofu's coarsening groups them).
	Forward *Node
	// Role says what the node does in a training graph: "forward",
	// "loss", "backward", "gradient sum" or "update" ("" in a model).
	Role string
}

// CallsOpaque reports whether an instance's locals or outputs call an
// opaque function.
func (in *Instance) CallsOpaque() bool {
	found := false
	for _, d := range append(append([]*Def(nil), in.Locals...), in.Outputs...) {
		Walk(d.Body, func(e Expr) bool {
			if _, ok := e.(*Opaque); ok {
				found = true
			}
			return !found
		})
	}
	return found
}
