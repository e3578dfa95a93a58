package mathir

import (
	"math"
	"sort"
	"testing"

	"github.com/ebitengine/purego"
	"github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"tofuc/codegen/toolchain"
	tir "tofuc/lang/ir"
	"tofuc/lang/precision"
)

// f32Names are the f32 library's functions, sorted.
func f32Names() []string {
	var names []string
	for n := range f32defs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// f32Module has, per f32 function NAME, `void vec_NAME(float* x,
// float* y, float* out, i64 n)` mapping it over arrays (y unused by
// unary functions).
func f32Module() *ir.Module {
	m := ir.NewModule()
	l := New(m)
	ptr := types.NewPointer(types.Float)
	for _, name := range f32Names() {
		f, _ := l.Func32(name)
		x, y, out, n := ir.NewParam("x", ptr), ir.NewParam("y", ptr), ir.NewParam("out", ptr), ir.NewParam("n", types.I64)
		w := m.NewFunc("vec_"+name, types.Void, x, y, out, n)
		entry, head, body, exit := w.NewBlock(""), w.NewBlock(""), w.NewBlock(""), w.NewBlock("")
		entry.NewBr(head)
		i := head.NewPhi(&ir.Incoming{X: constant.NewInt(types.I64, 0), Pred: entry})
		head.NewCondBr(head.NewICmp(enum.IPredSLT, i, n), body, exit)
		args := []value.Value{body.NewLoad(types.Float, body.NewGetElementPtr(types.Float, x, i))}
		if len(f.Params) == 2 {
			args = append(args, body.NewLoad(types.Float, body.NewGetElementPtr(types.Float, y, i)))
		}
		body.NewStore(body.NewCall(f, args...), body.NewGetElementPtr(types.Float, out, i))
		i.Incs = append(i.Incs, &ir.Incoming{X: body.NewAdd(i, constant.NewInt(types.I64, 1)), Pred: body})
		body.NewBr(head)
		exit.NewRet(nil)
	}
	return m
}

// ulps32 is the distance from got to want in f32 units in the last
// place (0 for two NaNs, +Inf for a NaN against a number).
func ulps32(got, want float32) float64 {
	if math.IsNaN(float64(got)) || math.IsNaN(float64(want)) {
		if math.IsNaN(float64(got)) && math.IsNaN(float64(want)) {
			return 0
		}
		return math.Inf(1)
	}
	ordered := func(f float32) int64 {
		b := int64(math.Float32bits(f))
		if b < 0x80000000 {
			return b
		}
		return 0x80000000 - b // negatives below zero, -0 == +0
	}
	return math.Abs(float64(ordered(got) - ordered(want)))
}

// TestF32Accuracy sweeps every 64th f32 (every binade, both signs,
// infinities and NaN among them) through each unary function of the f32
// library, and pairs of every 2^20th f32 and of special values through
// each binary one, compiled for the host, and checks them against TDL's
// function in double rounded to f32 (the correctly rounded value but
// for double rounding, a 2⁻²⁹ ulp effect) within the ulps lang/precision
// states. A zero result must have the sign of TDL's (tanh(-0) is -0);
// a function stated correctly rounded gives the very bits, but for a
// NaN's payload.
func TestF32Accuracy(t *testing.T) {
	tools, err := toolchain.Find()
	if err != nil {
		t.Skip(err)
	}
	handle, _, err := openHost(tools, []byte(f32Module().String()))
	if err != nil {
		t.Fatal(err)
	}
	xs1 := sweep32(64)
	xs2, ys2 := pairs32(sweep32(1 << 20))
	for _, name := range f32Names() {
		xs, ys := xs1, xs1
		if len(f32defs[name].params) == 2 {
			xs, ys = xs2, ys2
		}
		out := make([]float32, len(xs))
		var vec func(x, y, out *float32, n int64)
		purego.RegisterLibFunc(&vec, handle, "vec_"+name)
		vec(&xs[0], &ys[0], &out[0], int64(len(xs)))
		ref := reference(name)
		bound := precision.F32ULPs[name]
		worst, at := 0.0, 0
		for i := range xs {
			want := float32(ref(float64(xs[i]), float64(ys[i])))
			d := ulps32(out[i], want)
			if d == 0 && want == 0 && math.Float32bits(out[i]) != math.Float32bits(want) {
				d = math.Inf(1) // -0 for +0, or +0 for -0: wrong at any ulps
			}
			if d > worst {
				worst, at = d, i
			}
		}
		t.Logf("%s: at most %.0f ulp (at %g, %g), %d values", name, worst, xs[at], ys[at], len(xs))
		if worst > bound {
			t.Errorf("%s: %.0f ulp at (%g, %g): got %g, want %g (the library states %.0f)", name, worst, xs[at], ys[at], out[at], float32(ref(float64(xs[at]), float64(ys[at]))), bound)
		}
	}
}

// sweep32 is every step-th f32 by its bits, and ±Inf and ±0.
func sweep32(step uint64) []float32 {
	xs := make([]float32, 0, 1<<32/step+4)
	for b := uint64(0); b < 1<<32; b += step {
		xs = append(xs, math.Float32frombits(uint32(b)))
	}
	return append(xs, float32(math.Inf(1)), float32(math.Inf(-1)), 0, float32(math.Copysign(0, -1)))
}

// pairs32 is every pair of xs, with NaN: first and second arguments.
func pairs32(xs []float32) (first, second []float32) {
	xs = append(xs, float32(math.NaN()))
	for _, x := range xs {
		for _, y := range xs {
			first, second = append(first, x), append(second, y)
		}
	}
	return first, second
}

// reference is TDL's function name of one or two arguments.
func reference(name string) func(x, y float64) float64 {
	un, bin := tir.FloatFunc(name)
	if bin != nil {
		return bin
	}
	return func(x, _ float64) float64 { return un(x) }
}
