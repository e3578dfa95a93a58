package onnx

import (
	"fmt"
	"math"
	"slices"

	"tofuc/runtime/tensor"
)

// Spatial and sampling operators: DepthToSpace, SpaceToDepth, GridSample,
// AffineGrid, Col2Im, CenterCropPad, MaxUnpool, RoiAlign, DeformConv.

// convDepthToSpace maps DepthToSpace (4-D; mode since opset 11, DCR
// before) to stdlib depth_to_space.
func convDepthToSpace(c *nodeCtx) {
	x := c.must(0)
	b := c.blocksize(x)
	mode := c.stringAttr("mode", "DCR")
	if mode != "DCR" && mode != "CRD" {
		c.fail("mode %q is neither DCR nor CRD", mode)
	}
	if ch, ok := x.typ.Shape[1].IsConst(); ok && ch%(b*b) != 0 {
		c.fail("%d channels are not a multiple of blocksize² = %d", ch, b*b)
	}
	c.out(0, c.call1("depth_to_space", []attr{intA("blocksize", b), stringA("mode", mode)}, x))
}

// convSpaceToDepth maps SpaceToDepth (4-D) to stdlib space_to_depth.
func convSpaceToDepth(c *nodeCtx) {
	x := c.must(0)
	b := c.blocksize(x)
	for a := 2; a < 4; a++ {
		if n, ok := x.typ.Shape[a].IsConst(); ok && n%b != 0 {
			c.fail("extent %d of axis %d is not a multiple of blocksize %d", n, a, b)
		}
	}
	c.out(0, c.call1("space_to_depth", []attr{intA("blocksize", b)}, x))
}

// blocksize is DepthToSpace's and SpaceToDepth's positive blocksize, on
// an input of rank 4.
func (c *nodeCtx) blocksize(x *value) int64 {
	if rank(x) != 4 {
		c.fail("the input has rank %d; it must be 4 ([N, C, H, W])", rank(x))
	}
	if !c.has("blocksize") {
		c.fail("the blocksize attribute is required")
	}
	b := c.intAttr("blocksize", 0)
	if b <= 0 {
		c.fail("blocksize %d is not positive", b)
	}
	return b
}

// convGridSample maps GridSample (opset 16: 2-D, modes bilinear,
// nearest, bicubic; opset 20 on: N-D, linear, nearest, cubic) for 1, 2
// or 3 spatial axes: stdlib grid_taps per axis (the input's extent
// known), then grid_gather1d, 2d or 3d over the axes' taps.
func convGridSample(c *nodeCtx) {
	x, grid := c.must(0), c.must(1)
	r := rank(x) - 2
	if r < 1 || r > 3 {
		c.fail("GridSample over %d spatial axes is not supported (1, 2 or 3 are)", r)
	}
	if !x.typ.DType.IsFloat() || !grid.typ.DType.IsFloat() {
		c.fail("GridSample of %s input at a %s grid is not supported (floating point only)", x.typ.DType, grid.typ.DType)
	}
	if rank(grid) != r+2 {
		c.fail("the grid has rank %d; it must be %d for an input of rank %d", rank(grid), r+2, rank(x))
	}
	if n := c.extent(grid, r+1); n != int64(r) {
		c.fail("the grid's last extent is %d; it must be %d, the input's spatial rank", n, r)
	}
	mode := c.stringAttr("mode", "linear")
	switch mode {
	case "bilinear":
		mode = "linear"
	case "bicubic":
		mode = "cubic"
	case "linear", "nearest", "cubic":
	default:
		c.fail("mode %q is none of linear (bilinear), nearest, cubic (bicubic)", mode)
	}
	padding := c.stringAttr("padding_mode", "zeros")
	if padding != "zeros" && padding != "border" && padding != "reflection" {
		c.fail("padding_mode %q is none of zeros, border, reflection", padding)
	}
	align := c.intAttr("align_corners", 0) != 0
	args := []*value{x}
	for a := range r {
		// Grid component r - 1 - a is the coordinate along spatial axis a.
		taps := c.call("grid_taps", []attr{intA("size", c.extent(x, 2+a)), intA("comp", int64(r-1-a)),
			stringA("mode", mode), stringA("padding_mode", padding), boolA("align_corners", align)}, grid)
		args = append(args, taps...)
	}
	c.out(0, c.call1(fmt.Sprintf("grid_gather%dd", r), nil, args...))
}

// convCenterCropPad maps CenterCropPad (opset 18) to one stdlib pad:
// an axis longer than its target loses floor((extent - target) / 2)
// elements at its start (a negative pad) and the rest at its end, a
// shorter one gains floor((target - extent) / 2) zeros at its start and
// the rest at its end. The shape must be known at import; the extents
// of the axes it names too.
func convCenterCropPad(c *nodeCtx) {
	x := c.must(0)
	r := rank(x)
	shape := c.knownInts(1, "shape")
	axes := c.intsAttr("axes", nil)
	if axes == nil {
		for a := range r {
			axes = append(axes, int64(a))
		}
	}
	if len(shape) != len(axes) {
		c.fail("%d target extents for %d axes", len(shape), len(axes))
	}
	pads := make([]int64, 2*r)
	seen := map[int64]bool{}
	for i, a := range c.axes(axes, r) {
		if seen[a] {
			c.fail("axis %d is listed twice", a)
		}
		seen[a] = true
		n, target := c.extent(x, int(a)), shape[i]
		if target < 0 {
			c.fail("target extent %d is negative", target)
		}
		if target < n {
			pads[a], pads[int(a)+r] = -((n - target) / 2), -(n - target - (n-target)/2)
		} else {
			pads[a], pads[int(a)+r] = (target-n)/2, target-n-(target-n)/2
		}
	}
	c.out(0, c.call1("pad", []attr{intsA("pads", pads), floatA("value", 0)}, x))
}

// convAffineGrid maps AffineGrid (opset 20; size known at import) to
// stdlib affine_grid2d or affine_grid3d.
func convAffineGrid(c *nodeCtx) {
	theta := c.must(0)
	size := c.knownInts(1, "size")
	if len(size) != 4 && len(size) != 5 {
		c.fail("size has %d entries; it must be [N, C, H, W] or [N, C, D, H, W]", len(size))
	}
	if !theta.typ.DType.IsFloat() {
		c.fail("theta of %s is not supported (floating point only)", theta.typ.DType)
	}
	r := len(size) - 2
	if rank(theta) != 3 || c.extent(theta, 1) != int64(r) || c.extent(theta, 2) != int64(r+1) {
		c.fail("theta is %s; it must be [N, %d, %d] for a size of %d entries", theta.typ.Shape, r, r+1, len(size))
	}
	if n, ok := theta.typ.Shape[0].IsConst(); ok && n != size[0] {
		c.fail("theta has %d matrices for a batch of %d", n, size[0])
	}
	attrs := []attr{boolA("align_corners", c.intAttr("align_corners", 0) != 0)}
	for i, name := range []string{"D", "H", "W"}[3-r:] {
		if size[2+i] <= 0 {
			c.fail("spatial extent %d is not positive", size[2+i])
		}
		attrs = append(attrs, intA(name, size[2+i]))
	}
	c.out(0, c.call1(fmt.Sprintf("affine_grid%dd", r), attrs, theta))
}

// convCol2Im maps Col2Im (opset 18; image_shape and block_shape known at
// import): the input [N, C · prod(block), L] is reshaped to [N, C,
// *block, *blocks] and transposed to pair each kernel axis with its
// axis of blocks, then stdlib col2im_axis turns each pair into an image
// axis.
func convCol2Im(c *nodeCtx) {
	x := c.must(0)
	image, block := c.knownInts(1, "image_shape"), c.knownInts(2, "block_shape")
	r := len(image)
	if r == 0 || len(block) != r {
		c.fail("image_shape has %d entries and block_shape %d; they must be as many, at least one", r, len(block))
	}
	if rank(x) != 3 {
		c.fail("the input has rank %d; it must be 3 ([N, C · prod(block_shape), L])", rank(x))
	}
	ones := func() []int64 { return slices.Repeat([]int64{1}, r) }
	strides, dilations := c.intsAttr("strides", ones()), c.intsAttr("dilations", ones())
	pads := c.intsAttr("pads", make([]int64, 2*r))
	if len(strides) != r || len(dilations) != r || len(pads) != 2*r {
		c.fail("%d strides, %d dilations and %d pads for %d spatial axes", len(strides), len(dilations), len(pads), r)
	}
	kernel, blocks := int64(1), make([]int64, r)
	total := int64(1)
	for a := range r {
		if block[a] <= 0 || image[a] <= 0 || strides[a] <= 0 || dilations[a] <= 0 || pads[a] < 0 || pads[a+r] < 0 {
			c.fail("axis %d: image extent %d, block %d, stride %d, dilation %d, pads %d and %d must be positive (pads nonnegative)",
				a, image[a], block[a], strides[a], dilations[a], pads[a], pads[a+r])
		}
		kernel *= block[a]
		span := image[a] + pads[a] + pads[a+r] - dilations[a]*(block[a]-1) - 1
		if span < 0 {
			c.fail("axis %d: a block of %d (dilation %d) does not fit the padded image of %d", a, block[a], dilations[a], image[a]+pads[a]+pads[a+r])
		}
		blocks[a] = span/strides[a] + 1
		total *= blocks[a]
	}
	ch := c.extent(x, 1)
	if ch%kernel != 0 {
		c.fail("%d input channels are not a multiple of the block's %d positions", ch, kernel)
	}
	if l := c.extent(x, 2); l != total {
		c.fail("the input has %d blocks; the image, block, strides, dilations and pads give %d", l, total)
	}
	shape := append(append([]int64{0, ch / kernel}, block...), blocks...)
	y := c.call1("reshape", []attr{intsA("shape", shape)}, x)
	perm := []int64{0, 1}
	for a := range r {
		perm = append(perm, int64(2+a), int64(2+r+a))
	}
	y = c.call1("transpose", []attr{intsA("perm", perm)}, y)
	for a := range r {
		y = c.call1("col2im_axis", []attr{intA("axis", int64(2+a)), intA("size", image[a]), intA("stride", strides[a]),
			intA("dilation", dilations[a]), intA("pad", pads[a])}, y)
	}
	c.out(0, y)
}

// convMaxUnpool maps MaxUnpool (opsets 9 on; output_shape known at
// import) to stdlib max_unpool on the flattened input and indices: the
// indices are positions in the shape (in - 1) · stride + kernel - pads
// on each spatial axis; an output_shape larger than that pads it with
// zeros at the end of each axis, as the ONNX reference does. Every
// output position compares with every index: the cost is the product of
// the output's and the input's sizes.
func convMaxUnpool(c *nodeCtx) {
	x, indices := c.must(0), c.must(1)
	r := rank(x) - 2
	if r < 1 {
		c.fail("the input has rank %d; it must be [N, C, *spatial]", rank(x))
	}
	if !slices.Equal(c.dims(x), c.dims(indices)) {
		c.fail("the indices are %s; they must have the input's shape %s", indices.typ.Shape, x.typ.Shape)
	}
	kernel := c.intsAttr("kernel_shape", nil)
	strides := c.intsAttr("strides", slices.Repeat([]int64{1}, r))
	pads := c.intsAttr("pads", make([]int64, 2*r))
	if len(kernel) != r || len(strides) != r || len(pads) != 2*r {
		c.fail("kernel_shape (%d entries, required), strides (%d) and pads (%d) do not fit %d spatial axes", len(kernel), len(strides), len(pads), r)
	}
	inferred := c.dims(x)[:2]
	for a := range r {
		n := (c.extent(x, 2+a)-1)*strides[a] + kernel[a] - pads[a] - pads[a+r]
		if n <= 0 {
			c.fail("spatial axis %d unpools to %d positions", a, n)
		}
		inferred = append(inferred, n)
	}
	flat := func(v *value) *value { return c.call1("reshape", []attr{intsA("shape", []int64{-1})}, v) }
	y := c.call1("max_unpool", []attr{intsA("shape", inferred)}, flat(x), flat(indices))
	shape := c.knownInts(2, "output_shape")
	if shape == nil || slices.Equal(shape, inferred) {
		c.out(0, y)
		return
	}
	if len(shape) != len(inferred) {
		c.fail("output_shape has %d entries for an input of rank %d", len(shape), rank(x))
	}
	grow := make([]int64, 2*len(shape))
	for a, n := range shape {
		if n < inferred[a] {
			c.fail("output_shape %v is smaller than the unpooled shape %v on axis %d", shape, inferred, a)
		}
		grow[len(shape)+a] = n - inferred[a]
	}
	c.out(0, c.call1("pad", []attr{intsA("pads", grow), floatA("value", 0)}, y))
}

// convRoiAlign maps RoiAlign (opsets 10 on; coordinate_transformation_mode
// since 16, output_half_pixel before) to stdlib roi_align. Its sampling
// grid is sampling_ratio samples per bin along each axis; with
// sampling_ratio 0 it depends on each region's extent, so the rois must
// be known at import to bound it.
func convRoiAlign(c *nodeCtx) {
	x, rois, batch := c.must(0), c.must(1), c.must(2)
	if rank(x) != 4 {
		c.fail("the input has rank %d; it must be 4 ([N, C, H, W])", rank(x))
	}
	if !x.typ.DType.IsFloat() || !rois.typ.DType.IsFloat() {
		c.fail("RoiAlign of %s input at %s rois is not supported (floating point only)", x.typ.DType, rois.typ.DType)
	}
	if rank(rois) != 2 || c.extent(rois, 1) != 4 || rank(batch) != 1 {
		c.fail("rois are %s and batch_indices %s; they must be [R, 4] and [R]", rois.typ.Shape, batch.typ.Shape)
	}
	coord := "output_half_pixel"
	if c.opset() >= 16 {
		coord = c.stringAttr("coordinate_transformation_mode", "half_pixel")
	}
	if coord != "half_pixel" && coord != "output_half_pixel" {
		c.fail("coordinate_transformation_mode %q is neither half_pixel nor output_half_pixel", coord)
	}
	mode := c.stringAttr("mode", "avg")
	if mode != "avg" && mode != "max" {
		c.fail("mode %q is neither avg nor max", mode)
	}
	oh, ow := c.intAttr("output_height", 1), c.intAttr("output_width", 1)
	ratio, scale := c.intAttr("sampling_ratio", 0), c.floatAttr("spatial_scale", 1)
	if oh <= 0 || ow <= 0 || ratio < 0 {
		c.fail("output_height %d and output_width %d must be positive, sampling_ratio %d nonnegative", oh, ow, ratio)
	}
	gh, gw := ratio, ratio
	if ratio == 0 {
		if rois.konst == nil {
			c.fail("sampling_ratio 0 (a sampling grid from each region's extent) needs the rois known at import; give sampling_ratio > 0 or constant rois")
		}
		gh, gw = roiGrid(rois.konst, scale, coord == "half_pixel", oh, ow)
	}
	c.out(0, c.call1("roi_align", []attr{intA("OH", oh), intA("OW", ow), intA("grid_h", gh), intA("grid_w", gw),
		intA("sampling_ratio", ratio), floatA("spatial_scale", scale), boolA("half_pixel", coord == "half_pixel"), stringA("mode", mode)},
		x, rois, batch))
}

// roiGrid is the largest sampling grid of known rois [R, 4] with
// sampling_ratio 0: ceil(extent / bins) along each axis, at least 1.
func roiGrid(rois *tensor.Tensor, scale float64, half bool, oh, ow int64) (gh, gw int64) {
	gh, gw = 1, 1
	off := 0.0
	if half {
		off = 0.5
	}
	for r := range rois.Shape[0] {
		h := (rois.At(r, 3)*scale - off) - (rois.At(r, 1)*scale - off)
		w := (rois.At(r, 2)*scale - off) - (rois.At(r, 0)*scale - off)
		if !half {
			h, w = max(h, 1), max(w, 1)
		}
		gh = max(gh, int64(math.Ceil(h/float64(oh))))
		gw = max(gw, int64(math.Ceil(w/float64(ow))))
	}
	return gh, gw
}

// convDeformConv maps DeformConv (opset 19) in 2-D to stdlib
// deform_conv2d (a missing mask is ones), then bias_add.
func convDeformConv(c *nodeCtx) {
	x, w, offset := c.must(0), c.must(1), c.must(2)
	if rank(x) != 4 || rank(w) != 4 || rank(offset) != 4 {
		c.fail("DeformConv over %d spatial axes is not supported (2 is)", rank(x)-2)
	}
	if !x.typ.DType.IsFloat() || !offset.typ.DType.IsFloat() {
		c.fail("DeformConv of %s input at %s offsets is not supported (floating point only)", x.typ.DType, offset.typ.DType)
	}
	kh, kw := c.extent(w, 2), c.extent(w, 3)
	if k := c.intsAttr("kernel_shape", nil); k != nil && !slices.Equal(k, []int64{kh, kw}) {
		c.fail("kernel_shape %v differs from the weights' %v", k, []int64{kh, kw})
	}
	strides := c.intsAttr("strides", []int64{1, 1})
	dilations := c.intsAttr("dilations", []int64{1, 1})
	pads := c.intsAttr("pads", []int64{0, 0, 0, 0})
	if len(strides) != 2 || len(dilations) != 2 || len(pads) != 4 {
		c.fail("%d strides, %d dilations and %d pads for 2 spatial axes", len(strides), len(dilations), len(pads))
	}
	if min(strides[0], strides[1], dilations[0], dilations[1]) <= 0 || min(pads[0], pads[1], pads[2], pads[3]) < 0 {
		c.fail("strides %v and dilations %v must be positive, pads %v nonnegative", strides, dilations, pads)
	}
	group, og := c.intAttr("group", 1), c.intAttr("offset_group", 1)
	ch, o := c.extent(x, 1), c.extent(w, 0)
	if group <= 0 || og <= 0 || ch%group != 0 || o%group != 0 || ch%og != 0 || c.extent(w, 1) != ch/group {
		c.fail("group %d and offset_group %d do not divide %d input and %d output channels (weights %s)", group, og, ch, o, w.typ.Shape)
	}
	oh, ow := c.extent(offset, 2), c.extent(offset, 3)
	for a, n := range []int64{oh, ow} {
		in := c.extent(x, 2+a)
		if want := (in+pads[a]+pads[a+2]-dilations[a]*([]int64{kh, kw}[a]-1)-1)/strides[a] + 1; n != want {
			c.fail("the offset's extent %d on spatial axis %d is not the convolution's %d", n, a, want)
		}
	}
	if n := c.extent(offset, 1); n != og*kh*kw*2 {
		c.fail("the offset has %d channels; offset_group %d and a %dx%d kernel need %d", n, og, kh, kw, og*kh*kw*2)
	}
	mask := c.in(4)
	if mask == nil {
		ones := tensor.New(x.typ.DType, []int{int(c.extent(x, 0)), int(og * kh * kw), int(oh), int(ow)})
		for i := range ones.Len() {
			ones.SetFlat(i, 1)
		}
		mask = constValue("", ones, false)
	} else if !slices.Equal(c.dims(mask), []int64{c.extent(x, 0), og * kh * kw, oh, ow}) {
		c.fail("the mask is %s; it must be [N, %d, %d, %d]", mask.typ.Shape, og*kh*kw, oh, ow)
	}
	y := c.call1("deform_conv2d", []attr{intsA("strides", strides), intsA("pads", pads), intsA("dilations", dilations),
		intA("group", group), intA("offset_group", og)}, x, w, offset, mask)
	if b := c.in(3); b != nil {
		y = c.call1("bias_add", []attr{intA("axis", 1)}, y, b)
	}
	c.out(0, y)
}
