package kernel

import (
	"slices"

	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/runtime/plan"
)

// Conv is a kernel's sum as a convolution in its argument buffers (a
// library's call): plan.ConvCall's definition, X and W the arguments it
// reads, Y the kernel's output layout.
type Conv struct {
	X, W int // argument indices
	Call plan.ConvCall
}

// maxChannelChecks bounds the (output channel, input channel) pairs at
// which Convolution evaluates a grouped read's channel index.
const maxChannelChecks = 1 << 22

// Convolution describes k's only reduction as a convolution when it is
// one: an f32 sum over (c, *k) of x[n, ch(o, c), *(p·stride + k·dilation
// − pad)], read as 0 outside x's spatial extents, times w[o, c, *k],
// where n, o and p are the output's variables in order, x and w are f32
// arguments and ch is the channel of a grouped convolution (checked at
// every o and c). Kernels with chained, packed or opaque parts are none.
func (k *Kernel) Convolution() (*Conv, bool) {
	spatial := len(k.Vars) - 2
	if spatial < 1 || spatial > 3 || len(k.Reductions) != 1 || k.PackOnly || k.GPUOnly || k.Before != nil || k.Rows != nil || len(k.Opaques) > 0 {
		return nil, false
	}
	if g := k.GEMM; g != nil && (g.PackedA != nil || g.SharedB != nil) {
		return nil, false
	}
	r := k.Reductions[0]
	m := ir.Product(r)
	if r.Kind != ir.Sum || r.T != lang.F32 || m == nil {
		return nil, false
	}
	for _, f := range [][2]ir.Expr{{m.L, m.R}, {m.R, m.L}} {
		if c, ok := k.convolution(r, f[0], f[1]); ok {
			return c, true
		}
	}
	return nil, false
}

// convolution is Convolution with x and w the factors read as the
// image and the weights.
func (k *Kernel) convolution(r *ir.Reduce, x, w ir.Expr) (*Conv, bool) {
	xa, xArg, ok := k.convRead(x, true)
	if !ok {
		return nil, false
	}
	wa, wArg, ok := k.convRead(w, false)
	if !ok {
		return nil, false
	}
	xs, ws := k.Args[xArg].Shape, k.Args[wArg].Shape
	if len(xs) != len(k.Vars) || len(ws) != len(k.Vars) || ws[0] != k.Shape[1] || xs[0] != k.Shape[0] {
		return nil, false
	}
	c := &Conv{X: xArg, W: wArg, Call: plan.ConvCall{N: xs[0], C: xs[1], O: ws[0], In: xs[2:], Kernel: ws[2:], Out: k.Shape[2:]}}
	if ws[1] < 1 || c.Call.C%ws[1] != 0 {
		return nil, false
	}
	c.Call.Group = c.Call.C / ws[1]
	// w[o, c, *k]: the sum's variables, each read once, of w's extents.
	sumVar := make([]*ir.Var, len(ws)) // the variable of w's dimension d, from 1
	seen := map[*ir.Var]bool{}
	for d, idx := range wa.Index {
		af, ok := ir.AffineOf(idx, nil)
		if !ok {
			return nil, false
		}
		v, ok := singleVar(af, ws[d])
		switch {
		case !ok:
			return nil, false
		case d == 0:
			if v != k.Vars[1] {
				return nil, false
			}
		case v != nil:
			if seen[v] || !slices.Contains(r.Vars, v) {
				return nil, false
			}
			seen[v], sumVar[d] = true, v
		}
	}
	for _, v := range r.Vars {
		if extent(v) != 1 && !seen[v] {
			return nil, false
		}
	}
	if !k.imageIndex(c, xa, sumVar) {
		return nil, false
	}
	call := c.Call
	call.Backend = "any" // checked apart from the library, not yet chosen
	if call.Check() != nil || !groupedChannel(c, xa.Index[1], k.Vars[1], sumVar[1]) {
		return nil, false
	}
	return c, true
}

// imageIndex reads the batch and spatial dimensions of x's read: the
// batch is the output's first variable; each spatial index is p·stride
// + k·dilation − pad for output variable p and the sum variable k of w's
// matching dimension. It sets the call's strides, dilations and pads.
func (k *Kernel) imageIndex(c *Conv, xa *ir.Access, sumVar []*ir.Var) bool {
	batch, ok := ir.AffineOf(xa.Index[0], nil)
	if v, single := singleVar(batch, c.Call.N); !ok || !single || v != k.Vars[0] && !(v == nil && c.Call.N == 1) {
		return false
	}
	for d := range c.Call.In {
		af, ok := ir.AffineOf(xa.Index[2+d], nil)
		konst, numeric := af.Const.IsConst()
		if !ok || !numeric || konst > 0 {
			return false
		}
		stride, dilation := int64(1), int64(1)
		for _, t := range af.Terms {
			switch {
			case t.Var == k.Vars[2+d] && t.Coef > 0:
				stride = t.Coef
			case t.Var == sumVar[2+d] && t.Coef > 0:
				dilation = t.Coef
			default:
				return false
			}
		}
		in, kern, out, begin := c.Call.In[d], c.Call.Kernel[d], c.Call.Out[d], -konst
		if out > 1 && af.Coef(k.Vars[2+d]) == 0 || kern > 1 && af.Coef(sumVar[2+d]) == 0 {
			return false // a stride or dilation of 0: every output reads alike, or every tap
		}
		end := max(0, (out-1)*stride+dilation*(kern-1)+1-in-begin)
		if plan.ConvOutExtent(in, kern, stride, dilation, begin, end) != out {
			return false
		}
		c.Call.Strides, c.Call.Dilations = append(c.Call.Strides, stride), append(c.Call.Dilations, dilation)
		c.Call.PadsBegin, c.Call.PadsEnd = append(c.Call.PadsBegin, begin), append(c.Call.PadsEnd, end)
	}
	return true
}

// groupedChannel reports whether index ch, x's channel, is (o / (O /
// Group))·(C / Group) + c at every output channel o and sum variable c
// (nil when C / Group is one): evaluated, since a group's division is no
// affine index.
func groupedChannel(c *Conv, ch ir.Expr, o, cv *ir.Var) bool {
	cg, og := c.Call.C/c.Call.Group, c.Call.O/c.Call.Group
	if c.Call.O%c.Call.Group != 0 || c.Call.O*cg > maxChannelChecks {
		return false
	}
	if af, ok := ir.AffineOf(ch, nil); ok && c.Call.Group == 1 {
		v, single := singleVar(af, cg) // an ungrouped channel: c itself
		return single && v == cv
	}
	at := map[*ir.Var]int64{}
	for oi := range c.Call.O {
		for ci := range cg {
			at[o] = oi
			if cv != nil {
				at[cv] = ci
			}
			if v, ok := intAt(ch, at); !ok || v != (oi/og)*cg+ci {
				return false
			}
		}
	}
	return true
}

// convRead is a factor that reads an f32 argument directly: the image
// x (image: its channel and spatial dimensions may be checked, read as
// 0 outside) or the weights (never checked).
func (k *Kernel) convRead(factor ir.Expr, image bool) (*ir.Access, int, bool) {
	a, ok := factor.(*ir.Access)
	if !ok || a.T.DType != lang.F32 {
		return nil, 0, false
	}
	src, found := k.Source(a.T)
	checked, analysed := k.checked[a]
	if !found || !analysed || src.Arg < 0 {
		return nil, 0, false
	}
	for d, ch := range checked {
		// A grouped image's channel may be checked: groupedChannel
		// evaluates it, in range, everywhere it is read. A spatial
		// index read out of range must read 0 (a padding), not fail.
		if ch && (!image || d == 0 || d >= 2 && a.Default == nil) {
			return nil, 0, false
		}
	}
	if a.Default != nil {
		z, isConst := a.Default.(*ir.Const)
		if !image || !isConst || z.Float != 0 || z.Int != 0 {
			return nil, 0, false
		}
	}
	return a, src.Arg, true
}

// singleVar reads an affine index of a dimension of extent n as one
// variable of coefficient 1 and extent n, or as the constant 0 where n
// is 1 (nil).
func singleVar(af ir.Affine, n int64) (*ir.Var, bool) {
	konst, numeric := af.Const.IsConst()
	if !numeric || konst != 0 {
		return nil, false
	}
	switch {
	case len(af.Terms) == 0:
		return nil, n == 1
	case len(af.Terms) == 1 && af.Terms[0].Coef == 1 && extent(af.Terms[0].Var) == n:
		return af.Terms[0].Var, true
	}
	return nil, false
}

// intAt evaluates integer index e with its variables at the values of
// at, as TDL computes (division and remainder truncating); ok is false
// where e holds anything else.
func intAt(e ir.Expr, at map[*ir.Var]int64) (int64, bool) {
	switch e := e.(type) {
	case *ir.Const:
		return e.Int, !e.T.IsFloat()
	case *ir.VarRef:
		v, ok := at[e.V]
		return v, ok
	case *ir.Binary:
		l, okL := intAt(e.L, at)
		r, okR := intAt(e.R, at)
		if !okL || !okR || e.T.IsFloat() {
			return 0, false
		}
		switch e.Op {
		case ir.OpAdd:
			return l + r, true
		case ir.OpSub:
			return l - r, true
		case ir.OpMul:
			return l * r, true
		case ir.OpDiv, ir.OpMod:
			if r == 0 {
				return 0, false
			}
			if e.Op == ir.OpDiv {
				return l / r, true
			}
			return l % r, true
		}
	}
	return 0, false
}
