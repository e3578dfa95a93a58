package mathir

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/ebitengine/purego"
	"github.com/llir/llvm/ir"

	"tofuc/codegen/toolchain"
)

// TestPowConstY compares pow with a constant exponent (FuncConstY, the
// branch-free powConstY) with math.Pow bit for bit, for exponents with
// and without a fractional part, of either sign, past and within the
// reduction of yf to [-0.5, 0.5], and with integer parts up to 63, whose
// squaring leaves the exponent range (the unrolled loop's early exit).
func TestPowConstY(t *testing.T) {
	tools, err := toolchain.Find()
	if err != nil {
		t.Skip(err)
	}
	ys := []float64{0.75, -0.75, 0.5, -0.5, 0.25, 1.5, -2.5, 2, 3, -3, 0, 1, -1, 0.6, 7.25, -13.4, 40.5, 63.75, -63, math.Copysign(0, -1)}
	m := ir.NewModule()
	l := New(m)
	l.NativeFMA = HostHasFMA()
	for i, y := range ys {
		f, err := l.FuncConstY("pow", y)
		if err != nil {
			t.Fatal(err)
		}
		vecWrapper(m, fmt.Sprintf("pow%d", i), f)
	}
	if _, err := l.FuncConstY("exp", 1); err == nil {
		t.Error("FuncConstY accepted a function of one argument")
	}
	handle, _, err := openHost(tools, []byte(m.String()))
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewSource(34))
	xs := append(specials(), anyDouble(r, samples)...)
	xs = append(xs, uniform(r, samples, -4, 4)...)
	xs = append(xs, uniform(r, samples, 0, 1e-300)...)
	xs = append(xs, 1e300, -1e300, 1e-310, -1e-310, math.MaxFloat64, math.SmallestNonzeroFloat64)
	for i, y := range ys {
		var vec func(x, y, out *float64, n int64)
		purego.RegisterLibFunc(&vec, handle, fmt.Sprintf("vec_pow%d", i))
		out := make([]float64, len(xs))
		vec(&xs[0], &xs[0], &out[0], int64(len(xs)))
		bad := 0
		for j, x := range xs {
			want := math.Pow(x, y)
			if math.Float64bits(out[j]) != math.Float64bits(want) && !(math.IsNaN(want) && math.IsNaN(out[j])) {
				if bad++; bad <= 3 {
					t.Errorf("pow(%g, %g) = %g, want %g", x, y, out[j], want)
				}
			}
		}
	}
}
