package onnx

import (
	"math"

	"tofuc/lang"
	"tofuc/runtime/tensor"
)

// convWindow maps HannWindow, HammingWindow and BlackmanWindow (size
// known at import) to the stdlib window in f64, cast to output_datatype.
func convWindow(op string) func(*nodeCtx) {
	return func(c *nodeCtx) {
		size := c.knownInts(0, "size")
		if len(size) != 1 || size[0] < 0 {
			c.fail("size must be one non-negative integer, found %v", size)
		}
		dt, err := DType(int32(c.intAttr("output_datatype", 1)))
		if err != nil {
			c.fail("%v", err)
		}
		periodic := c.intAttr("periodic", 1)
		if periodic != 0 && periodic != 1 {
			c.fail("periodic = %d (0 or 1)", periodic)
		}
		w := c.call1(op, []attr{intA("n", size[0]), intA("periodic", periodic)})
		c.out(0, c.cast(w, dt))
	}
}

// convDFT maps DFT to stdlib dft: the axis is the attribute before
// opset 20 (default 1) and input 2 since (default -2), counted in the
// input's rank (its last axis, real or complex, excluded); dft_length,
// input 1, must be known at import, as must the axis's extent.
func convDFT(c *nodeCtx) {
	x := c.must(0)
	r := rank(x)
	if r < 2 {
		c.fail("the input must be [..., N, ..., 1 or 2], found rank %d", r)
	}
	axis := c.intAttr("axis", 1)
	if c.opset() >= 20 {
		axis = -2
		if c.in(2) != nil {
			axis = int64(c.knownFloat(2, "axis", 0))
		}
	}
	if axis < 0 {
		axis += int64(r)
	}
	if axis < 0 || axis > int64(r)-2 {
		c.fail("axis %d is outside the signal axes of a rank-%d input", axis, r)
	}
	if ch := c.extent(x, r-1); ch != 1 && ch != 2 {
		c.fail("the last axis must hold 1 (real) or 2 (complex) values, found %d", ch)
	}
	length := c.extent(x, int(axis))
	if c.in(1) != nil {
		length = int64(c.knownFloat(1, "dft_length", 0))
	}
	if length < 1 {
		c.fail("dft_length = %d (it must be positive)", length)
	}
	inverse, onesided := c.intAttr("inverse", 0), c.intAttr("onesided", 0)
	if inverse != 0 && inverse != 1 || onesided != 0 && onesided != 1 {
		c.fail("inverse = %d, onesided = %d (each 0 or 1)", inverse, onesided)
	}
	c.out(0, c.call1("dft", []attr{intA("axis", axis), intA("length", length), intA("inverse", inverse), intA("onesided", onesided)}, x))
}

// convSTFT maps STFT to stdlib stft: frame_step (input 1) and
// frame_length (input 3, else the window's length, else the signal's)
// known at import; without a window (input 2) the frames are unweighted.
func convSTFT(c *nodeCtx) {
	x := c.must(0)
	if rank(x) != 3 {
		c.fail("the signal must be [batch, length, 1 or 2], found rank %d", rank(x))
	}
	if ch := c.extent(x, 2); ch != 1 && ch != 2 {
		c.fail("the last axis must hold 1 (real) or 2 (complex) values, found %d", ch)
	}
	step := int64(c.knownFloat(1, "frame_step", 0))
	if step < 1 {
		c.fail("frame_step = %d (it must be positive)", step)
	}
	n := c.extent(x, 1)
	length := n
	w := c.in(2)
	if w != nil {
		if rank(w) != 1 {
			c.fail("the window must be 1-D, found rank %d", rank(w))
		}
		length = c.extent(w, 0)
	}
	if c.in(3) != nil {
		length = int64(c.knownFloat(3, "frame_length", 0))
	}
	if length < 1 || length > n {
		c.fail("frame_length = %d must be in [1, %d] (the signal's length)", length, n)
	}
	if w == nil {
		ones := make([]float64, length)
		for i := range ones {
			ones[i] = 1
		}
		w = constValue("", tensor.FromFloats(x.typ.DType, []int{int(length)}, ones), false)
	}
	onesided := c.intAttr("onesided", 1)
	if onesided != 0 && onesided != 1 {
		c.fail("onesided = %d (0 or 1)", onesided)
	}
	c.out(0, c.call1("stft", []attr{intA("step", step), intA("length", length), intA("onesided", onesided)}, x, w))
}

// convMelWeightMatrix maps MelWeightMatrix to stdlib mel_weight_matrix
// over the frequency bin edges, which it computes from its inputs (all
// known at import) as the ONNX reference does, in the dtype of the edge
// frequencies up to the mel steps and in f64 after.
func convMelWeightMatrix(c *nodeCtx) {
	mels := int64(c.knownFloat(0, "num_mel_bins", 0))
	dftLength := int64(c.knownFloat(1, "dft_length", 0))
	rate := c.knownFloat(2, "sample_rate", 0)
	lower, upper := c.knownFloat(3, "lower_edge_hertz", 0), c.knownFloat(4, "upper_edge_hertz", 0)
	if mels < 1 || dftLength < 1 || rate <= 0 {
		c.fail("num_mel_bins = %d, dft_length = %d and sample_rate = %g must be positive", mels, dftLength, rate)
	}
	if lower < 0 || upper < lower {
		c.fail("lower_edge_hertz = %g and upper_edge_hertz = %g must satisfy 0 <= lower <= upper", lower, upper)
	}
	round := func(v float64) float64 { return v }
	if c.must(3).typ.DType == lang.F32 {
		round = func(v float64) float64 { return float64(float32(v)) }
	}
	mel := func(hz float64) float64 { return round(2595 * round(math.Log10(round(1+round(hz/700))))) }
	low := mel(lower)
	step := round((mel(upper) - low) / float64(mels+2))
	k := dftLength/2 + 1
	bins := make([]int64, mels+2)
	for i := range bins {
		hz := 700 * (math.Pow(10, (float64(i)*step+low)/2595) - 1)
		b := pyFloorDiv(float64(dftLength+1)*hz, rate)
		// The reference writes the triangles' points up to the last
		// edge (excluded): every edge must lie among the K bins.
		if b < 0 || b > float64(k) || i <= int(mels) && b >= float64(k) {
			c.fail("frequency bin %d lies at %g, outside the %d spectrogram bins (lower the upper edge below the Nyquist frequency)", i, b, k)
		}
		bins[i] = int64(b)
	}
	dt, err := DType(int32(c.intAttr("output_datatype", 1)))
	if err != nil {
		c.fail("%v", err)
	}
	at := constValue("", tensor.FromInts(lang.I64, []int{len(bins)}, bins), false)
	c.out(0, c.cast(c.call1("mel_weight_matrix", []attr{intA("K", k)}, at), dt))
}

// pyFloorDiv is Python's (and NumPy's) floor division of floats a // b.
func pyFloorDiv(a, b float64) float64 {
	mod := math.Mod(a, b)
	div := (a - mod) / b
	if mod != 0 && (b < 0) != (mod < 0) {
		div--
	}
	if div == 0 {
		return math.Copysign(0, a/b)
	}
	f := math.Floor(div)
	if div-f > 0.5 {
		f++
	}
	return f
}
