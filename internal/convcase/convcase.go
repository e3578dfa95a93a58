// Package convcase makes random convolution calls and checks a
// library's results against their definition in float64: the tests of
// every library backend's convolution (runtime/hostlib's oneDNN,
// runtime/cuda's cuDNN) use it.
package convcase

import (
	"fmt"
	"math"
	"math/rand/v2"

	"tofuc/runtime/plan"
	"tofuc/runtime/tensor"
)

// Case is a call and its operands' buffers (X, W, Y from their
// offsets, with a few elements beyond), filled with random values.
type Case struct {
	Call *plan.ConvCall
	Bufs [3][]float32
	// Bias is the post-ops' bias's buffer, where the call has one.
	Bias []float32
}

// postActs are the activations WithPost draws from: ReLU, ReLU6, clips
// of either bound and of both.
var postActs = [][]plan.Activation{
	nil,
	{{Kind: plan.ActMax, Value: 0}},
	{{Kind: plan.ActMax, Value: 0}, {Kind: plan.ActMin, Value: 6}},
	{{Kind: plan.ActMax, Value: -0.5}},
	{{Kind: plan.ActMin, Value: 0.3}},
	{{Kind: plan.ActMin, Value: 1}, {Kind: plan.ActMax, Value: 0.1}},
}

// WithPost gives tc's call post-ops: a bias at a random offset in a
// buffer of its own (every other trial) and activations from postActs.
func WithPost(r *rand.Rand, tc Case, trial int) Case {
	c := *tc.Call
	c.Post = &plan.PostOps{Acts: postActs[r.IntN(len(postActs))]}
	if trial%2 == 0 || len(c.Post.Acts) == 0 {
		c.Post.Bias = &plan.Dense{Offset: r.Int64N(3)}
		tc.Bias = make([]float32, c.Post.Bias.Offset+c.O+int64(r.IntN(2)))
		for i := range tc.Bias {
			tc.Bias[i] = float32(r.NormFloat64())
		}
	}
	tc.Call = &c
	return tc
}

// Random is a random valid convolution of backend, in one to three
// spatial dimensions, its buffers filled; every fourth trial is
// depthwise. With symmetric, each dimension's pads are equal at both
// ends.
func Random(r *rand.Rand, backend string, trial int, symmetric bool) Case {
	s := 1 + r.IntN(3)
	group := 1 + r.Int64N(3)
	c := &plan.ConvCall{Backend: backend, N: 1 + r.Int64N(2), Group: group}
	c.C, c.O = group*(1+r.Int64N(5)), group*(1+r.Int64N(5))
	if trial%4 == 0 {
		c.Group = 8 + r.Int64N(9)
		c.C, c.O = c.Group, c.Group*(1+r.Int64N(2))
	}
	for range s {
		k, stride, dil := 1+r.Int64N(5), 1+r.Int64N(3), 1+r.Int64N(2)
		pb, pe := r.Int64N(k), r.Int64N(k)
		if symmetric {
			pe = pb
		}
		in := (k-1)*dil + 1 + r.Int64N(12-int64(4*s)+4) - min(pb+pe, (k-1)*dil)
		c.In, c.Kernel, c.Strides, c.Dilations = append(c.In, in), append(c.Kernel, k), append(c.Strides, stride), append(c.Dilations, dil)
		c.PadsBegin, c.PadsEnd = append(c.PadsBegin, pb), append(c.PadsEnd, pe)
		c.Out = append(c.Out, plan.ConvOutExtent(in, k, stride, dil, pb, pe))
	}
	c.X.Offset, c.W.Offset, c.Y.Offset = r.Int64N(4), r.Int64N(4), r.Int64N(4)
	tc := Case{Call: c}
	xs, ws, ys := c.Shapes()
	for i, at := range []plan.Dense{c.X, c.W, c.Y} {
		n, _ := plan.Cells([][]int64{xs, ws, ys}[i])
		tc.Bufs[i] = make([]float32, at.Offset+n+int64(r.IntN(3)))
		for j := range tc.Bufs[i] {
			tc.Bufs[i][j] = float32(r.NormFloat64())
		}
	}
	return tc
}

// Check compares out, Y's buffer after the call, with the call's
// definition over the case's X and W: each result within f32's error
// bound for its sum, every element outside the result as it was.
func (tc Case) Check(out []float32) error {
	c := tc.Call
	want, bound := reference(c, tc.Bufs[0][c.X.Offset:], tc.Bufs[1][c.W.Offset:])
	if c.Post != nil {
		tc.post(want, bound)
	}
	for i, v := range out {
		j := int64(i) - c.Y.Offset
		if j < 0 || j >= int64(len(want)) {
			if v != tc.Bufs[2][i] {
				return fmt.Errorf("element %d of y's buffer, outside the result, changed", i)
			}
			continue
		}
		if math.Abs(float64(v)-want[j]) > bound[j] {
			return fmt.Errorf("%+v: y[%d] = %g, want %g (bound %g)", c, j, v, want[j], bound[j])
		}
	}
	return nil
}

// post applies the call's post-ops to its sums want, widening their
// bounds by the bias's addition (an activation, 1-Lipschitz, widens
// none).
func (tc Case) post(want, bound []float64) {
	c := tc.Call
	perChannel := int64(len(want)) / (c.N * c.O)
	for i := range want {
		if b := c.Post.Bias; b != nil {
			bias := float64(tc.Bias[b.Offset+int64(i)/perChannel%c.O])
			want[i] += bias
			bound[i] += 0x1p-23 * (math.Abs(want[i]) + math.Abs(bias))
		}
		for _, a := range c.Post.Acts {
			if a.Kind == plan.ActMax {
				want[i] = math.Max(want[i], a.Value)
			} else {
				want[i] = math.Min(want[i], a.Value)
			}
		}
	}
}

// reference is the call's result by its definition (plan.ConvCall) in
// float64, and each element's error bound in f32.
func reference(c *plan.ConvCall, x, w []float32) (out, bound []float64) {
	xs, ws, ys := c.Shapes()
	cg, og := c.C/c.Group, c.O/c.Group
	terms := cg
	for _, k := range c.Kernel {
		terms *= k
	}
	at := func(shape, idx []int64) int64 {
		off := int64(0)
		for d, i := range idx {
			off = off*shape[d] + i
		}
		return off
	}
	forEach(ys, func(yi []int64) {
		n, o, pos := yi[0], yi[1], yi[2:]
		sum, abs := 0.0, 0.0
		forEach(ws[1:], func(wi []int64) {
			ch, k := wi[0], wi[1:]
			xi := []int64{n, (o/og)*cg + ch}
			for d := range pos {
				p := pos[d]*c.Strides[d] + k[d]*c.Dilations[d] - c.PadsBegin[d]
				if p < 0 || p >= c.In[d] {
					return
				}
				xi = append(xi, p)
			}
			term := float64(x[at(xs, xi)]) * float64(w[at(ws, append([]int64{o}, wi...))])
			sum, abs = sum+term, abs+math.Abs(term)
		})
		out = append(out, sum)
		bound = append(bound, 2*float64(terms+1)*0x1p-24*abs+1e-30)
	})
	return out, bound
}

// forEach calls f with every index of shape, row-major
// (tensor.ForEachIndex in int64).
func forEach(shape []int64, f func(idx []int64)) {
	dims := make([]int, len(shape))
	for d, n := range shape {
		dims[d] = int(n)
	}
	idx := make([]int64, len(shape))
	tensor.ForEachIndex(dims, func(_ int, at []int) {
		for d, v := range at {
			idx[d] = int64(v)
		}
		f(idx)
	})
}
