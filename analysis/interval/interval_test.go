package interval_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"tofuc/analysis/interval"
	"tofuc/lang"
	"tofuc/lang/ir"
)

// Builders of integer index expressions.

func newVar(name string, extent lang.Dim) *ir.Var { return &ir.Var{Name: name, Extent: extent} }
func ref(v *ir.Var) ir.Expr                       { return &ir.VarRef{V: v} }
func num(n int64) ir.Expr                         { return &ir.Const{T: lang.I64, Int: n} }
func size(d lang.Dim) ir.Expr                     { return &ir.Size{D: d} }
func bin(op ir.BinOp, a, b ir.Expr) ir.Expr       { return &ir.Binary{Op: op, L: a, R: b, T: lang.I64} }
func add(a, b ir.Expr) ir.Expr                    { return bin(ir.OpAdd, a, b) }
func sub(a, b ir.Expr) ir.Expr                    { return bin(ir.OpSub, a, b) }
func mul(a, b ir.Expr) ir.Expr                    { return bin(ir.OpMul, a, b) }
func div(a, b ir.Expr) ir.Expr                    { return bin(ir.OpDiv, a, b) }
func mod(a, b ir.Expr) ir.Expr                    { return bin(ir.OpMod, a, b) }
func neg(a ir.Expr) ir.Expr                       { return &ir.Unary{Op: "-", X: a, T: lang.I64} }
func less(a, b ir.Expr) ir.Expr                   { return &ir.Binary{Op: ir.OpLt, L: a, R: b, T: lang.Bool} }
func sel(c, a, b ir.Expr) ir.Expr                 { return &ir.Select{C: c, A: a, B: b, T: lang.I64} }
func call(fn string, args ...ir.Expr) ir.Expr     { return &ir.Call{Fn: fn, Args: args, T: lang.I64} }

func sym(s string) lang.Dim { return lang.Sym(s) }
func cst(n int64) lang.Dim  { return lang.Const(n) }

var (
	N  = sym("N")
	DW = sym("DW")
	x  = newVar("x", sym("X"))
	dx = newVar("dx", DW)
	i  = newVar("i", N)
	j  = newVar("j", sym("M"))
	k8 = newVar("k", cst(8))
)

// part is the split interval [VAR.lo, VAR.hi].
func part(v *ir.Var) interval.Interval {
	return interval.Interval{Lo: sym(v.Name + ".lo"), Hi: sym(v.Name + ".hi")}
}

func TestOf(t *testing.T) {
	px := interval.Env{x: part(x)}
	for _, tc := range []struct {
		name string
		e    ir.Expr
		env  interval.Env
		want string
	}{
		{"constant", num(3), nil, "[3, 3]"},
		{"negative constant", num(-2), nil, "[-2, -2]"},
		{"dimension", size(N), nil, "[N, N]"},
		{"variable without env", ref(i), nil, "[0, N - 1]"},
		{"variable with env", ref(x), px, "[x.lo, x.hi]"},
		{"constant extent", ref(k8), nil, "[0, 7]"},
		{"x + dx", add(ref(x), ref(dx)), px, "[x.lo, DW + x.hi - 1]"},
		{"x - dx", sub(ref(x), ref(dx)), px, "[-DW + x.lo + 1, x.hi]"},
		{"x - x is not 0 (no correlation)", sub(ref(x), ref(x)), px, "[-x.hi + x.lo, x.hi - x.lo]"},
		{"x + 1", add(ref(x), num(1)), px, "[x.lo + 1, x.hi + 1]"},
		{"negation", neg(ref(x)), px, "[-x.hi, -x.lo]"},
		{"times 2", mul(ref(x), num(2)), px, "[2*x.lo, 2*x.hi]"},
		{"2 times (constant on the left)", mul(num(2), ref(x)), px, "[2*x.lo, 2*x.hi]"},
		{"times -3 swaps", mul(ref(x), num(-3)), px, "[-3*x.hi, -3*x.lo]"},
		{"N - 1 - i", sub(sub(size(N), num(1)), ref(i)), nil, "[0, N - 1]"},
		{"i * N (symbolic extent)", mul(ref(i), size(sym("S"))), nil, "[0, N*S - S]"},
		{"N * i (either side)", mul(size(sym("S")), ref(i)), nil, "[0, N*S - S]"},
		{"row-major i*M + j", add(mul(ref(i), size(sym("M"))), ref(j)), nil, "[0, M*N - 1]"},
		{"x / 2", div(ref(x), num(2)), px, "[(x.lo)/2, (x.hi)/2]"},
		{"i / N (an extent: the value shrinks)", div(ref(i), size(N)), nil, "[0, N - 1]"},
		{"i / 0 (0 by TDL's integer division)", div(ref(i), num(0)), nil, "[0, N - 1]"},
		{"k / 3", div(ref(k8), num(3)), nil, "[0, 2]"},
		{"(k - 5) / 2, negative low bound", div(sub(ref(k8), num(5)), num(2)), nil, "[-3, 1]"},
		{"(k - 9) / 2, all negative", div(sub(ref(k8), num(9)), num(2)), nil, "[-5, -1]"},
		{"k % 8, one period", mod(ref(k8), num(8)), nil, "[0, 7]"},
		{"(k + 8) % 16, one period", mod(add(ref(k8), num(8)), num(16)), nil, "[8, 15]"},
		{"(k + 4) % 8, across periods", mod(add(ref(k8), num(4)), num(8)), nil, "[0, 7]"},
		{"k % 3, across periods", mod(ref(k8), num(3)), nil, "[0, 2]"},
		{"(k - 4) % 3, negative dividend", mod(sub(ref(k8), num(4)), num(3)), nil, "[-2, 2]"},
		{"i % N (symbolic divisor)", mod(ref(i), size(N)), nil, "[0, N - 1]"},
		{"select hull", sel(less(ref(k8), num(4)), ref(k8), add(ref(k8), num(10))), nil, "[0, 17]"},
		{"select with constants", sel(less(ref(k8), num(4)), num(-1), num(5)), nil, "[-1, 5]"},
		{"max", call("max", sub(ref(k8), num(3)), num(0)), nil, "[0, 4]"},
		{"min", call("min", ref(k8), num(5)), nil, "[0, 5]"},
		{"abs of non-negative", call("abs", ref(k8)), nil, "[0, 7]"},
		{"abs of mixed", call("abs", sub(ref(k8), num(3))), nil, "[0, 4]"},
		{"abs of negative", call("abs", sub(ref(k8), num(10))), nil, "[0, 10]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			iv, err := interval.Of(tc.e, tc.env)
			if err != nil {
				t.Fatalf("%s: %v", ir.ExprString(tc.e), err)
			}
			if got := iv.String(); got != tc.want {
				t.Errorf("%s: %s, want %s", ir.ExprString(tc.e), got, tc.want)
			}
		})
	}
}

func TestOfUnboundable(t *testing.T) {
	tensor := &ir.Tensor{Name: "ids", DType: lang.I64, Shape: []lang.Dim{N}}
	for _, tc := range []struct {
		name, reason string
		e            ir.Expr
	}{
		{"product of two variables", "product of two varying values", mul(ref(i), ref(j))},
		{"data-dependent read", "data-dependent", &ir.Access{T: tensor, Index: []ir.Expr{ref(i)}}},
		{"data-dependent inside arithmetic", "data-dependent", add(ref(i), &ir.Access{T: tensor, Index: []ir.Expr{ref(i)}})},
		{"float constant", "float index", &ir.Const{T: lang.F32, Float: 1.5}},
		{"float conversion", "float", &ir.Cast{X: ref(i), T: lang.F32}},
		{"narrowing conversion (wraps)", "wrap", &ir.Cast{X: ref(k8), T: lang.I32}},
		{"bool conversion", "wrap", &ir.Cast{X: ref(k8), T: lang.Bool}},
		{"arithmetic in u8", "wraps", &ir.Binary{Op: ir.OpMul, L: &ir.Cast{X: ref(k8), T: lang.U8}, R: &ir.Const{T: lang.U8, Int: 100}, T: lang.U8}},
		{"division by a negative constant", "division", div(ref(i), num(-2))},
		{"remainder of a negative by a varying value", "remainder", mod(sub(ref(i), num(1)), ref(j))},
		{"remainder by a varying value", "remainder", mod(ref(i), ref(j))},
		{"comparison", "comparison", less(ref(i), ref(j))},
		{"logical not", "logical", &ir.Unary{Op: "!", X: less(ref(i), ref(j)), T: lang.Bool}},
		{"math function", "function", call("exp", ref(i))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := interval.Of(tc.e, nil)
			var ie *interval.Error
			if !errors.As(err, &ie) {
				t.Fatalf("%s: error %v, want an *interval.Error", ir.ExprString(tc.e), err)
			}
			if msg := err.Error(); !contains(msg, tc.reason) || !contains(msg, "cannot bound") {
				t.Errorf("%s: %q does not say %q", ir.ExprString(tc.e), msg, tc.reason)
			}
		})
	}
}

func contains(s, sub string) bool {
	for k := 0; k+len(sub) <= len(s); k++ {
		if s[k:k+len(sub)] == sub {
			return true
		}
	}
	return false
}

func TestIntervalHelpers(t *testing.T) {
	if got := interval.Range(N).String(); got != "[0, N - 1]" {
		t.Errorf("Range: %s", got)
	}
	if got := interval.Point(N).Size().String(); got != "1" {
		t.Errorf("Point size: %s", got)
	}
	if got := part(x).Size().String(); got != "x.hi - x.lo + 1" {
		t.Errorf("part size: %s", got)
	}
	iv := interval.Interval{Lo: cst(-2), Hi: N.Add(cst(3))}
	if got := iv.Clamp(N).String(); got != "[0, N - 1]" {
		t.Errorf("Clamp: %s", got)
	}
	if got := interval.Hull(interval.Interval{Lo: cst(1), Hi: cst(3)}, interval.Interval{Lo: cst(-1), Hi: cst(2)}).String(); got != "[-1, 3]" {
		t.Errorf("Hull: %s", got)
	}
	sub := iv.Subst(func(s string) (lang.Dim, bool) { return cst(10), s == "N" })
	if got := sub.String(); got != "[-2, 13]" {
		t.Errorf("Subst: %s", got)
	}
}

// eval computes an integer index expression with C semantics (Go's
// division and remainder truncate as C's do).
func eval(e ir.Expr, vars map[*ir.Var]int64, syms map[string]int64) int64 {
	switch e := e.(type) {
	case *ir.Const:
		return e.Int
	case *ir.Size:
		n, err := e.D.Eval(syms)
		if err != nil {
			panic(err)
		}
		return n
	case *ir.VarRef:
		return vars[e.V]
	case *ir.Unary:
		return -eval(e.X, vars, syms)
	case *ir.Cast:
		return eval(e.X, vars, syms)
	case *ir.Select:
		if eval(e.C, vars, syms) != 0 {
			return eval(e.A, vars, syms)
		}
		return eval(e.B, vars, syms)
	case *ir.Call:
		a := eval(e.Args[0], vars, syms)
		switch e.Fn {
		case "abs":
			return max(a, -a)
		case "max":
			return max(a, eval(e.Args[1], vars, syms))
		case "min":
			return min(a, eval(e.Args[1], vars, syms))
		}
	case *ir.Binary:
		a, b := eval(e.L, vars, syms), eval(e.R, vars, syms)
		switch e.Op {
		case ir.OpAdd:
			return a + b
		case ir.OpSub:
			return a - b
		case ir.OpMul:
			return a * b
		case ir.OpDiv:
			return a / b
		case ir.OpMod:
			return a % b
		case ir.OpLt:
			if a < b {
				return 1
			}
			return 0
		}
	}
	panic(fmt.Sprintf("eval: %s", ir.ExprString(e)))
}

// checkSound evaluates e at every combination of its variables' values
// (each over its env interval, or else its extent) and checks that every
// value lies in the interval computed for e.
func checkSound(t *testing.T, e ir.Expr, env interval.Env, vars []*ir.Var, syms map[string]int64) {
	t.Helper()
	iv, err := interval.Of(e, env)
	if err != nil {
		t.Fatalf("%s: %v", ir.ExprString(e), err)
	}
	lo, err1 := iv.Lo.Eval(syms)
	hi, err2 := iv.Hi.Eval(syms)
	if err1 != nil || err2 != nil {
		t.Fatalf("%s: bounds %s do not evaluate: %v %v", ir.ExprString(e), iv, err1, err2)
	}
	ranges := make([][2]int64, len(vars))
	for n, v := range vars {
		r := interval.Range(v.Extent)
		if p, ok := env[v]; ok {
			r = p
		}
		a, _ := r.Lo.Eval(syms)
		b, _ := r.Hi.Eval(syms)
		ranges[n] = [2]int64{a, b}
	}
	vals := map[*ir.Var]int64{}
	var walk func(n int) bool
	walk = func(n int) bool {
		if n == len(vars) {
			if got := eval(e, vals, syms); got < lo || got > hi {
				t.Errorf("%s = %d at %v (symbols %v) lies outside %s = [%d, %d]", ir.ExprString(e), got, valueString(vars, vals), syms, iv, lo, hi)
				return false
			}
			return true
		}
		for val := ranges[n][0]; val <= ranges[n][1]; val++ {
			vals[vars[n]] = val
			if !walk(n + 1) {
				return false
			}
		}
		return true
	}
	walk(0)
}

func valueString(vars []*ir.Var, vals map[*ir.Var]int64) string {
	s := ""
	for _, v := range vars {
		s += fmt.Sprintf("%s=%d ", v.Name, vals[v])
	}
	return s
}

// Truncating division and remainder are checked against brute force over
// small concrete values, negative dividends included.
func TestDivModBruteForce(t *testing.T) {
	a := newVar("a", sym("A"))
	for _, off := range []int64{-9, -5, -3, -1, 0, 2, 7} {
		for _, c := range []int64{1, 2, 3, 4, 7} {
			for _, n := range []int64{1, 2, 5, 9} {
				syms := map[string]int64{"A": n}
				shifted := add(ref(a), num(off))
				checkSound(t, div(shifted, num(c)), nil, []*ir.Var{a}, syms)
				checkSound(t, mod(shifted, num(c)), nil, []*ir.Var{a}, syms)
				checkSound(t, div(neg(shifted), num(c)), nil, []*ir.Var{a}, syms)
				checkSound(t, mod(neg(shifted), num(c)), nil, []*ir.Var{a}, syms)
			}
		}
	}
}

// A remainder within one period is exact, not just [0, c - 1].
func TestModExactWithinPeriod(t *testing.T) {
	a := newVar("a", cst(3))
	for off := int64(0); off < 20; off++ {
		iv, err := interval.Of(mod(add(ref(a), num(off)), num(5)), nil)
		if err != nil {
			t.Fatal(err)
		}
		lo, _ := iv.Lo.IsConst()
		hi, _ := iv.Hi.IsConst()
		wantLo, wantHi := off%5, (off+2)%5
		if off/5 != (off+2)/5 {
			wantLo, wantHi = 0, 4
		}
		if lo != wantLo || hi != wantHi {
			t.Errorf("(a + %d) %% 5 over a in [0, 2]: [%d, %d], want [%d, %d]", off, lo, hi, wantLo, wantHi)
		}
	}
}

// gen builds random affine-ish index expressions over a few variables.
type gen struct {
	r    *rand.Rand
	vars []*ir.Var
	dims []lang.Dim
}

func (g *gen) leaf() ir.Expr {
	switch g.r.IntN(5) {
	case 0:
		return num(g.r.Int64N(9) - 4)
	case 1:
		return size(g.dims[g.r.IntN(len(g.dims))])
	default:
		return ref(g.vars[g.r.IntN(len(g.vars))])
	}
}

func (g *gen) expr(depth int) ir.Expr {
	if depth == 0 || g.r.IntN(4) == 0 {
		return g.leaf()
	}
	a := g.expr(depth - 1)
	switch g.r.IntN(13) {
	case 0, 1:
		return add(a, g.expr(depth-1))
	case 2, 3:
		return sub(a, g.expr(depth-1))
	case 4:
		k := num(g.r.Int64N(7) - 3)
		if g.r.IntN(2) == 0 {
			return mul(k, a)
		}
		return mul(a, k)
	case 5:
		// A product by a dimension or another non-negative symbolic
		// point (S + 1). Negative points are TestProductByNegativePoint's.
		d := size(g.dims[g.r.IntN(len(g.dims))])
		if g.r.IntN(2) == 0 {
			d = add(d, num(1))
		}
		if g.r.IntN(2) == 0 {
			return mul(d, a)
		}
		return mul(a, d)
	case 6:
		return div(a, num(g.r.Int64N(4)+1))
	case 7:
		return mod(a, num(g.r.Int64N(4)+1))
	case 8:
		return neg(a)
	case 9:
		return sel(less(g.leaf(), g.leaf()), a, g.expr(depth-1))
	case 10:
		return call("max", a, g.expr(depth-1))
	case 11:
		return call("min", a, g.expr(depth-1))
	default:
		return call("abs", a)
	}
}

// TestRandomSound: every value a random expression takes, at every
// combination of its variables' values and for random concrete shape
// symbols, lies in its computed interval.
func TestRandomSound(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	a, b, c := newVar("a", sym("A")), newVar("b", sym("B")), newVar("c", cst(3))
	g := &gen{r: r, vars: []*ir.Var{a, b, c}, dims: []lang.Dim{sym("A"), sym("B"), sym("S")}}
	bounded := 0
	const trials = 3000
	for trial := 0; trial < trials; trial++ {
		e := g.expr(4)
		// Half the time a is split: it ranges over [a.lo, a.hi].
		env := interval.Env{}
		syms := map[string]int64{"A": r.Int64N(5) + 1, "B": r.Int64N(4) + 1, "S": r.Int64N(4)}
		if r.IntN(2) == 0 {
			env[a] = part(a)
			lo := r.Int64N(syms["A"])
			syms["a.lo"], syms["a.hi"] = lo, lo+r.Int64N(syms["A"]-lo)
		}
		if _, err := interval.Of(e, env); err != nil {
			var ie *interval.Error
			if !errors.As(err, &ie) {
				t.Fatalf("%s: error %v is not an *interval.Error", ir.ExprString(e), err)
			}
			continue
		}
		bounded++
		checkSound(t, e, env, g.vars, syms)
		if t.Failed() {
			return
		}
	}
	if bounded < trials/2 {
		t.Errorf("only %d of %d random expressions were bounded", bounded, trials)
	}
}

// A non-negative range times, or modulo, a symbolic point that is not
// provably non-negative (-N) must still hold every value: i * -N over i in
// [0, N - 1] takes the values 0, -N, ..., -N*(N - 1), and i % -N (the sign
// of the dividend, as in C) 0, ..., N - 1.
func TestProductByNegativePoint(t *testing.T) {
	for _, e := range []ir.Expr{mul(ref(i), neg(size(N))), mul(neg(size(N)), ref(i)), mod(ref(i), neg(size(N)))} {
		t.Run(ir.ExprString(e), func(t *testing.T) {
			iv, err := interval.Of(e, nil)
			if err != nil {
				return // refusing to bound it is sound
			}
			for n := int64(1); n <= 4; n++ {
				checkSound(t, e, nil, []*ir.Var{i}, map[string]int64{"N": n})
			}
			if t.Failed() {
				t.Logf("%s gives %s", ir.ExprString(e), iv)
			}
		})
	}
}
