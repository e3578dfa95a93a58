package interp

import (
	"fmt"
	"math"

	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/runtime/tensor"
)

// frame holds the current values of an instance's index variables, indexed
// by slot. Every worker goroutine has its own.
type frame struct {
	v     []int64
	fb    [][]float64 // the vector path's buffers, one per node
	nh, w int         // the vector path's block: nh rows of w elements
}

type (
	fexpr func(*frame) float64
	iexpr func(*frame) int64
)

// code is a compiled expression: f for a float dtype, i otherwise.
type code struct {
	f fexpr
	i iexpr
}

// evalError carries a run-time error out of compiled code as a panic; the
// workers recover it.
type evalError struct{ err error }

func fail(err error) { panic(evalError{err}) }

// compiler compiles the expressions of one instance evaluation.
type compiler struct {
	syms    map[string]int64
	slots   map[*ir.Var]int
	ext     []int64 // extent of each slot
	inScope []bool
	tensors map[*ir.Tensor]*tensor.Tensor
	byName  map[string]*tensor.Tensor
	pending map[*tensor.Tensor]bool // Def tensors not yet computed

	scalar bool // no vector path
	row    int  // the slot of the vector path's row variable, or -1
	blk    int  // the slot of the vector path's block variable, or -1
	nbuf   int  // vector buffers allocated so far
}

func (c *compiler) dim(d lang.Dim, pos lang.Pos) (int64, error) {
	n, err := d.Eval(c.syms)
	if err != nil {
		return 0, lang.Errorf(pos, "%v", err)
	}
	return n, nil
}

// bind brings vars into scope, giving each a slot.
func (c *compiler) bind(vars []*ir.Var, pos lang.Pos) ([]int, []int64, error) {
	slots := make([]int, len(vars))
	exts := make([]int64, len(vars))
	for i, v := range vars {
		s, ok := c.slots[v]
		if !ok {
			s = len(c.ext)
			c.slots[v] = s
			c.ext = append(c.ext, 0)
			c.inScope = append(c.inScope, false)
		}
		if c.inScope[s] {
			return nil, nil, lang.Errorf(pos, "index variable %s is bound twice", v.Name)
		}
		n, err := c.dim(v.Extent, pos)
		if err != nil {
			return nil, nil, err
		}
		c.ext[s] = n
		c.inScope[s] = true
		slots[i], exts[i] = s, n
	}
	return slots, exts, nil
}

func (c *compiler) unbind(slots []int) {
	for _, s := range slots {
		c.inScope[s] = false
	}
}

func (c *compiler) tensor(t *ir.Tensor, pos lang.Pos) (*tensor.Tensor, error) {
	x, ok := c.tensors[t]
	if !ok {
		x, ok = c.byName[t.Name]
	}
	if !ok {
		return nil, lang.Errorf(pos, "tensor %s is not an input, a local or an output of the instance", t.Name)
	}
	if c.pending[x] {
		return nil, lang.Errorf(pos, "tensor %s is read before it is defined", t.Name)
	}
	return x, nil
}

// compile compiles e natively: a float64 for a float dtype, an int64 (wrapped
// to the dtype) otherwise.
func (c *compiler) compile(e ir.Expr) (code, error) {
	switch e := e.(type) {
	case nil:
		return code{}, fmt.Errorf("nil expression")
	case *ir.Const:
		if e.T.IsFloat() {
			v := e.Float
			return code{f: func(*frame) float64 { return v }}, nil
		}
		v := e.T.WrapInt(e.Int)
		return code{i: func(*frame) int64 { return v }}, nil
	case *ir.Size:
		n, err := c.dim(e.D, lang.Pos{})
		if err != nil {
			return code{}, err
		}
		return code{i: func(*frame) int64 { return n }}, nil
	case *ir.VarRef:
		s, ok := c.slots[e.V]
		if !ok || !c.inScope[s] {
			return code{}, fmt.Errorf("index variable %s is used outside its scope", e.V.Name)
		}
		return code{i: func(f *frame) int64 { return f.v[s] }}, nil
	case *ir.Access:
		return c.access(e)
	case *ir.Binary:
		return c.binary(e)
	case *ir.Unary:
		return c.unary(e)
	case *ir.Select:
		return c.selectExpr(e)
	case *ir.Cast:
		x, err := c.compile(e.X)
		if err != nil {
			return code{}, err
		}
		return convert(x, e.X.Type(), e.T, true), nil
	case *ir.Call:
		return c.call(e)
	case *ir.Reduce:
		return c.reduce(e)
	case *ir.Opaque:
		return c.opaque(e)
	}
	return code{}, fmt.Errorf("unknown expression %T", e)
}

// compileTo compiles e and converts it implicitly (no float rounding) to t.
func (c *compiler) compileTo(e ir.Expr, t lang.DType) (code, error) {
	x, err := c.compile(e)
	if err != nil {
		return code{}, err
	}
	return convert(x, e.Type(), t, false), nil
}

// convert converts x of dtype from to dtype to, as Cast does; floats are
// rounded to a float target only when round is set.
func convert(x code, from, to lang.DType, round bool) code {
	switch {
	case to.IsFloat() && from.IsFloat():
		// Values of a float dtype are carried unrounded in float64, so
		// rounding applies even when from == to.
		if !round || to == lang.F64 {
			return x
		}
		f := x.f
		return code{f: func(fr *frame) float64 { return to.RoundFloat(f(fr)) }}
	case to.IsFloat():
		i := x.i
		if round && to != lang.F64 {
			return code{f: func(fr *frame) float64 { return to.RoundFloat(tensor.IntToFloat(from, i(fr))) }}
		}
		if from == lang.U64 {
			return code{f: func(fr *frame) float64 { return float64(uint64(i(fr))) }}
		}
		return code{f: func(fr *frame) float64 { return float64(i(fr)) }}
	case from.IsFloat():
		f := x.f
		return code{i: func(fr *frame) int64 { return tensor.FloatToInt(to, f(fr)) }}
	}
	if to == from || to == lang.I64 || to == lang.U64 || from == lang.Bool || intFits(from, to) {
		return x
	}
	i := x.i
	return code{i: func(fr *frame) int64 { return to.WrapInt(i(fr)) }}
}

// intFits reports whether every value of integer dtype a is a value of b.
func intFits(a, b lang.DType) bool {
	if b == lang.Bool {
		return false
	}
	if a.IsSigned() == b.IsSigned() {
		return a.Bits() <= b.Bits()
	}
	return !a.IsSigned() && a.Bits() < b.Bits()
}

// asFloat returns x of dtype t as a float64 (no rounding).
func asFloat(x code, t lang.DType) fexpr { return convert(x, t, lang.F64, false).f }

// truth returns x of dtype t as a bool "!= 0".
func truth(x code, t lang.DType) iexpr { return convert(x, t, lang.Bool, false).i }

func (c *compiler) unary(e *ir.Unary) (code, error) {
	x, err := c.compile(e.X)
	if err != nil {
		return code{}, err
	}
	xt := e.X.Type()
	switch e.Op {
	case "-":
		if xt.IsFloat() {
			f := x.f
			return convert(code{f: func(fr *frame) float64 { return -f(fr) }}, xt, e.T, false), nil
		}
		i, t := x.i, e.T
		if t.IsFloat() {
			t = lang.I64
		}
		return convert(code{i: func(fr *frame) int64 { return t.WrapInt(-i(fr)) }}, t, e.T, false), nil
	case "!":
		b := truth(x, xt)
		return convert(code{i: func(fr *frame) int64 { return 1 - b(fr) }}, lang.Bool, e.T, false), nil
	}
	return code{}, fmt.Errorf("unknown unary operator %q", e.Op)
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func (c *compiler) binary(e *ir.Binary) (code, error) {
	if a, ok := c.affine(e); ok {
		return code{i: a.eval()}, nil
	}
	l, err := c.compile(e.L)
	if err != nil {
		return code{}, err
	}
	r, err := c.compile(e.R)
	if err != nil {
		return code{}, err
	}
	lt, rt := e.L.Type(), e.R.Type()
	if e.Op == ir.OpAnd || e.Op == ir.OpOr {
		a, b := truth(l, lt), truth(r, rt)
		var out iexpr
		if e.Op == ir.OpAnd {
			out = func(f *frame) int64 {
				if a(f) == 0 {
					return 0
				}
				return b(f)
			}
		} else {
			out = func(f *frame) int64 {
				if a(f) != 0 {
					return 1
				}
				return b(f)
			}
		}
		return convert(code{i: out}, lang.Bool, e.T, false), nil
	}
	p := lang.Promote(lt, rt)
	if p.IsFloat() {
		a, b := asFloat(l, lt), asFloat(r, rt)
		if e.Op.IsComparison() {
			return convert(code{i: compare(e.Op, a, b)}, lang.Bool, e.T, false), nil
		}
		var out fexpr
		switch e.Op {
		case ir.OpAdd:
			out = func(f *frame) float64 { return a(f) + b(f) }
		case ir.OpSub:
			out = func(f *frame) float64 { return a(f) - b(f) }
		case ir.OpMul:
			out = func(f *frame) float64 { return a(f) * b(f) }
		case ir.OpDiv:
			out = func(f *frame) float64 { return a(f) / b(f) }
		case ir.OpMod:
			out = func(f *frame) float64 { return math.Mod(a(f), b(f)) }
		default:
			return code{}, fmt.Errorf("unknown binary operator %v", e.Op)
		}
		return convert(code{f: out}, lang.F64, e.T, false), nil
	}
	a, b := l.i, r.i
	if e.Op.IsComparison() {
		return convert(code{i: intCompare(e.Op, a, b, p == lang.U64)}, lang.Bool, e.T, false), nil
	}
	t := e.T
	if t.IsFloat() {
		t = p
	}
	var out iexpr
	unsigned := p == lang.U64
	switch e.Op {
	case ir.OpAdd:
		out = func(f *frame) int64 { return t.WrapInt(a(f) + b(f)) }
	case ir.OpSub:
		out = func(f *frame) int64 { return t.WrapInt(a(f) - b(f)) }
	case ir.OpMul:
		out = func(f *frame) int64 { return t.WrapInt(a(f) * b(f)) }
	case ir.OpDiv:
		out = func(f *frame) int64 {
			x, y := a(f), b(f)
			if y == 0 {
				return 0
			}
			if unsigned {
				return t.WrapInt(int64(uint64(x) / uint64(y)))
			}
			return t.WrapInt(x / y)
		}
	case ir.OpMod:
		out = func(f *frame) int64 {
			x, y := a(f), b(f)
			if y == 0 {
				return 0
			}
			if unsigned {
				return t.WrapInt(int64(uint64(x) % uint64(y)))
			}
			return t.WrapInt(x % y)
		}
	default:
		return code{}, fmt.Errorf("unknown binary operator %v", e.Op)
	}
	return convert(code{i: out}, t, e.T, false), nil
}

// compare builds a comparison of two compiled operands of one domain.
func compare[T float64 | int64 | uint64](op ir.BinOp, a, b func(*frame) T) iexpr {
	switch op {
	case ir.OpEq:
		return func(f *frame) int64 { return b2i(a(f) == b(f)) }
	case ir.OpNe:
		return func(f *frame) int64 { return b2i(a(f) != b(f)) }
	case ir.OpLt:
		return func(f *frame) int64 { return b2i(a(f) < b(f)) }
	case ir.OpLe:
		return func(f *frame) int64 { return b2i(a(f) <= b(f)) }
	case ir.OpGt:
		return func(f *frame) int64 { return b2i(a(f) > b(f)) }
	}
	return func(f *frame) int64 { return b2i(a(f) >= b(f)) }
}

// intCompare compares integers, as unsigned in the u64 domain.
func intCompare(op ir.BinOp, a, b iexpr, unsigned bool) iexpr {
	if unsigned {
		ua := func(f *frame) uint64 { return uint64(a(f)) }
		ub := func(f *frame) uint64 { return uint64(b(f)) }
		return compare(op, ua, ub)
	}
	return compare(op, a, b)
}

func (c *compiler) selectExpr(e *ir.Select) (code, error) {
	cc, err := c.compile(e.C)
	if err != nil {
		return code{}, err
	}
	a, err := c.compileTo(e.A, e.T)
	if err != nil {
		return code{}, err
	}
	b, err := c.compileTo(e.B, e.T)
	if err != nil {
		return code{}, err
	}
	cond := truth(cc, e.C.Type())
	if e.T.IsFloat() {
		fa, fb := a.f, b.f
		return code{f: func(f *frame) float64 {
			if cond(f) != 0 {
				return fa(f)
			}
			return fb(f)
		}}, nil
	}
	ia, ib := a.i, b.i
	return code{i: func(f *frame) int64 {
		if cond(f) != 0 {
			return ia(f)
		}
		return ib(f)
	}}, nil
}
