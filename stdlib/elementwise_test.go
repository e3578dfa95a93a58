package stdlib_test

import (
	"math"

	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/runtime/tensor"
)

// Interpreter cases for stdlib/elementwise.tdl. Expectations come from
// hand-written tensors or from Go's math package applied element by element
// through ewMap, a direct NumPy-style broadcasting loop.

var (
	ewNaN  = math.NaN()
	ewInf  = math.Inf(1)
	ewNInf = math.Inf(-1)
)

// ewT builds a tensor of dtype dt from float values (rounded to dt).
func ewT(dt lang.DType, shape []int, vals ...float64) *tensor.Tensor {
	return tensor.FromFloats(dt, shape, vals)
}

// ewI builds an integer tensor of dtype dt (values wrapped to its width).
func ewI(dt lang.DType, shape []int, vals ...int64) *tensor.Tensor {
	return tensor.FromInts(dt, shape, vals)
}

// ewB builds a bool tensor.
func ewB(shape []int, vals ...bool) *tensor.Tensor {
	t := tensor.New(lang.Bool, shape)
	for i, v := range vals {
		if v {
			t.I[i] = 1
		}
	}
	return t
}

// ewBroadcastShape is NumPy's broadcast of shapes: right-aligned, extent-1
// dimensions stretch.
func ewBroadcastShape(shapes ...[]int) []int {
	rank := 0
	for _, s := range shapes {
		rank = max(rank, len(s))
	}
	out := make([]int, rank)
	for i := range out {
		out[i] = 1
	}
	for _, s := range shapes {
		for d, n := range s {
			o := rank - len(s) + d
			switch {
			case n == out[o] || n == 1:
			case out[o] == 1:
				out[o] = n
			default:
				panic("shapes do not broadcast")
			}
		}
	}
	return out
}

// ewMap applies f element-wise to the broadcast inputs and stores the
// results in a tensor of dtype dt (rounded or converted as by SetFlat).
func ewMap(dt lang.DType, f func(v ...float64) float64, ins ...*tensor.Tensor) *tensor.Tensor {
	shapes := make([][]int, len(ins))
	for i, x := range ins {
		shapes[i] = x.Shape
	}
	shape := ewBroadcastShape(shapes...)
	out := tensor.New(dt, shape)
	vals := make([]float64, len(ins))
	for flat := range out.Len() {
		idx := ewUnflat(flat, shape)
		for k, x := range ins {
			off := 0
			for d, n := range x.Shape {
				j := idx[len(shape)-len(x.Shape)+d]
				if n == 1 {
					j = 0
				}
				off = off*n + j
			}
			vals[k] = x.Flat(off)
		}
		out.SetFlat(flat, f(vals...))
	}
	return out
}

// ewUnflat is the row-major index of flat position i in shape.
func ewUnflat(i int, shape []int) []int {
	idx := make([]int, len(shape))
	for d := len(shape) - 1; d >= 0; d-- {
		idx[d] = i % shape[d]
		i /= shape[d]
	}
	return idx
}

// ewCase expects ewMap(dt, f, inputs...).
func ewCase(op, name string, attrs map[string]ir.AttrValue, dt lang.DType, tol float64, f func(v ...float64) float64, ins ...*tensor.Tensor) opCase {
	return opCase{op: op, name: name, attrs: attrs, inputs: ins, tol: tol,
		want: func(in []*tensor.Tensor) []*tensor.Tensor { return []*tensor.Tensor{ewMap(dt, f, in...)} }}
}

// ewFixed expects the given tensors (written out by hand).
func ewFixed(op, name string, attrs map[string]ir.AttrValue, want *tensor.Tensor, ins ...*tensor.Tensor) opCase {
	return opCase{op: op, name: name, attrs: attrs, inputs: ins,
		want: func([]*tensor.Tensor) []*tensor.Tensor { return []*tensor.Tensor{want} }}
}

func ewB2F(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// ewPyMod is Python's (and NumPy's) float modulo: the sign of the divisor.
func ewPyMod(a, b float64) float64 {
	r := math.Mod(a, b)
	if r != 0 && (r < 0) != (b < 0) {
		r += b
	}
	return r
}

// ewAttrs builds an attribute map from name/value pairs.
func ewAttrs(kv ...any) map[string]ir.AttrValue {
	m := map[string]ir.AttrValue{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1].(ir.AttrValue)
	}
	return m
}

func init() {
	f32 := lang.F32
	s := func(dims ...int) []int { return dims }

	// A shared f32 pair: [2, 3] and [3] (with NaN and infinities).
	a23 := ewT(f32, s(2, 3), 1.5, -2, 0, 7, ewNaN, -0.25)
	b3 := ewT(f32, s(3), 0.5, -2, 4)
	x214 := randn(11, 2, 1, 4)
	y31 := randn(12, 3, 1)
	m22 := ewT(f32, s(2, 2), 1, 2, 3, 4)
	sc := ewT(f32, nil, 10)

	add := func(v ...float64) float64 { return v[0] + v[1] }
	sub := func(v ...float64) float64 { return v[0] - v[1] }
	mul := func(v ...float64) float64 { return v[0] * v[1] }
	div := func(v ...float64) float64 { return v[0] / v[1] }

	register(
		// Broadcasting shapes, checked against hand-written results.
		ewFixed("add", "f32 [2,3]+[3] by hand", nil,
			ewT(f32, s(2, 3), 2, -4, 4, 7.5, ewNaN, 3.75), a23, b3),
		ewCase("add", "f32 [2,1,4]+[3,1]", nil, f32, 0, add, x214, y31),
		ewFixed("add", "f32 [2,2]+rank 0", nil, ewT(f32, s(2, 2), 11, 12, 13, 14), m22, sc),
		ewFixed("add", "f32 rank 0+[3]", nil, ewT(f32, s(3), 10.5, 8, 14), sc, b3),
		ewFixed("add", "f32 rank 0+rank 0", nil, ewT(f32, nil, 20), sc, sc),
		ewFixed("add", "i32 wraps", nil,
			ewI(lang.I32, s(3), math.MinInt32, 0, -3),
			ewI(lang.I32, s(3), math.MaxInt32, math.MaxInt32, -5), ewI(lang.I32, s(3), 1, -math.MaxInt32, 2)),
		ewCase("add", "i8 wraps, broadcast [2,3]+[3]", nil, lang.I8, 0,
			func(v ...float64) float64 { return float64(int8(v[0]) + int8(v[1])) },
			ewI(lang.I8, s(2, 3), 127, -128, 100, 0, 5, -100), ewI(lang.I8, s(3), 1, -1, 100)),
		ewFixed("add", "i8 + i32 promotes to i32", nil, ewI(lang.I32, s(2), 227, -129),
			ewI(lang.I8, s(2), 127, -128), ewI(lang.I32, s(2), 100, -1)),

		ewFixed("sub", "f32 [2,3]-[3] by hand", nil,
			ewT(f32, s(2, 3), 1, 0, -4, 6.5, ewNaN, -4.25), a23, b3),
		ewCase("sub", "f32 [3,1]-[2,1,4]", nil, f32, 0, sub, y31, x214),
		ewFixed("sub", "i8 wraps", nil, ewI(lang.I8, s(3), 127, -128, -2),
			ewI(lang.I8, s(3), -128, 127, -1), ewI(lang.I8, s(3), 1, -1, 1)),

		ewFixed("mul", "f32 [2,3]*[3] by hand", nil,
			ewT(f32, s(2, 3), 0.75, 4, 0, 3.5, ewNaN, -1), a23, b3),
		ewCase("mul", "f32 [2,1,4]*[3,1]", nil, f32, 0, mul, x214, y31),
		ewFixed("mul", "f32 rank 0*[2,2]", nil, ewT(f32, s(2, 2), 10, 20, 30, 40), sc, m22),
		ewFixed("mul", "i8 wraps", nil, ewI(lang.I8, s(4), 44, -128, 0, 1),
			ewI(lang.I8, s(4), 100, 64, -128, -1), ewI(lang.I8, s(4), 3, 2, 0, -1)),
		ewCase("mul", "i32 wraps", nil, lang.I32, 0,
			func(v ...float64) float64 { return float64(int32(v[0]) * int32(v[1])) },
			ewI(lang.I32, s(3), 65536, -65536, 123456789), ewI(lang.I32, s(3), 65536, 65537, 100)),

		ewFixed("div", "f32 by hand, x/0", nil, ewT(f32, s(2, 3), 3, 1, 0, 14, ewNaN, -0.0625),
			a23, b3),
		ewFixed("div", "f32 by zero", nil, ewT(f32, s(3), ewInf, ewNInf, ewNaN),
			ewT(f32, s(3), 1, -1, 0), ewT(f32, nil, 0)),
		ewCase("div", "f32 [2,1,4]/[3,1]", nil, f32, 0, div, x214, y31),
		ewFixed("div", "i32 truncates toward zero, x/0 = 0", nil,
			ewI(lang.I32, s(6), -3, -3, 3, 3, 0, 0),
			ewI(lang.I32, s(6), -7, 7, -7, 7, 5, -5), ewI(lang.I32, s(6), 2, -2, -2, 2, 0, 0)),
		ewCase("div", "i8 like Go (C) incl. -128/-1", nil, lang.I8, 0,
			func(v ...float64) float64 {
				if v[1] == 0 {
					return 0
				}
				return float64(int8(v[0]) / int8(v[1]))
			},
			ewI(lang.I8, s(2, 3), -128, -128, 127, -9, 9, 1), ewI(lang.I8, s(3), -1, 3, -4)),

		ewFixed("mod", "i32 fmod 0 takes divisor's sign (gives i64)", nil,
			ewI(lang.I64, s(6), 2, 1, -1, -2, 0, 0),
			ewI(lang.I32, s(6), -7, 7, -7, 7, 6, -6), ewI(lang.I32, s(6), 3, 3, -3, -3, 3, 3)),
		ewFixed("mod", "i32 fmod 1 takes dividend's sign", ewAttrs("fmod", aInt(1)),
			ewI(lang.I64, s(6), -1, 1, -1, 1, 0, 0),
			ewI(lang.I32, s(6), -7, 7, -7, 7, 6, -6), ewI(lang.I32, s(6), 3, 3, -3, -3, 3, 3)),
		ewFixed("mod", "i64 broadcast [2,3]%[3]", nil,
			ewI(lang.I64, s(2, 3), 1, 0, -2, 0, -1, -1),
			ewI(lang.I64, s(2, 3), 10, 9, 10, -9, -10, -9), ewI(lang.I64, s(3), 3, -3, -4)),
		ewFixed("mod", "f32 by zero is NaN", nil, ewT(f32, s(4), ewNaN, ewNaN, ewNaN, ewNaN),
			ewT(f32, s(4), 5, -5, 0, ewInf), ewT(f32, nil, 0)),
		ewFixed("mod", "f32 fmod 1 by zero is NaN", ewAttrs("fmod", aInt(1)), ewT(f32, s(3), ewNaN, ewNaN, ewNaN),
			ewT(f32, s(3), 5, -5, 0), ewT(f32, s(3), 0, -0.0, 0)),
		ewFixed("mod", "i32 by zero is 0", nil, ewI(lang.I64, s(3), 0, 0, 0),
			ewI(lang.I32, s(3), 7, -7, 0), ewI(lang.I32, nil, 0)),
		ewFixed("mod", "f32 fmod 0 by hand", nil, ewT(f32, s(6), 1.5, 0.5, -0.5, -1.5, 0, 1),
			ewT(f32, s(6), 5.5, -5.5, 5.5, -5.5, 4, -1), ewT(f32, s(6), 2, 2, -2, -2, 2, 2)),
		ewCase("mod", "f32 fmod 0 like Python", nil, f32, 1e-6,
			func(v ...float64) float64 { return ewPyMod(v[0], v[1]) },
			randn(13, 3, 4), ewT(f32, s(4), 0.7, -0.3, 1.9, -2.5)),
		ewCase("mod", "f32 fmod 1 like C fmod", ewAttrs("fmod", aInt(1)), f32, 1e-6,
			func(v ...float64) float64 { return math.Mod(v[0], v[1]) },
			randn(14, 3, 4), ewT(f32, s(4), 0.7, -0.3, 1.9, -2.5)),

		ewFixed("pow", "f32 by hand, broadcast", nil, ewT(f32, s(2, 3), 8, 0.25, 1, 27, 1.0/9, 1),
			ewT(f32, s(2, 3), 2, 2, 2, 3, 3, 3), ewT(f32, s(3), 3, -2, 0)),
		ewCase("pow", "f32 random", nil, f32, 0, func(v ...float64) float64 { return math.Pow(v[0], v[1]) },
			ewT(f32, s(2, 1), 0.5, 2.5), ewT(f32, s(4), -1.5, 0.5, 1, 3.25)),
		ewFixed("pow", "i32 gives f32", nil, ewT(f32, s(3), 49, 8, 1.0/6561),
			ewI(lang.I32, s(3), -7, 2, 9), ewI(lang.I32, s(3), 2, 3, -4)),

		ewFixed("max", "f32 broadcast, NaN propagates", nil, ewT(f32, s(2, 3), 1.5, -2, 4, 7, ewNaN, 4),
			a23, b3),
		ewFixed("max", "i32 stays i32", nil, ewI(lang.I32, s(3), 5, -1, math.MaxInt32),
			ewI(lang.I32, s(3), 5, -3, math.MaxInt32), ewI(lang.I32, s(3), -5, -1, 0)),
		ewFixed("min", "f32 broadcast, NaN propagates", nil, ewT(f32, s(2, 3), 0.5, -2, 0, 0.5, ewNaN, -0.25),
			a23, b3),
		ewFixed("min", "i8 with rank 0", nil, ewI(lang.I8, s(3), -128, 3, 3),
			ewI(lang.I8, s(3), -128, 5, 3), ewI(lang.I8, nil, 3)),

		ewFixed("atan2", "quadrants by hand", nil,
			ewT(f32, s(5), math.Pi/4, 3*math.Pi/4, -3*math.Pi/4, -math.Pi/4, math.Pi/2),
			ewT(f32, s(5), 1, 1, -1, -1, 2), ewT(f32, s(5), 1, -1, -1, 1, 0)),
		ewCase("atan2", "f32 broadcast [2,3],[3]", nil, f32, 0,
			func(v ...float64) float64 { return math.Atan2(v[0], v[1]) }, randn(15, 2, 3), randn(16, 3)),
	)

	// Comparisons give bool, with broadcasting; NaN compares unequal.
	ca := ewT(f32, s(2, 3), 1, 2, 3, ewNaN, 0, -1)
	cb := ewT(f32, s(3), 2, 2, 2)
	ci := ewI(lang.I32, s(2, 3), -5, 0, 5, 7, 7, -7)
	c0 := ewI(lang.I32, nil, 5)
	register(
		ewFixed("less", "f32 [2,3]<[3]", nil, ewB(s(2, 3), true, false, false, false, true, true), ca, cb),
		ewFixed("less", "i32 < rank 0", nil, ewB(s(2, 3), true, true, false, false, false, true), ci, c0),
		ewFixed("less_equal", "f32 [2,3]<=[3]", nil, ewB(s(2, 3), true, true, false, false, true, true), ca, cb),
		ewFixed("less_equal", "i32 <= rank 0", nil, ewB(s(2, 3), true, true, true, false, false, true), ci, c0),
		ewFixed("greater", "f32 [2,3]>[3]", nil, ewB(s(2, 3), false, false, true, false, false, false), ca, cb),
		ewFixed("greater", "rank 0 > i32", nil, ewB(s(2, 3), true, true, false, false, false, true), c0, ci),
		ewFixed("greater_equal", "f32 [2,3]>=[3]", nil, ewB(s(2, 3), false, true, true, false, false, false), ca, cb),
		ewFixed("greater_equal", "i32 >= rank 0", nil, ewB(s(2, 3), false, false, true, true, true, false), ci, c0),
		ewFixed("equal", "f32 [2,3]==[3], NaN unequal", nil, ewB(s(2, 3), false, true, false, false, false, false), ca, cb),
		ewFixed("equal", "i32 == rank 0", nil, ewB(s(2, 3), false, false, true, false, false, false), ci, c0),
		ewFixed("equal", "bool", nil, ewB(s(4), true, false, false, true),
			ewB(s(4), true, true, false, false), ewB(s(4), true, false, true, false)),
		ewFixed("not_equal", "f32 [2,3]!=[3], NaN unequal", nil, ewB(s(2, 3), true, false, true, true, true, true), ca, cb),
		ewFixed("not_equal", "i32 != rank 0", nil, ewB(s(2, 3), true, true, false, true, true, true), ci, c0),
	)

	// Logic on bools: truth tables and broadcasting [2,1] with [2].
	p := ewB(s(4), false, false, true, true)
	q := ewB(s(4), false, true, false, true)
	col := ewB(s(2, 1), false, true)
	row := ewB(s(2), false, true)
	register(
		ewFixed("and", "truth table", nil, ewB(s(4), false, false, false, true), p, q),
		ewFixed("and", "broadcast [2,1],[2]", nil, ewB(s(2, 2), false, false, false, true), col, row),
		ewFixed("or", "truth table", nil, ewB(s(4), false, true, true, true), p, q),
		ewFixed("or", "broadcast [2,1],[2]", nil, ewB(s(2, 2), false, true, true, true), col, row),
		ewFixed("xor", "truth table", nil, ewB(s(4), false, true, true, false), p, q),
		ewFixed("xor", "broadcast [2,1],[2]", nil, ewB(s(2, 2), false, true, true, false), col, row),
		ewFixed("not", "values", nil, ewB(s(2, 2), true, true, false, false), ewB(s(2, 2), false, false, true, true)),
		ewFixed("not", "rank 0", nil, ewB(nil, false), ewB(nil, true)),

		ewFixed("where", "bool [2,1], f32 [2,3], f32 rank 0", nil,
			ewT(f32, s(2, 3), 9, 9, 9, 7, ewNaN, -0.25),
			col, a23, ewT(f32, nil, 9)),
		ewFixed("where", "bool [3] picks per column", nil,
			ewT(f32, s(2, 3), 1.5, -2, 4, 7, ewNaN, 4),
			ewB(s(3), true, true, false), a23, b3),
		ewFixed("where", "i32 branches", nil, ewI(lang.I32, s(2, 2), 1, -2, -1, 2),
			ewB(s(2, 2), true, false, false, true), ewI(lang.I32, s(2, 2), 1, 2, 3, 2), ewI(lang.I32, s(2, 2), -1, -2, -1, -2)),
	)

	// Identity, sign-like and integer-preserving unary operators.
	mixed := ewT(f32, s(2, 4), -2.5, -0.0, 0, 3, ewNaN, ewInf, ewNInf, 1e-30)
	i8s := ewI(lang.I8, s(5), -128, -5, 0, 5, 127)
	register(
		ewCase("identity", "f32", nil, f32, 0, func(v ...float64) float64 { return v[0] }, mixed),
		ewFixed("identity", "i8 keeps dtype", nil, ewI(lang.I8, s(5), -128, -5, 0, 5, 127), i8s),
		ewFixed("identity", "bool", nil, ewB(s(2), true, false), ewB(s(2), true, false)),
		ewFixed("neg", "f32", nil, ewT(f32, s(2, 4), 2.5, 0, -0.0, -3, ewNaN, ewNInf, ewInf, -1e-30), mixed),
		ewFixed("neg", "i8 wraps", nil, ewI(lang.I8, s(5), -128, 5, 0, -5, -127), i8s),
		ewFixed("abs", "f32", nil, ewT(f32, s(2, 4), 2.5, 0, 0, 3, ewNaN, ewInf, ewInf, 1e-30), mixed),
		ewFixed("abs", "i8 stays i8 (abs(-128) wraps)", nil, ewI(lang.I8, s(5), -128, 5, 0, 5, 127), i8s),
		ewFixed("abs", "i32", nil, ewI(lang.I32, s(3), 7, 0, math.MaxInt32), ewI(lang.I32, s(3), -7, 0, -math.MaxInt32)),
		ewFixed("sign", "f32 with NaN", nil, ewT(f32, s(2, 4), -1, 0, 0, 1, ewNaN, 1, -1, 1), mixed),
		ewFixed("sign", "i8 stays i8", nil, ewI(lang.I8, s(5), -1, -1, 0, 1, 1), i8s),
	)

	// Math functions: Go's math package element by element (the interpreter
	// computes in float64 and rounds once, so the results match exactly).
	pos := ewT(f32, s(2, 3), 0.25, 1, 2.5, 10, 1e-3, 0)
	anyv := randn(17, 2, 3, 2)
	unit := ewT(f32, s(2, 3), -1, -0.5, 0, 0.3, 0.99, 1)
	big := ewT(f32, s(5), 1, 1.5, 3, 10, 0.5)
	neg := ewT(f32, s(3), -1, ewNaN, ewNInf)
	i32v := ewI(lang.I32, s(4), -3, 0, 2, 9)
	type mf struct {
		op string
		f  func(float64) float64
		x  []*tensor.Tensor
	}
	for _, m := range []mf{
		{"exp", math.Exp, []*tensor.Tensor{anyv, ewT(f32, s(4), 100, -200, ewNInf, 0)}},
		{"log", math.Log, []*tensor.Tensor{pos, neg}},
		{"sqrt", math.Sqrt, []*tensor.Tensor{pos, neg}},
		{"rsqrt", func(x float64) float64 { return 1 / math.Sqrt(x) }, []*tensor.Tensor{pos, neg}},
		{"reciprocal", func(x float64) float64 { return 1 / x }, []*tensor.Tensor{anyv, ewT(f32, s(2), 0, -0.0)}},
		{"floor", math.Floor, []*tensor.Tensor{anyv}},
		{"ceil", math.Ceil, []*tensor.Tensor{anyv}},
		{"sin", math.Sin, []*tensor.Tensor{anyv}},
		{"cos", math.Cos, []*tensor.Tensor{anyv}},
		{"tan", math.Tan, []*tensor.Tensor{anyv}},
		{"asin", math.Asin, []*tensor.Tensor{unit, ewT(f32, s(1), 2)}},
		{"acos", math.Acos, []*tensor.Tensor{unit, ewT(f32, s(1), -2)}},
		{"atan", math.Atan, []*tensor.Tensor{anyv, ewT(f32, s(2), ewInf, ewNInf)}},
		{"sinh", math.Sinh, []*tensor.Tensor{anyv}},
		{"cosh", math.Cosh, []*tensor.Tensor{anyv}},
		{"asinh", math.Asinh, []*tensor.Tensor{anyv}},
		{"acosh", math.Acosh, []*tensor.Tensor{big}},
		{"atanh", math.Atanh, []*tensor.Tensor{unit}},
		{"erf", math.Erf, []*tensor.Tensor{anyv, ewT(f32, s(3), ewInf, ewNInf, 5)}},
		{"sigmoid", func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }, []*tensor.Tensor{anyv, ewT(f32, s(3), 100, -100, 0)}},
		{"tanh", math.Tanh, []*tensor.Tensor{anyv, ewT(f32, s(3), 30, -30, 0)}},
	} {
		for k, x := range m.x {
			f := m.f
			register(ewCase(m.op, []string{"f32 values", "edge values"}[k], nil, f32, 0,
				func(v ...float64) float64 { return f(v[0]) }, x))
		}
		f := m.f
		if m.op != "asin" && m.op != "acos" && m.op != "atanh" && m.op != "acosh" {
			register(ewCase(m.op, "i32 gives f32", nil, f32, 0, func(v ...float64) float64 { return f(v[0]) }, i32v))
		}
	}
	register(
		ewFixed("exp", "by hand", nil, ewT(f32, s(3), 1, math.E, 1/math.E), ewT(f32, s(3), 0, 1, -1)),
		ewFixed("log", "by hand", nil, ewT(f32, s(4), 0, ewNInf, ewNaN, ewInf), ewT(f32, s(4), 1, 0, -1, ewInf)),
		ewFixed("sqrt", "by hand", nil, ewT(f32, s(3), 3, 0.5, 0), ewT(f32, s(3), 9, 0.25, 0)),
		ewFixed("rsqrt", "by hand", nil, ewT(f32, s(3), 0.5, 2, ewInf), ewT(f32, s(3), 4, 0.25, 0)),
		ewFixed("reciprocal", "by hand", nil, ewT(f32, s(3), 0.5, -4, ewInf), ewT(f32, s(3), 2, -0.25, 0)),
		ewFixed("floor", "by hand", nil, ewT(f32, s(5), -3, -2, 1, 2, 0), ewT(f32, s(5), -2.5, -2, 1.5, 2, 0.1)),
		ewFixed("ceil", "by hand", nil, ewT(f32, s(5), -2, -2, 2, 2, 1), ewT(f32, s(5), -2.5, -2, 1.5, 2, 0.1)),
		ewFixed("round", "halves to even", nil, ewT(f32, s(8), -2, -2, 0, 0, 2, 2, 3, -3),
			ewT(f32, s(8), -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 2.6, -2.6)),
		ewCase("round", "random", nil, f32, 0, func(v ...float64) float64 { return math.RoundToEven(v[0]) },
			randn(18, 3, 4)),
		ewFixed("isnan", "f32", nil, ewB(s(2, 4), false, false, false, false, true, false, false, false), mixed),
		ewFixed("isnan", "i32 is never NaN", nil, ewB(s(4), false, false, false, false), i32v),
		ewFixed("isinf", "f32", nil, ewB(s(2, 4), false, false, false, false, false, true, true, false), mixed),
		ewFixed("isinf", "i32 is never infinite", nil, ewB(s(4), false, false, false, false), i32v),
	)

	// Casts.
	register(
		ewFixed("cast_f32", "f64 rounds to nearest even", nil,
			ewT(f32, s(4), 1, 1+0x1p-22, 16777216, 0.1),
			ewT(lang.F64, s(4), 1+0x1p-24, 1+0x1p-23+0x1p-24, 16777217, 0.1)),
		ewFixed("cast_f32", "i32", nil, ewT(f32, s(3), -7, 16777216, 0),
			ewI(lang.I32, s(3), -7, 16777217, 0)),
		ewFixed("cast_f32", "bool", nil, ewT(f32, s(2), 1, 0), ewB(s(2), true, false)),
		ewFixed("cast_f64", "f32 is exact", nil, ewT(lang.F64, s(3), float64(float32(0.1)), -2.5, ewInf),
			ewT(f32, s(3), 0.1, -2.5, ewInf)),
		ewFixed("cast_f64", "i64", nil, ewT(lang.F64, s(2), -123456789012, 0), ewI(lang.I64, s(2), -123456789012, 0)),
		ewFixed("cast_f16", "f32 rounds to nearest even, overflows", nil,
			ewT(lang.F16, s(6), 1, 1+0x1p-9, 65504, ewInf, 0, 0x1p-24),
			ewT(f32, s(6), 1+0x1p-11, 1+3*0x1p-11, 65519, 65520, 1e-8, 0x1p-24)),
		ewFixed("cast_f16", "i32", nil, ewT(lang.F16, s(3), 2048, 2048, -3), ewI(lang.I32, s(3), 2048, 2049, -3)),
		ewFixed("cast_bf16", "f32 rounds to nearest even", nil,
			ewT(lang.BF16, s(4), 1, 1+0x1p-6, 256, -3),
			ewT(f32, s(4), 1+0x1p-8, 1+3*0x1p-8, 257, -3)),
		ewFixed("cast_i32", "f32 truncates toward zero, NaN is 0", nil,
			ewI(lang.I32, s(6), 2, -2, 0, 0, 0, 1000000),
			ewT(f32, s(6), 2.7, -2.7, -0.5, ewNaN, ewInf, 1000000.5)),
		ewFixed("cast_i32", "f64 and i64 wrap", nil,
			ewI(lang.I32, s(2), -1294967296, math.MinInt32),
			ewT(lang.F64, s(2), 3e9, 2147483648)),
		ewFixed("cast_i32", "i64 wraps", nil, ewI(lang.I32, s(3), math.MinInt32, -1, 7),
			ewI(lang.I64, s(3), 1<<31, 1<<32-1, 7)),
		ewFixed("cast_i32", "bool", nil, ewI(lang.I32, s(2), 1, 0), ewB(s(2), true, false)),
		ewFixed("cast_i64", "f32 truncates toward zero", nil, ewI(lang.I64, s(4), -3, 3, 0, 16777216),
			ewT(f32, s(4), -3.9, 3.9, -0.1, 16777216)),
		ewFixed("cast_i64", "i8 sign-extends", nil, ewI(lang.I64, s(2), -128, 127), ewI(lang.I8, s(2), -128, 127)),
		ewFixed("cast_i8", "i32 wraps, f32 truncates", nil, ewI(lang.I8, s(4), 44, -1, -128, -2), ewI(lang.I32, s(4), 300, 255, 128, -2)),
		ewFixed("cast_i8", "f32 truncates toward zero", nil, ewI(lang.I8, s(3), -3, 3, 0), ewT(f32, s(3), -3.9, 3.9, -0.1)),
		ewFixed("cast_i16", "i32 wraps", nil, ewI(lang.I16, s(3), -32768, -1, 7), ewI(lang.I32, s(3), 32768, 65535, 7)),
		ewFixed("cast_u8", "i32 wraps", nil, ewI(lang.U8, s(3), 44, 255, 7), ewI(lang.I32, s(3), 300, -1, 7)),
		ewFixed("cast_u8", "f32 truncates toward zero", nil, ewI(lang.U8, s(2), 3, 200), ewT(f32, s(2), 3.9, 200.5)),
		ewFixed("cast_u16", "i32 wraps", nil, ewI(lang.U16, s(3), 65535, 0, 7), ewI(lang.I32, s(3), -1, 65536, 7)),
		ewFixed("cast_u32", "i64 wraps", nil, ewI(lang.U32, s(3), 4294967295, 0, 7), ewI(lang.I64, s(3), -1, 1<<32, 7)),
		ewFixed("cast_u64", "i32 and f32", nil, ewI(lang.U64, s(3), 0, 7, 3), ewT(f32, s(3), 0, 7, 3.9)),
		ewFixed("cast_bool", "f32 x != 0", nil, ewB(s(6), false, false, true, true, true, true),
			ewT(f32, s(6), 0, -0.0, 0.5, ewNaN, -2, ewInf)),
		ewFixed("cast_bool", "i32 x != 0", nil, ewB(s(3), false, true, true), ewI(lang.I32, s(3), 0, -1, 256)),
	)

	// Activations.
	act := randn(19, 3, 4)
	edge := ewT(f32, s(7), -3, -1, -0.5, 0, 0.5, 1, 3)
	register(
		ewFixed("relu", "by hand", nil, ewT(f32, s(7), 0, 0, 0, 0, 0.5, 1, 3), edge),
		ewCase("relu", "random", nil, f32, 0, func(v ...float64) float64 { return math.Max(v[0], 0) }, act),
		ewFixed("relu", "i32 stays i32", nil, ewI(lang.I32, s(4), 0, 0, 2, 9), i32v),

		ewFixed("leaky_relu", "default alpha 0.01", nil,
			ewT(f32, s(7), -0.03, -0.01, -0.005, 0, 0.5, 1, 3), edge),
		ewFixed("leaky_relu", "alpha 0.2", ewAttrs("alpha", aFloat(0.2)),
			ewT(f32, s(7), -0.6, -0.2, -0.1, 0, 0.5, 1, 3), edge),

		ewCase("prelu", "slope [3,1] against [2,3,2]", nil, f32, 0,
			func(v ...float64) float64 {
				if v[0] < 0 {
					return v[0] * v[1]
				}
				return v[0]
			}, randn(20, 2, 3, 2), ewT(f32, s(3, 1), 0.1, 0.5, -2)),
		ewFixed("prelu", "slope [2] by hand", nil, ewT(f32, s(2, 2), -0.5, 3, 2, -4),
			ewT(f32, s(2, 2), -5, 3, 2, -2), ewT(f32, s(2), 0.1, 2)),

		ewFixed("thresholded_relu", "default alpha 1", nil, ewT(f32, s(7), 0, 0, 0, 0, 0, 0, 3), edge),
		ewFixed("thresholded_relu", "alpha -0.75", ewAttrs("alpha", aFloat(-0.75)),
			ewT(f32, s(7), 0, 0, -0.5, 0, 0.5, 1, 3), edge),

		ewCase("elu", "default alpha 1", nil, f32, 1e-6, func(v ...float64) float64 {
			if v[0] >= 0 {
				return v[0]
			}
			return math.Expm1(v[0])
		}, act),
		ewCase("elu", "alpha 0.5", ewAttrs("alpha", aFloat(0.5)), f32, 1e-6, func(v ...float64) float64 {
			if v[0] >= 0 {
				return v[0]
			}
			return 0.5 * math.Expm1(v[0])
		}, edge),

		ewCase("celu", "default alpha 1 equals elu", nil, f32, 1e-6, func(v ...float64) float64 {
			return math.Max(v[0], 0) + math.Min(0, math.Expm1(v[0]))
		}, act),
		ewCase("celu", "alpha 2", ewAttrs("alpha", aFloat(2)), f32, 1e-6, func(v ...float64) float64 {
			if v[0] >= 0 {
				return v[0]
			}
			return 2 * math.Expm1(v[0]/2)
		}, edge),

		// ONNX Selu defaults (the f32 values of the ONNX operator spec).
		ewCase("selu", "ONNX defaults", nil, f32, 1e-6, func(v ...float64) float64 {
			const alpha, gamma = 1.67326319217681884765625, 1.05070102214813232421875
			if v[0] > 0 {
				return gamma * v[0]
			}
			return gamma * alpha * (math.Exp(v[0]) - 1)
		}, act),
		ewCase("selu", "alpha 2, gamma 3", ewAttrs("alpha", aFloat(2), "gamma", aFloat(3)), f32, 1e-6,
			func(v ...float64) float64 {
				if v[0] > 0 {
					return 3 * v[0]
				}
				return 6 * math.Expm1(v[0])
			}, edge),

		ewCase("gelu", "erf formula", nil, f32, 1e-6, func(v ...float64) float64 {
			return 0.5 * v[0] * (1 + math.Erf(v[0]/math.Sqrt2))
		}, act),
		ewCase("gelu", "edge values", nil, f32, 1e-6, func(v ...float64) float64 {
			return v[0] * 0.5 * math.Erfc(-v[0]/math.Sqrt2)
		}, ewT(f32, s(5), -10, -3, 0, 3, 10)),
		ewCase("gelu_tanh", "tanh formula", nil, f32, 1e-6, func(v ...float64) float64 {
			x := v[0]
			return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
		}, act),
		ewCase("gelu_tanh", "edge values", nil, f32, 1e-6, func(v ...float64) float64 {
			x := v[0]
			return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*math.Pow(x, 3))))
		}, ewT(f32, s(5), -10, -3, 0, 3, 10)),

		ewCase("silu", "x sigmoid(x)", nil, f32, 1e-6, func(v ...float64) float64 {
			return v[0] / (1 + math.Exp(-v[0]))
		}, act),
		ewCase("swiglu", "a sigmoid(a) b, broadcast", nil, f32, 1e-6, func(v ...float64) float64 {
			return v[0] / (1 + math.Exp(-v[0])) * v[1]
		}, randn(31, 2, 3), randn(32, 3)),
		ewCase("swiglu", "alpha 0.5", map[string]ir.AttrValue{"alpha": aFloat(0.5)}, f32, 1e-6, func(v ...float64) float64 {
			return v[0] / (1 + math.Exp(-0.5*v[0])) * v[1]
		}, act, randn(33, act.Shape...)),
		ewCase("softplus", "log(1 + exp(x)), stable", nil, f32, 1e-6, func(v ...float64) float64 {
			if v[0] > 30 {
				return v[0]
			}
			return math.Log1p(math.Exp(v[0]))
		}, ewT(f32, s(8), -100, -20, -1, 0, 0.5, 2, 20, 100)),
		ewFixed("softplus", "log 2 at 0", nil, ewT(f32, s(1), math.Ln2), ewT(f32, s(1), 0)),
		ewFixed("softsign", "by hand", nil, ewT(f32, s(7), -0.75, -0.5, -1.0/3, 0, 1.0/3, 0.5, 0.75), edge),
		ewCase("mish", "x tanh(softplus(x))", nil, f32, 1e-6, func(v ...float64) float64 {
			return v[0] * math.Tanh(math.Log1p(math.Exp(v[0])))
		}, act),
		ewCase("mish", "edge values", nil, f32, 1e-6, func(v ...float64) float64 {
			if v[0] > 30 {
				return v[0]
			}
			return v[0] * math.Tanh(math.Log1p(math.Exp(v[0])))
		}, ewT(f32, s(5), -50, -5, 0, 5, 50)),

		// ONNX HardSigmoid defaults alpha = 0.2, beta = 0.5.
		ewFixed("hard_sigmoid", "ONNX defaults by hand", nil,
			ewT(f32, s(7), 0, 0.3, 0.4, 0.5, 0.6, 0.7, 1), ewT(f32, s(7), -3, -1, -0.5, 0, 0.5, 1, 3)),
		ewFixed("hard_sigmoid", "alpha 0.5 beta 0.25", ewAttrs("alpha", aFloat(0.5), "beta", aFloat(0.25)),
			ewT(f32, s(7), 0, 0, 0, 0.25, 0.5, 0.75, 1), edge),
		ewFixed("hard_swish", "by hand", nil,
			ewT(f32, s(7), 0, -1.0/3, -0.5*2.5/6, 0, 0.5*3.5/6, 2.0/3, 3), edge),
		ewFixed("hard_swish", "saturation", nil, ewT(f32, s(4), 0, 0, 4, 10), ewT(f32, s(4), -10, -3, 4, 10)),

		ewFixed("shrink", "defaults lambd 0.5 bias 0", nil, ewT(f32, s(7), -3, -1, 0, 0, 0, 1, 3), edge),
		ewFixed("shrink", "lambd 1 bias 1.5", ewAttrs("lambd", aFloat(1), "bias", aFloat(1.5)),
			ewT(f32, s(7), -1.5, 0, 0, 0, 0, 0, 1.5), edge),

		ewFixed("clip", "min -0.5 max 1", ewAttrs("min", aFloat(-0.5), "max", aFloat(1)),
			ewT(f32, s(7), -0.5, -0.5, -0.5, 0, 0.5, 1, 1), edge),
		ewFixed("clip", "min only", ewAttrs("min", aFloat(0)),
			ewT(f32, s(4), 0, 0, 5, ewInf), ewT(f32, s(4), ewNInf, -1, 5, ewInf)),
		ewFixed("clip", "max only", ewAttrs("max", aFloat(0)),
			ewT(f32, s(4), ewNInf, -1, 0, 0), ewT(f32, s(4), ewNInf, -1, 5, ewInf)),
		ewCase("clip", "defaults are the identity", nil, f32, 0,
			func(v ...float64) float64 { return v[0] }, ewT(f32, s(4), ewNInf, -1e30, 1e30, ewInf)),
	)
}
