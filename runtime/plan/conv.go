package plan

import (
	"fmt"
	"math"
	"slices"
)

// ConvCall is a library's direct convolution in single precision,
// ONNX's Conv without a bias, on dense row-major tensors: for every n, o
// and output position p,
//
//	Y[n, o, p] = Σ_{c, k} X[n, g·C/Group + c, p·Strides + k·Dilations − PadsBegin] · W[o, c, k]
//
// with g = o / (O/Group), c below C/Group, k over the kernel's extents,
// and X read as 0 outside its spatial extents. X is [N, C, *In], W
// [O, C/Group, *Kernel] and Y [N, O, *Out], each dense from its
// offset. One to three spatial dimensions.
type ConvCall struct {
	Backend   string  `json:"backend"`
	N         int64   `json:"n"`
	C         int64   `json:"c"`
	O         int64   `json:"o"`
	Group     int64   `json:"group"`
	In        []int64 `json:"in"`
	Kernel    []int64 `json:"kernel"`
	Out       []int64 `json:"out"`
	Strides   []int64 `json:"strides"`
	Dilations []int64 `json:"dilations"`
	PadsBegin []int64 `json:"pads_begin"`
	PadsEnd   []int64 `json:"pads_end"`
	X         Dense   `json:"x"`
	W         Dense   `json:"w"`
	Y         Dense   `json:"y"`
	// Post, when not nil, is what the call adds to each sum before
	// writing Y: its bias is along the output channels.
	Post *PostOps `json:"post,omitempty"`
}

// PostOps is what a library's call adds to each of its sums before it
// writes its result, in the same pass (oneDNN's bias and post-ops): the
// bias, when Bias is not nil, then each activation in order. A library
// step with them computes a kernel's whole output, with no epilogue
// kernel after it.
type PostOps struct {
	Bias *Dense       `json:"bias,omitempty"`
	Acts []Activation `json:"acts,omitempty"`
}

// Activation is an element-wise bound a post-op applies: "max", x ↦
// max(x, Value) (a ReLU at 0), or "min", x ↦ min(x, Value); a clip is
// the two.
type Activation struct {
	Kind  string  `json:"kind"`
	Value float64 `json:"value"`
}

// Activation kinds.
const (
	ActMax = "max"
	ActMin = "min"
)

// check checks the post-ops' activations.
func (p *PostOps) check() error {
	for i, a := range p.Acts {
		if a.Kind != ActMax && a.Kind != ActMin {
			return fmt.Errorf("post.acts[%d]: kind %q is neither %q nor %q", i, a.Kind, ActMax, ActMin)
		}
		if math.IsNaN(a.Value) || math.IsInf(a.Value, 0) || math.Abs(a.Value) > math.MaxFloat32 {
			return fmt.Errorf("post.acts[%d]: value %g is not a finite f32", i, a.Value)
		}
	}
	return nil
}

// Dense is where a dense row-major operand of a library call starts:
// its buffer and the offset there, in elements.
type Dense struct {
	Buffer int   `json:"buffer"`
	Offset int64 `json:"offset"`
}

// ConvOutExtent is a convolution's output extent along a spatial
// dimension of extent in, with ONNX's floor rounding; it is below 1 when
// the kernel does not fit.
func ConvOutExtent(in, kernel, stride, dilation, padBegin, padEnd int64) int64 {
	span := in + padBegin + padEnd - dilation*(kernel-1) - 1
	if span < 0 {
		return 0
	}
	return span/stride + 1
}

// RunsOnCUDNN reports whether cuDNN's convolution, which pads both ends
// of a dimension alike, computes the call with PadsBegin at both ends:
// each output extent the same (a shorter end pad is one the last window
// never reads), and every tensor's elements counted by a C int (its
// descriptors' strides).
func (c *ConvCall) RunsOnCUDNN() bool {
	for _, o := range c.operands() {
		if n, err := Cells(o.shape); err != nil || n > math.MaxInt32 {
			return false
		}
	}
	for d, out := range c.Out {
		if ConvOutExtent(c.In[d], c.Kernel[d], c.Strides[d], c.Dilations[d], c.PadsBegin[d], c.PadsBegin[d]) != out {
			return false
		}
	}
	return true
}

// Shapes are the shapes of X, W and Y.
func (c *ConvCall) Shapes() (x, w, y []int64) {
	x = append([]int64{c.N, c.C}, c.In...)
	w = append([]int64{c.O, c.C / max(c.Group, 1)}, c.Kernel...)
	y = append([]int64{c.N, c.O}, c.Out...)
	return x, w, y
}

// Check checks a call apart from its buffers: a library, one to three
// spatial dimensions, extents from 1 within a C int, groups dividing the
// channels, strides and dilations from 1, pads from 0, and each output
// extent the one its input, kernel, stride, dilation and pads give.
func (c *ConvCall) Check() error {
	if c.Backend == "" || c.Backend == Generated {
		return fmt.Errorf("conv.backend %q names no library", c.Backend)
	}
	s := len(c.In)
	if s < 1 || s > 3 {
		return fmt.Errorf("conv: %d spatial dimensions, not 1 to 3", s)
	}
	for name, l := range map[string][]int64{"kernel": c.Kernel, "out": c.Out, "strides": c.Strides, "dilations": c.Dilations, "pads_begin": c.PadsBegin, "pads_end": c.PadsEnd} {
		if len(l) != s {
			return fmt.Errorf("conv.%s has %d entries for %d spatial dimensions", name, len(l), s)
		}
	}
	ones := slices.Concat([]int64{c.N, c.C, c.O, c.Group}, c.In, c.Kernel, c.Out, c.Strides, c.Dilations)
	zeros := slices.Concat(c.PadsBegin, c.PadsEnd, []int64{c.X.Offset, c.W.Offset, c.Y.Offset})
	for _, l := range []struct {
		vals []int64
		min  int64
	}{{ones, 1}, {zeros, 0}} {
		for _, v := range l.vals {
			if v < l.min || v > maxBLASDim {
				return fmt.Errorf("conv: extent, stride, pad or offset %d out of [%d, %d]", v, l.min, maxBLASDim)
			}
		}
	}
	if c.C%c.Group != 0 || c.O%c.Group != 0 {
		return fmt.Errorf("conv: %d groups do not divide %d input and %d output channels", c.Group, c.C, c.O)
	}
	for i := range s {
		if want := ConvOutExtent(c.In[i], c.Kernel[i], c.Strides[i], c.Dilations[i], c.PadsBegin[i], c.PadsEnd[i]); c.Out[i] != want {
			return fmt.Errorf("conv: output extent %d of spatial dimension %d, want %d", c.Out[i], i, want)
		}
	}
	x, w, y := c.Shapes()
	for _, shape := range [][]int64{x, w, y} {
		if _, err := Cells(shape); err != nil {
			return fmt.Errorf("conv: %w", err)
		}
	}
	if c.Post != nil {
		if IsGPUBackend(c.Backend) {
			return fmt.Errorf("conv.post: %s runs no post-ops (a host library's call does)", c.Backend)
		}
		if b := c.Post.Bias; b != nil && (b.Offset < 0 || b.Offset > maxBLASDim) {
			return fmt.Errorf("conv.post.bias: offset %d out of [0, %d]", b.Offset, maxBLASDim)
		}
		return c.Post.check()
	}
	return nil
}

// convOperand is a tensor of a ConvCall: its name, place and shape.
type convOperand struct {
	name  string
	at    Dense
	shape []int64
}

// operands are the call's tensors: x, w, y and the bias if any.
func (c *ConvCall) operands() []convOperand {
	x, w, y := c.Shapes()
	out := []convOperand{{"x", c.X, x}, {"w", c.W, w}, {"y", c.Y, y}}
	if c.Post != nil && c.Post.Bias != nil {
		out = append(out, convOperand{"post.bias", *c.Post.Bias, []int64{c.O}})
	}
	return out
}

// checkConv checks a checked call's tensors: each in an f32 buffer of
// device d that holds all its elements.
func (p *Plan) checkConv(d int, c *ConvCall) error {
	for _, o := range c.operands() {
		b, err := p.f32Buffer(d, o.at.Buffer)
		if err != nil {
			return fmt.Errorf("conv.%s: %w", o.name, err)
		}
		need, _ := Cells(o.shape)
		if have, err := Cells(b.Shape); err != nil || o.at.Offset+need > have {
			return fmt.Errorf("conv.%s: reaches element %d of buffer %d (%s, shape %v)", o.name, o.at.Offset+need-1, o.at.Buffer, b.Name, b.Shape)
		}
	}
	return nil
}

// FLOPs are the call's multiplications and additions.
func (c *ConvCall) FLOPs() int64 {
	_, w, y := c.Shapes()
	ny, _ := Cells(y)
	nw, _ := Cells(w[1:])
	return 2 * ny * nw
}

// Bytes are the bytes of its operands.
func (c *ConvCall) Bytes() int64 {
	var n int64
	for _, o := range c.operands() {
		cells, _ := Cells(o.shape)
		n += 4 * cells
	}
	return n
}
