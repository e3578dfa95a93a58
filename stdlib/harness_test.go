package stdlib_test

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
	"tofuc/parser"

	"tofuc/analysis/check"
	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/runtime/interp"
	"tofuc/runtime/tensor"
)

// opCase is one interpreter test of a standard-library operator against an
// expectation computed independently of TDL (by hand, or by a direct loop
// written in the test).
type opCase struct {
	op     string // the operator
	name   string // what the case shows
	attrs  map[string]ir.AttrValue
	inputs []*tensor.Tensor
	// want returns the expected outputs; compare checks them within tol.
	want func(in []*tensor.Tensor) []*tensor.Tensor
	tol  float64 // absolute and relative tolerance; 0 means exact
	// check, when set, replaces want: a property of the outputs.
	check func(t *testing.T, in, out []*tensor.Tensor)
}

var cases []opCase

// register adds cases; each test file registers its own in an init func.
func register(cs ...opCase) { cases = append(cases, cs...) }

var prog *check.Program

func program(t testing.TB) *check.Program {
	if prog == nil {
		p, err := check.NewProgram(parser.Parse)
		if err != nil {
			t.Fatalf("stdlib does not load: %v", err)
		}
		prog = p
	}
	return prog
}

// eval instantiates op for the inputs' types and runs the interpreter.
func eval(t testing.TB, op string, attrs map[string]ir.AttrValue, inputs ...*tensor.Tensor) []*tensor.Tensor {
	t.Helper()
	decl := program(t).StdOps()[op]
	if decl == nil {
		t.Fatalf("no stdlib operator %s", op)
	}
	types := make([]check.TensorType, len(inputs))
	for i, x := range inputs {
		shape := make([]lang.Dim, len(x.Shape))
		for d, n := range x.Shape {
			shape[d] = lang.Const(int64(n))
		}
		types[i] = check.TensorType{DType: x.DType, Shape: shape}
	}
	inst, err := check.Instantiate(decl, attrs, types, lang.Pos{File: "test"})
	if err != nil {
		t.Fatalf("instantiate %s: %v", op, err)
	}
	outs, err := interp.EvalInstance(inst, inputs, nil)
	if err != nil {
		t.Fatalf("eval %s: %v", op, err)
	}
	return outs
}

func TestOperators(t *testing.T) {
	for _, c := range cases {
		t.Run(c.op+"/"+c.name, func(t *testing.T) {
			out := eval(t, c.op, c.attrs, c.inputs...)
			if c.check != nil {
				c.check(t, c.inputs, out)
				return
			}
			want := c.want(c.inputs)
			if len(want) != len(out) {
				t.Fatalf("%d outputs, want %d", len(out), len(want))
			}
			for i := range want {
				assertClose(t, fmt.Sprintf("output %d", i), out[i], want[i], c.tol)
			}
		})
	}
}

// TestEveryOperatorHasACase keeps the table complete: a new operator
// without an interpreter test fails here.
func TestEveryOperatorHasACase(t *testing.T) {
	covered := map[string]bool{}
	for _, c := range cases {
		covered[c.op] = true
	}
	var missing []string
	for name := range program(t).StdOps() {
		if !covered[name] {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("%d stdlib operators have no interpreter test: %v", len(missing), missing)
	}
}

// assertClose compares dtype, shape and values within tol, relative and
// absolute (tofuc's tolerance policy, tensor.Compare); tol 0 is exact.
func assertClose(t *testing.T, what string, got, want *tensor.Tensor, tol float64) {
	t.Helper()
	if err := tensor.Compare(got, want, tensor.Tolerance{Rel: tol, Abs: tol}); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// Helpers to build inputs and attributes.

func randn(seed uint64, shape ...int) *tensor.Tensor {
	r := rand.New(rand.NewPCG(seed, 7))
	t := tensor.New(lang.F32, shape)
	for i := range t.Len() {
		t.SetFlat(i, r.NormFloat64())
	}
	return t
}

func floats(shape []int, vals ...float64) *tensor.Tensor {
	return tensor.FromFloats(lang.F32, shape, vals)
}

func ints(shape []int, vals ...int64) *tensor.Tensor {
	return tensor.FromInts(lang.I64, shape, vals)
}

func aInt(n int64) ir.AttrValue     { return ir.AttrValue{Kind: ir.AttrInt, Int: n} }
func aFloat(f float64) ir.AttrValue { return ir.AttrValue{Kind: ir.AttrFloat, Float: f} }
func aStr(s string) ir.AttrValue    { return ir.AttrValue{Kind: ir.AttrString, Str: s} }
func aBool(b bool) ir.AttrValue     { return ir.AttrValue{Kind: ir.AttrBool, Bool: b} }

// mapF applies f element-wise (the expectation of a unary element-wise
// operator), rounding to the input's dtype.
func mapF(x *tensor.Tensor, f func(float64) float64) *tensor.Tensor {
	out := tensor.New(x.DType, x.Shape)
	for i := range x.Len() {
		out.SetFlat(i, f(x.Flat(i)))
	}
	return out
}
