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
		tiles[v] = make([]*tensor.Tensor, len(boxes))
		for d, b := range boxes {
			if eg.Holds(v, d) {
				tiles[v][d] = cut(x, b)
			}
		}
	}
	for _, ops := range eg.Ops {
		if err := eg.runNode(ops, tiles); err != nil {
			return nil, fmt.Errorf("operator %s: %w", ops[0].Node.Name, err)
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
			ins[j] = eg.gather(v, op.In[j], tiles[v])
		}
		outs, err := interp.EvalInstance(op.Inst, ins, nil)
		if err != nil {
			return fmt.Errorf("device %d: %w", op.Device, err)
		}
		results[op.Device] = outs
	}
	for o, v := range n.Outputs {
		tiles[v] = make([]*tensor.Tensor, len(eg.Tiles[v]))
		for e, tb := range eg.Tiles[v] {
			if !eg.Holds(v, e) {
				continue
			}
			t := tensor.New(v.DType, shapeOf(tb))
			parts, boxes := eg.combined(ops, results, o, e)
			for i, b := range boxes {
				paste(t, tb, parts[i], b)
			}
			tiles[v][e] = t
		}
	}
	return nil
}

// combined lists output o's computed parts that device e's tile takes,
// with their boxes: those of devices holding the same partial sum as e,
// partial outputs of a group first combined with the reducer.
func (eg *Graph) combined(ops []*Op, results [][]*tensor.Tensor, o, e int) ([]*tensor.Tensor, []Box) {
	v := ops[0].Node.Outputs[o]
	var parts []*tensor.Tensor
	var boxes []Box
	done := map[string]bool{}
	for _, op := range ops {
		if results[op.Device] == nil || !eg.SameSum(v, op.Device, e) {
			continue
		}
		key := fmt.Sprint(op.Outputs[o])
		if done[key] {
			continue
		}
		done[key] = true
		part := results[op.Device][o]
		if op.Groups[o] != nil {
			part = reduce(op, o, results)
		}
		parts = append(parts, part)
		boxes = append(boxes, op.Outputs[o])
	}
	return parts, boxes
}

// reduce combines the partials of op's group for output o in float64,
// rounding once.
func reduce(op *Op, o int, results [][]*tensor.Tensor) *tensor.Tensor {
	var parts []*tensor.Tensor
	for _, d := range op.Groups[o] {
		if results[d] != nil {
			parts = append(parts, results[d][o])
		}
	}
	return fold(op.Reducer, parts)
}

// fold combines equal-shaped tensors with the reducer in float64,
// rounding once.
func fold(r ir.Reducer, parts []*tensor.Tensor) *tensor.Tensor {
	out := parts[0].Clone()
	acc := make([]float64, out.Len())
	for i := range acc {
		acc[i] = out.Flat(i)
	}
	for _, part := range parts[1:] {
		for i := range acc {
			acc[i] = combine(r, acc[i], part.Flat(i))
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

func combine(r ir.Reducer, a, b float64) float64 {
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

// gather fills what a device reads of v: each list of pieces pasted into
// a buffer of the input's shape, the lists (partial sums) added up.
func (eg *Graph) gather(v *ir.Value, in *Input, ts []*tensor.Tensor) *tensor.Tensor {
	var sums []*tensor.Tensor
	for _, pieces := range in.Sums {
		out := tensor.New(v.DType, shapeOf(strategy.WholeBox(in.Shape)))
		for _, p := range pieces {
			src := cut(ts[p.From], p.Box.Relative(eg.Tiles[v][p.From]))
			place(out, p.At, src)
		}
		sums = append(sums, out)
	}
	if len(sums) == 1 {
		return sums[0]
	}
	return fold(ir.Sum, sums)
}

// place writes src into dst with its first element at at.
func place(dst *tensor.Tensor, at []int64, src *tensor.Tensor) {
	idx := make([]int, len(at))
	for i := range src.Len() {
		rest := i
		for d := len(at) - 1; d >= 0; d-- {
			idx[d] = rest%src.Shape[d] + int(at[d])
			rest /= src.Shape[d]
		}
		dst.SetFlat(dst.Offset(idx...), src.Flat(i))
	}
}

func (eg *Graph) assemble(v *ir.Value, ts []*tensor.Tensor) *tensor.Tensor {
	var held []Box
	for d, tb := range eg.Tiles[v] {
		if eg.Holds(v, d) {
			held = append(held, tb)
		}
	}
	all := strategy.WholeBox(shape64(held))
	out := tensor.New(v.DType, shapeOf(all))
	for d, tb := range eg.Tiles[v] {
		if eg.Holds(v, d) {
			paste(out, all, ts[d], tb)
		}
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
