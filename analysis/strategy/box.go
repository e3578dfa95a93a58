package strategy

// Set operations on constant regions, shared by the cost model, the
// execution graph and the code generator.

// WholeBox is the region of every element of shape.
func WholeBox(shape []int64) Box {
	b := make(Box, len(shape))
	for i, n := range shape {
		b[i] = Box1{Lo: 0, Hi: n - 1}
	}
	return b
}

// Size is the number of elements (0 when any interval is empty).
func (b Box) Size() int64 {
	n := int64(1)
	for _, iv := range b {
		n *= iv.Size()
	}
	return n
}

// Overlap is the number of elements in both b and c (Intersect's size,
// without building it).
func (b Box) Overlap(c Box) int64 {
	n := int64(1)
	for d := range b {
		n *= max(0, min(b[d].Hi, c[d].Hi)-max(b[d].Lo, c[d].Lo)+1)
	}
	return n
}

// Intersect is the elements in both b and c.
func (b Box) Intersect(c Box) Box {
	out := make(Box, len(b))
	for d := range b {
		out[d] = Box1{Lo: max(b[d].Lo, c[d].Lo), Hi: min(b[d].Hi, c[d].Hi)}
	}
	return out
}

// Shift places box rel, given relative to b's first element, in b's
// coordinates.
func (b Box) Shift(rel Box) Box {
	out := make(Box, len(b))
	for d := range b {
		out[d] = Box1{Lo: b[d].Lo + rel[d].Lo, Hi: b[d].Lo + rel[d].Hi}
	}
	return out
}

// Relative expresses b in the coordinates of a region starting at base's
// first element.
func (b Box) Relative(base Box) Box {
	out := make(Box, len(b))
	for d := range b {
		out[d] = Box1{Lo: b[d].Lo - base[d].Lo, Hi: b[d].Hi - base[d].Lo}
	}
	return out
}

// Equal reports whether two regions are the same.
func (b Box) Equal(c Box) bool {
	if len(b) != len(c) {
		return false
	}
	for d := range b {
		if b[d] != c[d] {
			return false
		}
	}
	return true
}

// Subtract cuts b into disjoint boxes not covered by any of cs.
func (b Box) Subtract(cs []Box) []Box {
	if b.Size() == 0 {
		return nil
	}
	parts := []Box{b}
	for _, c := range cs {
		var next []Box
		for _, p := range parts {
			next = append(next, p.minus(c)...)
		}
		parts = next
	}
	return parts
}

// minus is b \ c as up to 2·rank disjoint boxes.
func (b Box) minus(c Box) []Box {
	in := b.Intersect(c)
	if in.Size() == 0 {
		return []Box{b}
	}
	var out []Box
	rest := append(Box(nil), b...)
	for d := range b {
		if rest[d].Lo < in[d].Lo {
			p := append(Box(nil), rest...)
			p[d] = Box1{Lo: rest[d].Lo, Hi: in[d].Lo - 1}
			out = append(out, p)
		}
		if in[d].Hi < rest[d].Hi {
			p := append(Box(nil), rest...)
			p[d] = Box1{Lo: in[d].Hi + 1, Hi: rest[d].Hi}
			out = append(out, p)
		}
		rest[d] = in[d]
	}
	return out
}
