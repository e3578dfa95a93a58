package codegen_test

import "testing"

// TestInteriorRuns: host kernels whose reads are checked (a pool's or a
// local response normalisation's window, a pad) skip the checks in the
// interior of each run of their innermost index, where every read of
// the window is in range, and keep them at the borders; strides 1 and
// 2, windows at the edge of odd sizes, a window along another dimension
// (lrn's channels), a pad on both sides and a max in f32 all give the
// interpreter's results.
func TestInteriorRuns(t *testing.T) {
	tl := tools(t)
	compileMatching(t, tl, "windows", `model m(x: f32[2, 7, 17, 23]) {
    a = max_pool2d<kernel_shape = [3, 3], pads = [1, 1, 1, 1]>(x)
    b = max_pool2d<kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1]>(x)
    c = avg_pool2d<kernel_shape = [3, 2], strides = [1, 2], pads = [1, 0, 1, 1]>(x)
    d = lrn<size = 3>(x)
    e = pad<pads = [0, 0, 2, 3, 0, 0, 1, 2]>(x)
    f = max_pool2d<kernel_shape = [2, 5], pads = [0, 4, 1, 4]>(x)
    return a, b, c, d, e, f
}`, 16)
}
