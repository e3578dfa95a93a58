package executor

import (
	"fmt"

	"tofuc/lang"
	"tofuc/runtime/native"
	"tofuc/runtime/opaque"
	"tofuc/runtime/plan"
	"tofuc/runtime/tensor"
)

// opaque returns the call of an opaque step on device dev, run on the
// host in the device's order: for every batch index (plan.OpaqueCall) the
// function on the views of its arguments, written into the step's
// buffer. Its errors, and a panic of its host code (which a validated
// plan does not cause), name the step, where.
func (pr *Program) opaque(dev HostDevice, s *plan.Step, where string) func() error {
	return func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("%s: the host code of the step failed: %v", where, r)
			}
		}()
		if err := pr.callOpaque(dev, s); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		return nil
	}
}

// callOpaque runs opaque step s on device dev.
func (pr *Program) callOpaque(dev HostDevice, s *plan.Step) error {
	c := s.Call
	fn := opaque.Lookup(c.Fn)
	if fn == nil {
		return fmt.Errorf("no implementation of the opaque function %s", c.Fn)
	}
	args := make([]*tensor.Tensor, len(c.Args))
	for i, id := range c.Args {
		t, err := pr.decode(dev, id)
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
	tensor.ForEachIndex(ints(c.Batch), func(b int, idx []int) {
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
	mem, err := dev.Bytes(pr.addr(s.To), to.Bytes)
	if err != nil {
		return err
	}
	return native.Encode(out, mem)
}

// decode is buffer id of a host device as a tensor.
func (pr *Program) decode(dev HostDevice, id int) (*tensor.Tensor, error) {
	b := pr.Plan.Buffers[id]
	mem, err := dev.Bytes(pr.addr(id), b.Bytes)
	if err != nil {
		return nil, err
	}
	return native.Decode(lang.ParseDType(b.DType), ints(b.Shape), mem)
}

// view is t with dimension d fixed to batch[fixed[d]] where fixed[d] >= 0.
func view(t *tensor.Tensor, fixed []int64, batch []int) *tensor.Tensor {
	var shape []int
	box := make([]int, len(t.Shape)) // the fixed index, or -1
	for d, f := range fixed {
		box[d] = -1
		if f < 0 {
			shape = append(shape, t.Shape[d])
			continue
		}
		box[d] = batch[f]
	}
	out := tensor.New(t.DType, shape)
	src := make([]int, len(t.Shape))
	tensor.ForEachIndex(shape, func(i int, idx []int) {
		k := 0
		for d := range src {
			if box[d] >= 0 {
				src[d] = box[d]
			} else {
				src[d] = idx[k]
				k++
			}
		}
		flat := 0
		for d, x := range src {
			flat = flat*t.Shape[d] + x
		}
		out.SetFlat(i, t.Flat(flat))
	})
	return out
}
