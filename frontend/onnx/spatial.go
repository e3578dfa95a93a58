package onnx

// Spatial and sampling operators: DepthToSpace, SpaceToDepth, GridSample,
// AffineGrid, Col2Im, CenterCropPad, MaxUnpool, RoiAlign.

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
