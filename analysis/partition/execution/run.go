package execution

import (
	"fmt"
	"math"

	"tofuc/analysis/strategy"
	"tofuc/lang/ir"
	"tofuc/runtime/interp"
	"tofuc/runtime/tensor"
)

// Run executes the graph with the interpreter, devices simulated: inputs
// and params are whole tensors (by name), cut into tiles; the result is
// the graph's outputs by name, assembled from their tiles.
func (eg *Graph) Run(inputs, params map[string]*tensor.Tensor) (map[string]*tensor.Tensor, error) {
	tiles := map[*ir.Value][]*tensor.Tensor{}
	if len(eg.Ops) == 0 {
		return nil, fmt.Errorf("the graph has no operators")
	}
	for v, boxes := range eg.Tiles {
		x := inputs[v.Name]
		if x == nil {
			x = params[v.Name]
		}
		if x == nil {
			continue
		}
		for _, b := range boxes {
			tiles[v] = append(tiles[v], cut(x, b))
		}
	}
	for _, ops := range eg.Ops {
		if err := eg.runNode(ops, tiles); err != nil {
			return nil, fmt.Errorf("operator %s: %v", ops[0].Node.Name, err)
		}
	}
	out := map[string]*tensor.Tensor{}
	for v, ts := range tiles {
		if inputs[v.Name] == nil && params[v.Name] == nil {
			out[v.Name] = eg.assemble(v, ts)
		}
	}
	return out, nil
}

// runNode runs a node's copies and distributes its outputs into tiles.
func (eg *Graph) runNode(ops []*Op, tiles map[*ir.Value][]*tensor.Tensor) error {
	n := ops[0].Node
	results := make([][]*tensor.Tensor, len(ops))
	for _, op := range ops {
		if op.Inst == nil {
			continue
		}
		ins := make([]*tensor.Tensor, len(n.Inputs))
		for j, v := range n.Inputs {
			if v.Const != nil {
				ins[j] = constant(v)
				continue
			}
			ins[j] = eg.gather(v, op.Inputs[j], tiles[v])
		}
		outs, err := interp.EvalInstance(op.Inst, ins, nil)
		if err != nil {
			return fmt.Errorf("device %d: %v", op.Device, err)
		}
		results[op.Device] = outs
	}
	for o, v := range n.Outputs {
		parts, boxes := combined(ops, results, o)
		for d, tb := range eg.Tiles[v] {
			t := tensor.New(v.DType, shapeOf(tb))
			for i, b := range boxes {
				paste(t, tb, parts[i], b)
			}
			tiles[v] = append(tiles[v][:d], t)
		}
	}
	return nil
}

// combined lists output o's computed parts with their boxes; partial
// outputs of a group are first combined with the reducer.
func combined(ops []*Op, results [][]*tensor.Tensor, o int) ([]*tensor.Tensor, []Box) {
	var parts []*tensor.Tensor
	var boxes []Box
	done := map[string]bool{}
	for _, op := range ops {
		if results[op.Device] == nil {
			continue
		}
		key := fmt.Sprint(op.Outputs[o])
		if done[key] {
			continue
		}
		done[key] = true
		part := results[op.Device][o]
		if op.Partial {
			part = reduce(op, ops, results, o)
		}
		parts = append(parts, part)
		boxes = append(boxes, op.Outputs[o])
	}
	return parts, boxes
}

// reduce combines the partials of op's group in float64, rounding once.
func reduce(op *Op, ops []*Op, results [][]*tensor.Tensor, o int) *tensor.Tensor {
	var acc []float64
	var out *tensor.Tensor
	for _, d := range op.Group {
		if results[d] == nil {
			continue
		}
		part := results[d][o]
		if acc == nil {
			out = part.Clone()
			acc = make([]float64, part.Len())
			for i := range acc {
				acc[i] = part.Flat(i)
			}
			continue
		}
		for i := range acc {
			acc[i] = fold(op.Reducer, acc[i], part.Flat(i))
		}
	}
	for i, v := range acc {
		if out.DType.IsFloat() {
			v = out.DType.RoundFloat(v)
		}
		out.SetFlat(i, v)
	}
	return out
}

func fold(r ir.Reducer, a, b float64) float64 {
	switch r {
	case ir.Sum:
		return a + b
	case ir.Prod:
		return a * b
	case ir.Max:
		if math.IsNaN(a) || a > b {
			return a
		}
		return b
	default:
		if math.IsNaN(a) || a < b {
			return a
		}
		return b
	}
}

// gather assembles region r of v from the devices' tiles (what the own
// tile holds and the fused fetch brings).
func (eg *Graph) gather(v *ir.Value, r Box, ts []*tensor.Tensor) *tensor.Tensor {
	out := tensor.New(v.DType, shapeOf(r))
	for d, tb := range eg.Tiles[v] {
		paste(out, r, ts[d], tb)
	}
	return out
}

func (eg *Graph) assemble(v *ir.Value, ts []*tensor.Tensor) *tensor.Tensor {
	all := strategy.WholeBox(shape64(eg.Tiles[v]))
	out := tensor.New(v.DType, shapeOf(all))
	for d, tb := range eg.Tiles[v] {
		paste(out, all, ts[d], tb)
	}
	return out
}

func shape64(tiles []Box) []int64 {
	out := make([]int64, len(tiles[0]))
	for _, b := range tiles {
		for d, iv := range b {
			out[d] = max(out[d], iv.Hi+1)
		}
	}
	return out
}

func constant(v *ir.Value) *tensor.Tensor {
	if v.DType.IsFloat() {
		return tensor.Scalar(v.DType, v.Const.Float)
	}
	return tensor.Scalar(v.DType, float64(v.Const.Int))
}

func shapeOf(b Box) []int {
	out := make([]int, len(b))
	for d, iv := range b {
		out[d] = int(iv.Size())
	}
	return out
}

// cut copies box b (in x's coordinates) out of x.
func cut(x *tensor.Tensor, b Box) *tensor.Tensor {
	out := tensor.New(x.DType, shapeOf(b))
	idx := make([]int, len(b))
	for i := range out.Len() {
		rest := i
		for d := len(b) - 1; d >= 0; d-- {
			idx[d] = rest%out.Shape[d] + int(b[d].Lo)
			rest /= out.Shape[d]
		}
		out.SetFlat(i, x.Flat(x.Offset(idx...)))
	}
	return out
}

// paste writes part (holding box pb) into dst (holding box db) where they
// overlap.
func paste(dst *tensor.Tensor, db Box, part *tensor.Tensor, pb Box) {
	in := db.Intersect(pb)
	if in.Size() == 0 {
		return
	}
	src := cut(part, in.Relative(pb))
	lo := in.Relative(db)
	idx := make([]int, len(in))
	for i := range src.Len() {
		rest := i
		for d := len(in) - 1; d >= 0; d-- {
			idx[d] = rest%src.Shape[d] + int(lo[d].Lo)
			rest /= src.Shape[d]
		}
		dst.SetFlat(dst.Offset(idx...), src.Flat(i))
	}
}
