package cost

import "tofuc/analysis/strategy"

// box is a constant region with set operations.
type box []strategy.Box1

func wholeBox(shape []int64) box {
	b := make(box, len(shape))
	for d, n := range shape {
		b[d] = strategy.Box1{Lo: 0, Hi: n - 1}
	}
	return b
}

// size is the number of elements (0 when any interval is empty).
func (b box) size() int64 {
	n := int64(1)
	for _, iv := range b {
		n *= iv.Size()
	}
	return n
}

func (b box) intersect(c box) box {
	out := make(box, len(b))
	for d := range b {
		out[d] = strategy.Box1{Lo: max(b[d].Lo, c[d].Lo), Hi: min(b[d].Hi, c[d].Hi)}
	}
	return out
}
