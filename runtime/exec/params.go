package exec

import (
	"hash/fnv"
	"math"
	"math/rand/v2"

	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/runtime/tensor"
)

// InitParam returns the initial value of parameter p with the given
// (evaluated) shape, determined by seed and p's name only. See the package
// comment for the kinds.
func InitParam(p *ir.Param, shape []int, seed uint64) (*tensor.Tensor, error) {
	v := p.Value
	if v.DType.Size() == 0 {
		return nil, lang.Errorf(p.Pos, "parameter %s has invalid dtype %s", v.Name, v.DType)
	}
	for _, d := range shape {
		if d < 0 {
			return nil, lang.Errorf(p.Pos, "parameter %s has negative extent in shape %v", v.Name, shape)
		}
	}
	h := fnv.New64a()
	h.Write([]byte(v.Name))
	rng := rand.New(rand.NewPCG(seed, h.Sum64()))
	arg := func(i int, def float64) float64 {
		if i < len(p.Init.Args) {
			return p.Init.Args[i]
		}
		return def
	}
	t := tensor.New(v.DType, shape)
	n := t.Len()
	fill := func(gen func() float64) {
		for i := 0; i < n; i++ {
			t.SetFlat(i, gen())
		}
	}
	fanIn, fanOut := fans(shape)
	maxArgs := map[string]int{"normal": 2, "uniform": 2, "zeros": 0, "ones": 0, "const": 1, "glorot": 0, "he": 0}
	m, ok := maxArgs[p.Init.Kind]
	if !ok {
		return nil, lang.Errorf(p.Pos, "parameter %s: unknown initialiser %q (want normal, uniform, zeros, ones, const, glorot or he)", v.Name, p.Init.Kind)
	}
	if len(p.Init.Args) > m {
		return nil, lang.Errorf(p.Pos, "parameter %s: initialiser %s takes at most %d arguments, got %d", v.Name, p.Init.Kind, m, len(p.Init.Args))
	}
	switch p.Init.Kind {
	case "normal":
		mean, std := arg(0, 0), arg(1, 0.02)
		fill(func() float64 { return mean + std*rng.NormFloat64() })
	case "uniform":
		lo, hi := arg(0, -0.05), arg(1, 0.05)
		fill(func() float64 { return lo + (hi-lo)*rng.Float64() })
	case "zeros":
	case "ones":
		fill(func() float64 { return 1 })
	case "const":
		if len(p.Init.Args) != 1 {
			return nil, lang.Errorf(p.Pos, "parameter %s: initialiser const needs its value", v.Name)
		}
		c := p.Init.Args[0]
		fill(func() float64 { return c })
	case "glorot":
		limit := math.Sqrt(6 / float64(fanIn+fanOut))
		fill(func() float64 { return limit * (2*rng.Float64() - 1) })
	case "he":
		std := math.Sqrt(2 / float64(fanIn))
		fill(func() float64 { return std * rng.NormFloat64() })
	}
	return t, nil
}

// fans returns fan_in and fan_out of a weight laid out [out, in, k...].
func fans(shape []int) (in, out int) {
	switch len(shape) {
	case 0:
		in, out = 1, 1
	case 1:
		in, out = shape[0], shape[0]
	default:
		r := 1
		for _, d := range shape[2:] {
			r *= d
		}
		in, out = shape[1]*r, shape[0]*r
	}
	return max(in, 1), max(out, 1)
}
