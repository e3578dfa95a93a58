package onnx

import (
	"math"
	"slices"

	"tofuc/lang"
	"tofuc/runtime/tensor"
)

// convResize maps Resize (opsets 11 on) one resized axis at a time: a
// gather at rounded coordinates (nearest), stdlib resample_linear or
// resample_cubic at the input coordinates of the output positions,
// computed here from the node's attributes as the ONNX reference
// computes them (float64). Linear and cubic interpolation are
// separable, so the axes' 1-D resizes in turn give the N-D one.
func convResize(c *nodeCtx) {
	if c.opset() < 11 {
		c.fail("Resize before opset 11 (Upsample's conventions) is not supported")
	}
	x := c.must(0)
	axes := c.resizeAxes(rank(x))
	scales, sizes := c.resizeTargets(x, axes)
	mode := c.stringAttr("mode", "nearest")
	coord := c.stringAttr("coordinate_transformation_mode", "half_pixel")
	if coord == "tf_crop_and_resize" {
		c.fail("coordinate_transformation_mode tf_crop_and_resize is not supported")
	}
	if c.intAttr("antialias", 0) != 0 && mode != "nearest" && slices.ContainsFunc(axes, func(a int) bool { return scales[a] < 1 }) {
		c.fail("antialias when downsampling is not supported")
	}
	y := x
	for _, a := range axes {
		if scales[a] == 1 {
			continue // the identity in every mode: the coordinates are the positions
		}
		coords := make([]float64, sizes[a])
		for o := range coords {
			coords[o] = resizeCoordinate(coord, float64(o), scales[a], c.extent(x, a), sizes[a])
			if math.IsNaN(coords[o]) {
				c.fail("coordinate_transformation_mode %q is none of half_pixel, half_pixel_symmetric, pytorch_half_pixel, align_corners, asymmetric", coord)
			}
		}
		y = c.resample(y, a, mode, coords)
	}
	c.out(0, y)
}

// resizeAxes are the axes the node's axes attribute names (all when it
// has none), nonnegative, in its order.
func (c *nodeCtx) resizeAxes(rank int) []int {
	var axes []int
	for _, a := range c.intsAttr("axes", nil) {
		axes = append(axes, int(c.axis(a, rank)))
	}
	if axes == nil {
		for a := range rank {
			axes = append(axes, a)
		}
	}
	return axes
}

// resizeTargets are each axis's scale and output extent (scale 1 on
// axes not resized, whose extent is not asked for: a dynamic batch):
// from the scales input, the extent rounded down; from sizes, the scale
// their ratio, or with keep_aspect_ratio_policy not_larger or
// not_smaller the least or the largest ratio over the axes and the
// extents rounded half up.
func (c *nodeCtx) resizeTargets(x *value, axes []int) (scales []float64, sizes []int64) {
	scales, sizes = make([]float64, rank(x)), make([]int64, rank(x))
	for a := range scales {
		scales[a] = 1
	}
	if given := c.knownInts(3, "sizes"); len(given) > 0 {
		if len(given) != len(axes) {
			c.fail("%d sizes for %d axes", len(given), len(axes))
		}
		for i, a := range axes {
			sizes[a] = given[i]
			scales[a] = float64(given[i]) / float64(c.extent(x, a))
		}
		policy := c.stringAttr("keep_aspect_ratio_policy", "stretch")
		if policy == "stretch" {
			return scales, sizes
		}
		pick := slices.Min[[]float64]
		switch policy {
		case "not_larger":
		case "not_smaller":
			pick = slices.Max[[]float64]
		default:
			c.fail("keep_aspect_ratio_policy %q is none of stretch, not_larger, not_smaller", policy)
		}
		var ratios []float64
		for _, a := range axes {
			ratios = append(ratios, scales[a])
		}
		scale := pick(ratios)
		for _, a := range axes {
			scales[a] = scale
			sizes[a] = int64(scale*float64(c.extent(x, a)) + 0.5)
		}
		return scales, sizes
	}
	given := c.knownFloats(2, "scales")
	if len(given) != len(axes) {
		c.fail("Resize needs scales or sizes, one per resized axis (%d axes, %d scales)", len(axes), len(given))
	}
	for i, a := range axes {
		if given[i] <= 0 {
			c.fail("scale %g is not positive", given[i])
		}
		if scales[a] = given[i]; given[i] != 1 {
			sizes[a] = int64(given[i] * float64(c.extent(x, a)))
		}
	}
	return scales, sizes
}

// resizeCoordinate is the input coordinate of output position o along
// an axis of n inputs resized to size by scale, in the coordinate mode
// (NaN for an unknown one), with the reference's output width
// scale · n.
func resizeCoordinate(mode string, o, scale float64, n, size int64) float64 {
	width := scale * float64(n)
	switch mode {
	case "align_corners":
		if width == 1 {
			return 0
		}
		return o * float64(n-1) / (width - 1)
	case "asymmetric":
		return o / scale
	case "pytorch_half_pixel":
		if width == 1 {
			return -0.5
		}
		return (o+0.5)/scale - 0.5
	case "half_pixel":
		return (o+0.5)/scale - 0.5
	case "half_pixel_symmetric":
		return float64(n)/2*(1-float64(size)/width) + (o+0.5)/scale - 0.5
	}
	return math.NaN()
}

// resample resizes axis a of x to the len(coords) positions at input
// coordinates coords, by mode.
func (c *nodeCtx) resample(x *value, a int, mode string, coords []float64) *value {
	switch mode {
	case "nearest":
		n := c.extent(x, a)
		idx := make([]int64, len(coords))
		for o, at := range coords {
			idx[o] = min(max(nearest(c.stringAttr("nearest_mode", "round_prefer_floor"), at, c), 0), n-1)
		}
		indices := constValue("", tensor.FromInts(lang.I64, []int{len(idx)}, idx), false)
		return c.call1("gather", []attr{intA("axis", int64(a))}, x, indices)
	case "linear", "cubic":
		at := constValue("", tensor.FromFloats(lang.F64, []int{len(coords)}, coords), false)
		if mode == "linear" {
			return c.call1("resample_linear", []attr{intA("axis", int64(a))}, x, at)
		}
		return c.call1("resample_cubic", []attr{intA("axis", int64(a)), floatA("cubic_a", c.floatAttr("cubic_coeff_a", -0.75)),
			boolA("exclude_outside", c.intAttr("exclude_outside", 0) != 0)}, x, at)
	}
	c.fail("mode %q is none of nearest, linear, cubic", mode)
	return nil
}

// nearest rounds coordinate x to an index by the nearest_mode: an
// integer coordinate is itself in every mode.
func nearest(mode string, x float64, c *nodeCtx) int64 {
	switch mode {
	case "round_prefer_floor":
		return int64(math.Ceil(x - 0.5))
	case "round_prefer_ceil":
		return int64(math.Floor(x + 0.5))
	case "floor":
		return int64(math.Floor(x))
	case "ceil":
		return int64(math.Ceil(x))
	}
	c.fail("nearest_mode %q is none of round_prefer_floor, round_prefer_ceil, floor, ceil", mode)
	return 0
}
