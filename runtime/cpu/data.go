package cpu

import (
	"fmt"

	"tofuc/lang"
	"tofuc/runtime/native"
	"tofuc/runtime/opaque"
	"tofuc/runtime/plan"
	"tofuc/runtime/tensor"
)

// cut copies box of t into a tensor of its own.
func cut(t *tensor.Tensor, box []plan.Dim) *tensor.Tensor {
	shape := make([]int, len(box))
	whole := true
	for d, r := range box {
		shape[d] = int(r.Hi - r.Lo)
		whole = whole && r.Lo == 0 && shape[d] == t.Shape[d]
	}
	if whole {
		return t
	}
	out := tensor.New(t.DType, shape)
	forBox(shape, func(i int, idx []int) {
		src := 0
		for d, x := range idx {
			src = src*t.Shape[d] + x + int(box[d].Lo)
		}
		out.SetFlat(i, t.Flat(src))
	})
	return out
}

// paste copies part into box of t.
func paste(t, part *tensor.Tensor, box []plan.Dim) {
	forBox(part.Shape, func(i int, idx []int) {
		dst := 0
		for d, x := range idx {
			dst = dst*t.Shape[d] + x + int(box[d].Lo)
		}
		t.SetFlat(dst, part.Flat(i))
	})
}

// forBox calls f with every index of shape in row-major order.
func forBox(shape []int, f func(i int, idx []int)) {
	n := tensor.NumElements(shape)
	idx := make([]int, len(shape))
	for i := 0; i < n; i++ {
		f(i, idx)
		for d := len(idx) - 1; d >= 0; d-- {
			idx[d]++
			if idx[d] < shape[d] {
				break
			}
			idx[d] = 0
		}
	}
}

// copyBox copies box Src of buffer From to offset At of buffer To, a
// contiguous row of the innermost dimension at a time.
func (pr *Program) copyBox(s *plan.Step) {
	from, to := pr.Plan.Buffers[s.From], pr.Plan.Buffers[s.To]
	size := int64(lang.ParseDType(from.DType).Size())
	src, dst := pr.bytes(s.From), pr.bytes(s.To)
	rank := len(s.Src)
	if rank == 0 {
		copy(dst[:size], src[:size])
		return
	}
	rows := make([]int, rank-1)
	for d := range rows {
		rows[d] = int(s.Src[d].Hi - s.Src[d].Lo)
	}
	width := (s.Src[rank-1].Hi - s.Src[rank-1].Lo) * size
	if width == 0 {
		return
	}
	forBox(rows, func(_ int, idx []int) {
		var so, do int64
		for d := 0; d < rank; d++ {
			var x int64
			if d < rank-1 {
				x = int64(idx[d])
			}
			so = so*from.Shape[d] + x + s.Src[d].Lo
			do = do*to.Shape[d] + x + s.At[d]
		}
		copy(dst[do*size:do*size+width], src[so*size:so*size+width])
	})
}

// reduce combines the parts into To, in float64 (int64 for integers,
// wrapped at the end) in the order of the parts, rounding once.
func (pr *Program) reduce(s *plan.Step) error {
	to := pr.Plan.Buffers[s.To]
	dt := lang.ParseDType(to.DType)
	shape := ints(to.Shape)
	var acc *tensor.Tensor
	for _, id := range s.Parts {
		part, err := native.Decode(dt, shape, pr.bytes(id))
		if err != nil {
			return err
		}
		if acc == nil {
			acc = part
			continue
		}
		for i := range acc.Len() {
			if dt.IsFloat() {
				acc.F[i] = foldFloat(s.Reducer, acc.F[i], part.F[i])
			} else {
				acc.I[i] = foldInt(s.Reducer, dt, acc.I[i], part.I[i])
			}
		}
	}
	if dt.IsFloat() {
		for i, v := range acc.F {
			acc.F[i] = dt.RoundFloat(v)
		}
	} else {
		for i, v := range acc.I {
			acc.I[i] = dt.WrapInt(v)
		}
	}
	return native.Encode(acc, pr.bytes(s.To))
}

func foldFloat(r string, a, b float64) float64 {
	switch r {
	case "sum":
		return a + b
	case "prod":
		return a * b
	case "max":
		if b > a || b != b {
			return b
		}
		return a
	}
	if b < a || b != b {
		return b
	}
	return a
}

func foldInt(r string, dt lang.DType, a, b int64) int64 {
	less := func(x, y int64) bool { return x < y }
	if dt == lang.U64 {
		less = func(x, y int64) bool { return uint64(x) < uint64(y) }
	}
	switch r {
	case "sum":
		return a + b
	case "prod":
		return a * b
	case "max":
		if less(a, b) {
			return b
		}
		return a
	}
	if less(b, a) {
		return b
	}
	return a
}

// opaque calls an opaque function for every batch index (plan.OpaqueCall).
func (pr *Program) opaque(s *plan.Step) error {
	c := s.Call
	fn := opaque.Lookup(c.Fn)
	if fn == nil {
		return fmt.Errorf("no implementation of the opaque function %s", c.Fn)
	}
	args := make([]*tensor.Tensor, len(c.Args))
	for i, id := range c.Args {
		b := pr.Plan.Buffers[id]
		t, err := native.Decode(lang.ParseDType(b.DType), ints(b.Shape), pr.bytes(id))
		if err != nil {
			return err
		}
		args[i] = t
	}
	to := pr.Plan.Buffers[s.To]
	out := tensor.New(lang.ParseDType(to.DType), ints(to.Shape))
	shape := ints(c.Shape)
	per := tensor.NumElements(shape)
	var err error
	forBox(ints(c.Batch), func(b int, idx []int) {
		if err != nil {
			return
		}
		views := make([]*tensor.Tensor, len(args))
		for i, a := range args {
			views[i] = view(a, c.Fixed[i], idx)
		}
		var res *tensor.Tensor
		if res, err = opaque.Call(c.Fn, fn, views, shape); err != nil {
			return
		}
		for j := range per {
			out.SetFlat(b*per+j, res.Flat(j))
		}
	})
	if err != nil {
		return err
	}
	return native.Encode(out, pr.bytes(s.To))
}

// view is t with dimension d fixed to batch[fixed[d]] where fixed[d] >= 0.
func view(t *tensor.Tensor, fixed []int64, batch []int) *tensor.Tensor {
	box := make([]plan.Dim, len(t.Shape))
	var shape []int
	for d, f := range fixed {
		if f < 0 {
			box[d] = plan.Dim{Lo: 0, Hi: int64(t.Shape[d])}
			shape = append(shape, t.Shape[d])
			continue
		}
		x := int64(batch[f])
		box[d] = plan.Dim{Lo: x, Hi: x + 1}
	}
	part := cut(t, box)
	return &tensor.Tensor{DType: part.DType, Shape: shape, F: part.F, I: part.I}
}
