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

// f32Module has, per f32 function NAME, `void vec_NAME(float* x, float*
// out, i64 n)` mapping it over an array.
func f32Module() *ir.Module {
	m := ir.NewModule()
	l := New(m)
	ptr := types.NewPointer(types.Float)
	for _, name := range f32Names() {
		f, _ := l.Func32(name)
		x, out, n := ir.NewParam("x", ptr), ir.NewParam("out", ptr), ir.NewParam("n", types.I64)
		w := m.NewFunc("vec_"+name, types.Void, x, out, n)
		entry, head, body, exit := w.NewBlock(""), w.NewBlock(""), w.NewBlock(""), w.NewBlock("")
		entry.NewBr(head)
		i := head.NewPhi(&ir.Incoming{X: constant.NewInt(types.I64, 0), Pred: entry})
		head.NewCondBr(head.NewICmp(enum.IPredSLT, i, n), body, exit)
		v := body.NewCall(f, body.NewLoad(types.Float, body.NewGetElementPtr(types.Float, x, i)))
		body.NewStore(v, body.NewGetElementPtr(types.Float, out, i))
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
// infinities and NaN among them) through each function of the f32
// library, compiled for the host, and checks it against TDL's function
// in double rounded to f32 (the correctly rounded value but for double
// rounding, a 2⁻²⁹ ulp effect) within the ulps lang/precision states.
func TestF32Accuracy(t *testing.T) {
	tools, err := toolchain.Find()
	if err != nil {
		t.Skip(err)
	}
	handle, _, err := openHost(tools, []byte(f32Module().String()))
	if err != nil {
		t.Fatal(err)
	}
	const step = 64
	xs := make([]float32, 0, 1<<32/step)
	for b := uint64(0); b < 1<<32; b += step {
		xs = append(xs, math.Float32frombits(uint32(b)))
	}
	xs = append(xs, float32(math.Inf(1)), float32(math.Inf(-1)), 0, float32(math.Copysign(0, -1)))
	out := make([]float32, len(xs))
	for _, name := range f32Names() {
		var vec func(x, out *float32, n int64)
		purego.RegisterLibFunc(&vec, handle, "vec_"+name)
		vec(&xs[0], &out[0], int64(len(xs)))
		ref, _ := tir.FloatFunc(name)
		worst, at := 0.0, float32(0)
		for i, x := range xs {
			if d := ulps32(out[i], float32(ref(float64(x)))); d > worst {
				worst, at = d, x
			}
		}
		bound := precision.F32ULPs[name]
		t.Logf("%s: at most %.0f ulp (at %g), %d values", name, worst, at, len(xs))
		if worst > bound {
			t.Errorf("%s: %.0f ulp at %g: got %g, want %g (the library states %.0f)", name, worst, at, out[indexOf(xs, at)], float32(ref(float64(at))), bound)
		}
	}
}

func indexOf(xs []float32, x float32) int {
	for i, v := range xs {
		if math.Float32bits(v) == math.Float32bits(x) {
			return i
		}
	}
	return 0
}
