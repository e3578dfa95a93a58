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

// stftGo is stdlib stft's definition on x [B, L, C] with window w.
func stftGo(x, w *tensor.Tensor, step, length int, onesided bool) *tensor.Tensor {
	b, l, ch, nw := x.Shape[0], x.Shape[1], x.Shape[2], w.Shape[0]
	frames, k := (l-length)/step+1, length
	if onesided {
		k = length/2 + 1
	}
	out := tensor.New(x.DType, []int{b, frames, k, 2})
	for bi := range b {
		for f := range frames {
			for ki := range k {
				var s complex128
				for n := 0; n < min(nw, length); n++ {
					t := f*step + n
					if t >= l {
						continue
					}
					v := complex(x.At(bi, t, 0), 0)
					if ch == 2 {
						v += complex(0, x.At(bi, t, 1))
					}
					s += v * complex(w.At(n), 0) * cmplx.Exp(complex(0, -2*math.Pi*float64(ki*n)/float64(length)))
				}
				out.Set(real(s), bi, f, ki, 0)
				out.Set(imag(s), bi, f, ki, 1)
			}
		}
	}
	return out
}

func init() {
	sig := randn(43, 2, 20, 1)
	csig := randn(44, 1, 12, 2)
	win := randn(45, 8)
	short := randn(46, 5)
	for _, c := range []struct {
		name         string
		x, w         *tensor.Tensor
		step, length int
		onesided     bool
	}{
		{"real, window 8, step 4, onesided", sig, win, 4, 8, true},
		{"real, window 8, step 3, both sides", sig, win, 3, 8, false},
		{"complex, window 5 padded to frames of 6, step 2", csig, short, 2, 6, false},
		{"real, window 8 cut to frames of 6, step 5", sig, win, 5, 6, true},
	} {
		attrs := spA("step", aInt(int64(c.step)), "length", aInt(int64(c.length)), "onesided", aInt(b2i(c.onesided)))
		register(opCase{op: "stft", name: c.name, attrs: attrs, inputs: []*tensor.Tensor{c.x, c.w}, tol: 1e-5, want: spConst(stftGo(c.x, c.w, c.step, c.length, c.onesided))})
	}
}

// melGo fills the triangles of stdlib mel_weight_matrix as the ONNX
// reference's loops do.
func melGo(bins []int64, k int) *tensor.Tensor {
	m := len(bins) - 2
	out := tensor.New(lang.F64, []int{k, m})
	for i := range m {
		l, c, h := int(bins[i]), int(bins[i+1]), int(bins[i+2])
		if c == l {
			out.Set(1, c, i)
		} else {
			for j := l; j <= c; j++ {
				out.Set(float64(j-l)/float64(c-l), j, i)
			}
		}
		for j := c; j < h; j++ {
			out.Set(float64(h-j)/float64(h-c), j, i)
		}
	}
	return out
}

func init() {
	for _, c := range []struct {
		name string
		bins []int64
		k    int
	}{
		{"rising edges, 5 mels over 9 bins", []int64{0, 1, 3, 4, 4, 6, 8}, 9},
		{"equal edges", []int64{2, 2, 2, 5}, 6},
	} {
		register(opCase{op: "mel_weight_matrix", name: c.name, attrs: spA("K", aInt(int64(c.k))),
			inputs: []*tensor.Tensor{ints([]int{len(c.bins)}, c.bins...)}, want: spConst(melGo(c.bins, c.k))})
	}
}
