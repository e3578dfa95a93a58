package execution

import "tofuc/analysis/strategy"

func whole(shape []int64) Box {
	b := make(Box, len(shape))
	for i, n := range shape {
		b[i] = strategy.Box1{Lo: 0, Hi: n - 1}
	}
	return b
}

// shift places a box given relative to base in base's coordinates.
func shift(base, rel Box) Box {
	out := make(Box, len(base))
	for d := range base {
		out[d] = strategy.Box1{Lo: base[d].Lo + rel[d].Lo, Hi: base[d].Lo + rel[d].Hi}
	}
	return out
}

func size(b Box) int64 {
	n := int64(1)
	for _, iv := range b {
		n *= iv.Size()
	}
	return n
}

func intersect(a, b Box) Box {
	out := make(Box, len(a))
	for d := range a {
		out[d] = strategy.Box1{Lo: max(a[d].Lo, b[d].Lo), Hi: min(a[d].Hi, b[d].Hi)}
	}
	return out
}

// subtract cuts a box into disjoint boxes not covered by any of cs.
func subtract(a Box, cs []Box) []Box {
	if size(a) == 0 {
		return nil
	}
	parts := []Box{a}
	for _, c := range cs {
		var next []Box
		for _, p := range parts {
			next = append(next, minus(p, c)...)
		}
		parts = next
	}
	return parts
}

// minus is a \ c as up to 2·rank disjoint boxes.
func minus(a, c Box) []Box {
	in := intersect(a, c)
	if size(in) == 0 {
		return []Box{a}
	}
	var out []Box
	rest := append(Box(nil), a...)
	for d := range a {
		if rest[d].Lo < in[d].Lo {
			b := append(Box(nil), rest...)
			b[d] = strategy.Box1{Lo: rest[d].Lo, Hi: in[d].Lo - 1}
			out = append(out, b)
		}
		if in[d].Hi < rest[d].Hi {
			b := append(Box(nil), rest...)
			b[d] = strategy.Box1{Lo: in[d].Hi + 1, Hi: rest[d].Hi}
			out = append(out, b)
		}
		rest[d] = in[d]
	}
	return out
}
