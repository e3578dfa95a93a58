package cost

import (
	"fmt"
	"math"
	"slices"
)

// FitHalfPerformance fits Hockney's model of a kernel's time, t = (f +
// f½)/r∞, to measured contractions of flops[i] FLOPs (padded to whole
// micro-tiles, Device.ComputeSeconds) taking seconds[i] each (their
// compute, without the launch): it returns the asymptotic rate r∞
// (Device.PeakFLOPS) and the half-performance size f½ ≥ 0
// (Device.HalfFLOPs), the size at which a contraction runs at half of
// r∞. The fit minimises the squared logarithm of the model's time over
// the measured one, so that an overestimate and an underestimate by the
// same factor count alike, as do small and large contractions (timing
// noise is a factor, not an amount): for a given f½ the best r∞ is the
// geometric mean of (f + f½)/t, and f½ is the minimum of what remains,
// searched on a logarithmic grid from a millionth of the smallest
// contraction to a hundred times the largest (and 0), then refined by
// golden sections. It needs at least two measurements of different
// sizes.
func FitHalfPerformance(flops, seconds []float64) (rate, half float64, err error) {
	if len(flops) != len(seconds) {
		return 0, 0, fmt.Errorf("%d sizes for %d times", len(flops), len(seconds))
	}
	for i, f := range flops {
		t := seconds[i]
		if !(f > 0) || !(t > 0) || math.IsInf(f, 0) || math.IsInf(t, 0) {
			return 0, 0, fmt.Errorf("measurement %d: %g FLOPs in %g s (both must be positive and finite)", i, f, t)
		}
	}
	lo, hi := slices.Min(flops), slices.Max(flops)
	if lo == hi {
		return 0, 0, fmt.Errorf("the fit needs contractions of at least two sizes")
	}
	// logRate is the best log r∞ for f½ = h, residual what remains.
	logRate := func(h float64) float64 {
		s := 0.0
		for i, f := range flops {
			s += math.Log(f+h) - math.Log(seconds[i])
		}
		return s / float64(len(flops))
	}
	residual := func(h float64) float64 {
		lr, s := logRate(h), 0.0
		for i, f := range flops {
			d := math.Log(f+h) - lr - math.Log(seconds[i])
			s += d * d
		}
		return s
	}
	// The grid: x = log h from log(lo/1e6) to log(100·hi), 40 steps a
	// decade; h = 0 beside it.
	x0, x1 := math.Log(lo/1e6), math.Log(100*hi)
	const steps = 40 * 14
	best, bestRes := -1, residual(0)
	for i := 0; i <= steps; i++ {
		if r := residual(math.Exp(x0 + (x1-x0)*float64(i)/steps)); r < bestRes {
			best, bestRes = i, r
		}
	}
	if best >= 0 {
		// Golden sections within the grid points on either side.
		a := x0 + (x1-x0)*float64(max(0, best-1))/steps
		b := x0 + (x1-x0)*float64(min(steps, best+1))/steps
		g := (math.Sqrt(5) - 1) / 2
		c, d := b-g*(b-a), a+g*(b-a)
		rc, rd := residual(math.Exp(c)), residual(math.Exp(d))
		for range 100 {
			if rc < rd {
				b, d, rd = d, c, rc
				c = b - g*(b-a)
				rc = residual(math.Exp(c))
			} else {
				a, c, rc = c, d, rd
				d = a + g*(b-a)
				rd = residual(math.Exp(d))
			}
		}
		half = math.Exp((a + b) / 2)
		if residual(half) > bestRes {
			half = math.Exp(x0 + (x1-x0)*float64(best)/steps)
		}
	}
	return math.Exp(logRate(half)), half, nil
}
