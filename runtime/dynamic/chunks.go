package dynamic

import (
	"tofuc/runtime/tensor"
)

// chunk is samples [start, start+count) of a batch, run by the plan of
// size (count ≤ size: the rest padding).
type chunk struct{ start, count, size int64 }

// chunks splits a batch of n samples: the largest size while it fits,
// then the smallest size holding the rest.
func (r *Runner) chunks(n int64) []chunk {
	largest := r.Manifest.Largest()
	var out []chunk
	start := int64(0)
	for ; n-start >= largest; start += largest {
		out = append(out, chunk{start, largest, largest})
	}
	if rest := n - start; rest > 0 {
		for _, s := range r.Manifest.Sizes {
			if s.N >= rest {
				out = append(out, chunk{start, rest, s.N})
				break
			}
		}
	}
	return out
}

// chunkInputs are the inputs of chunk c: each batch input's samples of
// the chunk, padded with copies of its last; the others whole.
func (r *Runner) chunkInputs(inputs map[string]*tensor.Tensor, c chunk) map[string]*tensor.Tensor {
	out := map[string]*tensor.Tensor{}
	for _, a := range r.Manifest.Inputs {
		t := inputs[a.Name]
		if !a.Batched() || c.start == 0 && int64(t.Shape[a.Dim]) == c.size*a.Factor {
			out[a.Name] = t
			continue
		}
		shape := append([]int(nil), t.Shape...)
		shape[a.Dim] = int(c.size * a.Factor)
		part := tensor.New(t.DType, shape)
		for s := range c.size {
			from := c.start + min(s, c.count-1) // padding repeats the last sample
			copyBlock(part, t, a, s, from)
		}
		out[a.Name] = part
	}
	return out
}

// allocate makes the outputs of a whole batch of n samples, shaped as
// a chunk's part.
func (r *Runner) allocate(part map[string]*tensor.Tensor, n int64) map[string]*tensor.Tensor {
	out := map[string]*tensor.Tensor{}
	for _, a := range r.Manifest.Outputs {
		t := part[a.Name]
		if !a.Batched() {
			out[a.Name] = t // the same in every chunk
			continue
		}
		shape := append([]int(nil), t.Shape...)
		shape[a.Dim] = int(n * a.Factor)
		out[a.Name] = tensor.New(t.DType, shape)
	}
	return out
}

// placeOutputs copies the samples of chunk c from its outputs into the
// batch's.
func (r *Runner) placeOutputs(out, part map[string]*tensor.Tensor, c chunk) {
	for _, a := range r.Manifest.Outputs {
		if !a.Batched() {
			continue
		}
		for s := range c.count {
			copyBlock(out[a.Name], part[a.Name], a, c.start+s, s)
		}
	}
}

// copyBlock copies sample from of src into sample to of dst, along the
// batch axis a (a block of a.Factor indices).
func copyBlock(dst, src *tensor.Tensor, a Axis, to, from int64) {
	outer := tensor.NumElements(src.Shape[:a.Dim])
	inner := tensor.NumElements(src.Shape[a.Dim+1:]) * int(a.Factor)
	srcRows, dstRows := src.Shape[a.Dim]/int(a.Factor), dst.Shape[a.Dim]/int(a.Factor)
	for o := range outer {
		s := (o*srcRows + int(from)) * inner
		d := (o*dstRows + int(to)) * inner
		if src.F != nil {
			copy(dst.F[d:d+inner], src.F[s:s+inner])
		} else {
			copy(dst.I[d:d+inner], src.I[s:s+inner])
		}
	}
}
