package stdlib_test

import (
	"math"
	"math/cmplx"

	"tofuc/lang"
	"tofuc/runtime/tensor"
)

// Interpreter cases for stdlib/signal.tdl against the DFT's sum written
// out in Go's complex128.

// dftGo is stdlib dft's definition on x [*A, N, *B, C] along axis.
func dftGo(x *tensor.Tensor, axis, length int, inverse, onesided bool) *tensor.Tensor {
	r := len(x.Shape)
	n, ch := x.Shape[axis], x.Shape[r-1]
	k := length
	if onesided {
		k = length/2 + 1
	}
	shape := append([]int(nil), x.Shape...)
	shape[axis], shape[r-1] = k, 2
	out := tensor.New(x.DType, shape)
	sign, scale := -1.0, 1.0
	if inverse {
		sign, scale = 1, 1/float64(length)
	}
	for flat := range out.Len() {
		idx := ewUnflat(flat, shape)
		if idx[r-1] == 1 {
			continue // filled with the real part
		}
		var s complex128
		for t := 0; t < min(n, length); t++ {
			in := append([]int(nil), idx...)
			in[axis], in[r-1] = t, 0
			v := complex(x.At(in...), 0)
			if ch == 2 {
				in[r-1] = 1
				v += complex(0, x.At(in...))
			}
			s += v * cmplx.Exp(complex(0, sign*2*math.Pi*float64(idx[axis]*t)/float64(length)))
		}
		s *= complex(scale, 0)
		out.SetFlat(flat, real(s))
		out.SetFlat(flat+1, imag(s))
	}
	return out
}

func init() {
	real := randn(41, 2, 7, 1)
	cplx := randn(42, 3, 6, 2, 2)
	wide := tensor.FromFloats(lang.F64, []int{5, 2}, []float64{1, 0, 2, -1, 0.5, 3, -2, 0, 4, 1})
	type dc struct {
		name              string
		x                 *tensor.Tensor
		axis, length      int
		inverse, onesided bool
	}
	for _, c := range []dc{
		{"real [2,7,1] axis 1", real, 1, 7, false, false},
		{"real onesided", real, 1, 7, false, true},
		{"real padded to 10, onesided", real, 1, 10, false, true},
		{"real cut to 4", real, 1, 4, false, false},
		{"complex [3,6,2,2] axis 1 inverse", cplx, 1, 6, true, false},
		{"complex axis 0", cplx, 0, 3, false, false},
		{"complex axis 2, padded to 5, inverse", cplx, 2, 5, true, false},
		{"f64 [5,2] axis 0, length 8", wide, 0, 8, false, false},
	} {
		attrs := spA("axis", aInt(int64(c.axis)), "length", aInt(int64(c.length)), "inverse", aInt(b2i(c.inverse)), "onesided", aInt(b2i(c.onesided)))
		want := dftGo(c.x, c.axis, c.length, c.inverse, c.onesided)
		register(opCase{op: "dft", name: c.name, attrs: attrs, inputs: []*tensor.Tensor{c.x}, tol: 1e-5, want: spConst(want)})
	}
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
