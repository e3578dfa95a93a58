package executor

import "tofuc/runtime/plan"

// Rows is a strided copy: Depth slices of Height rows of Width contiguous
// bytes. Row (z, y) starts SrcOff + z·SrcSlice + y·SrcPitch bytes into
// the source and DstOff + z·DstSlice + y·DstPitch bytes into the
// destination. Slices are whole multiples of the pitches, as CUDA's 3-D
// copies describe them (pitch × height).
type Rows struct {
	Width, Height, Depth       int64
	SrcOff, SrcPitch, SrcSlice int64
	DstOff, DstPitch, DstSlice int64
}

// Bytes is how much the copy moves.
func (r Rows) Bytes() int64 { return r.Width * r.Height * r.Depth }

// Each calls f with the source and destination offsets of every row.
func (r Rows) Each(f func(src, dst int64)) {
	for z := range r.Depth {
		for y := range r.Height {
			f(r.SrcOff+z*r.SrcSlice+y*r.SrcPitch, r.DstOff+z*r.DstSlice+y*r.DstPitch)
		}
	}
}

// Whole is the copy of n contiguous bytes.
func Whole(n int64) Rows {
	return Rows{Width: n, Height: 1, Depth: 1, SrcPitch: n, SrcSlice: n, DstPitch: n, DstSlice: n}
}

// axis is one dimension of a box copy: its extent and the strides of a
// step along it in the source and the destination, in bytes.
type axis struct{ n, src, dst int64 }

// BoxRows describes the copy of box of a row-major tensor of shape from
// to offset at of a row-major tensor of shape to, elements of size bytes,
// as strided copies: dimensions contiguous in both tensors are merged
// into one, and every index of the dimensions beyond the three innermost
// left is a copy of its own. An empty box is no copy.
func BoxRows(size int64, from []int64, box []plan.Dim, to, at []int64) []Rows {
	base, outer, ok := boxAxes(size, from, box, to, at)
	if !ok {
		return nil
	}
	out := []Rows{base}
	for _, a := range outer {
		var next []Rows
		for i := range a.n {
			for _, r := range out {
				r.SrcOff += i * a.src
				r.DstOff += i * a.dst
				next = append(next, r)
			}
		}
		out = next
	}
	return out
}

// boxRows is how many strided copies BoxRows describes a copy by
// (saturating), without describing them.
func boxRows(size int64, from []int64, box []plan.Dim, to, at []int64) int64 {
	_, outer, ok := boxAxes(size, from, box, to, at)
	if !ok {
		return 0
	}
	n := int64(1)
	for _, a := range outer {
		n = satMul(n, a.n)
	}
	return n
}

// boxAxes is BoxRows' first copy and the dimensions beyond it, each
// index of which is a copy of its own; not ok for an empty box.
func boxAxes(size int64, from []int64, box []plan.Dim, to, at []int64) (base Rows, outer []axis, ok bool) {
	axes := []axis{{n: size, src: 1, dst: 1}} // the bytes of an element
	src, dst := size, size                    // the strides of dimension d
	var srcOff, dstOff int64
	for d := len(box) - 1; d >= 0; d-- {
		n := box[d].Hi - box[d].Lo
		if n <= 0 {
			return Rows{}, nil, false
		}
		srcOff += box[d].Lo * src
		dstOff += at[d] * dst
		if n > 1 {
			axes = mergeAxis(axes, axis{n, src, dst})
		}
		src *= from[d]
		dst *= to[d]
	}
	base = Rows{Width: axes[0].n, Height: 1, Depth: 1, SrcOff: srcOff, DstOff: dstOff}
	base.SrcPitch, base.DstPitch = base.Width, base.Width
	if len(axes) > 1 {
		base.Height, base.SrcPitch, base.DstPitch = axes[1].n, axes[1].src, axes[1].dst
	}
	base.SrcSlice, base.DstSlice = base.SrcPitch*base.Height, base.DstPitch*base.Height
	if len(axes) > 2 {
		base.Depth, base.SrcSlice, base.DstSlice = axes[2].n, axes[2].src, axes[2].dst
	}
	return base, axes[min(len(axes), 3):], true
}

// mergeAxis appends a, the next outer axis, merging it into the last one
// when a step along a continues a step along it in both tensors.
func mergeAxis(axes []axis, a axis) []axis {
	last := &axes[len(axes)-1]
	if a.src == last.n*last.src && a.dst == last.n*last.dst {
		last.n *= a.n
		return axes
	}
	return append(axes, a)
}
