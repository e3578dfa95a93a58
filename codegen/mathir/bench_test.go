package mathir

import (
	"math/rand"
	"testing"
)

// BenchmarkHost times each compiled function against Go's math on the
// same 4096 inputs of its test ranges (ns per element with -benchtime
// and the element count: go test -run '^$' -bench Host ./codegen/mathir).
func BenchmarkHost(b *testing.B) {
	h := loadHost(b)
	for _, name := range tested() {
		r := rand.New(rand.NewSource(1))
		xs, ys := benchInputs(r, name)
		out := make([]float64, len(xs))
		b.Run(name+"/ir", func(b *testing.B) {
			b.SetBytes(8 * int64(len(xs))) // reported MB/s: 8 bytes per element
			for i := 0; i < b.N; i++ {
				h.vec[name](&xs[0], &ys[0], &out[0], int64(len(xs)))
			}
		})
		b.Run(name+"/go", func(b *testing.B) {
			b.SetBytes(8 * int64(len(xs)))
			for i := 0; i < b.N; i++ {
				if f, f2 := ref(name); f != nil {
					for j, x := range xs {
						out[j] = f(x)
					}
				} else {
					for j, x := range xs {
						out[j] = f2(x, ys[j])
					}
				}
			}
		})
	}
}

// benchInputs are 4096 inputs from the function's first test range
// (or [-10, 10]).
func benchInputs(r *rand.Rand, name string) (xs, ys []float64) {
	rg := [2]float64{-10, 10}
	if c := unaryCases[name]; len(c.ranges) > 0 {
		rg = c.ranges[0]
	}
	xs = uniform(r, 4096, rg[0], rg[1])
	ys = uniform(r, 4096, -10, 10)
	if name == "pow" {
		xs = uniform(r, 4096, 0, 10)
	}
	return xs, ys
}
