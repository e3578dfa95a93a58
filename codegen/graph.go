package codegen

import (
	"fmt"
	"slices"
	"strings"

	"tofuc/analysis/schedule"
	"tofuc/codegen/blocking"
	"tofuc/codegen/kernel"
	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/runtime/plan"
)

// localKey is the buffer of a materialised local of a node.
type localKey struct {
	node *ir.Node
	def  *ir.Def
}

// singleDevice adds the kernels and buffers of g's schedule on device 0.
func (b *builder) singleDevice(g *ir.Graph) error {
	s := schedule.Build(g)
	for _, v := range g.Inputs {
		if err := b.bind(&b.p.Inputs, v, plan.RoleInput); err != nil {
			return err
		}
		b.p.Inputs[len(b.p.Inputs)-1].Classes = g.LabelClasses(v)
	}
	for _, p := range g.Params {
		if err := b.bind(&b.p.Params, p.Value, plan.RoleParameter); err != nil {
			return err
		}
	}
	for _, n := range s.Views {
		if err := b.viewNode(n); err != nil {
			return err
		}
	}
	weights := map[any]bool{}
	for _, p := range g.Params {
		weights[p.Value] = true
	}
	for k, kern := range s.Kernels {
		if kern.Chained {
			continue // launched with the kernel that reads it
		}
		kn, err := b.scheduleKernel(s, k)
		if err != nil {
			return err
		}
		group := -1
		if !kern.Precomputed && kern.Before == nil {
			if group, err = b.offerLibraries(0, kn); err != nil {
				return err
			}
		}
		if kern.Precomputed {
			weights[kn.Out().Key] = true
		} else if err := b.prepack(kn, weights, kern.Before != nil); err != nil {
			return err
		}
		if kern.Before != nil {
			before, err := b.scheduleKernel(s, slices.Index(s.Kernels, kern.Before))
			if err != nil {
				return err
			}
			if err := b.prepack(before, weights, true); err != nil {
				return err
			}
			kn.Before, kn.ChainRows = before, kern.ChainRows
			kn.Label = before.Label + " then " + kn.Label
		}
		idx, err := b.launch(0, kern.Precomputed, kn)
		if err != nil {
			return err
		}
		if group >= 0 {
			b.p.Steps[0][idx].Place = &plan.Placed{Group: group, Variants: []string{plan.Generated}}
		}
		if kern.Before != nil {
			if err := b.gpuHalves(s, kern); err != nil {
				return err
			}
		}
	}
	for _, v := range g.Outputs {
		if err := b.output(v); err != nil {
			return err
		}
	}
	return nil
}

// gpuHalves adds the launches a GPU runs instead of the chained launch
// of kern (docs/decisions.md, "Chained launches"): its two kernels, each
// in its own form, without the host's packed weights.
func (b *builder) gpuHalves(s *schedule.Schedule, kern *schedule.Kernel) error {
	for _, half := range []*schedule.Kernel{kern.Before, kern} {
		kn, err := b.scheduleKernel(s, slices.Index(s.Kernels, half))
		if err != nil {
			return err
		}
		kn.GPUOnly = true
		if _, err := b.launch(0, false, kn); err != nil {
			return err
		}
	}
	return nil
}

// packKey is the buffer of a contraction's weights packed for the host:
// the packing kernel's name (its IR, so the factor's lambda, shapes and
// blocking) and the buffers that factor reads. Kernels that pack the
// same factor of the same weights alike share one packed copy: an
// unrolled recurrent layer's steps each multiply by the same R, and 16
// copies of it (256 KiB each) left none in the cache.
type packKey struct{ kernel, factors string }

// prepack packs the weight factor of a contraction once, when the
// weights are bound, for the host's micro-kernel (once for every batch
// index where the factor reads a batch variable). The weights are B
// where their variables end the output (x · W) and the other factor
// fills a strip of rows at least: the micro-kernel's tiles then run
// along the output's rows, which its epilogue stores as they are (as A,
// the tiles ran across them, a store or a read an output row apart for
// every element: a ViT's projections took twice as long as unpacked).
// Elsewhere they are A: a convolution's (its channels precede the
// image's pixels), beside a vector (batch 1: the narrow kernel streams
// A), and in a chained launch (chained: its tasks run both halves' products
// a block of rows at a time, emit's chainRows, and pack B themselves).
func (b *builder) prepack(k *kernel.Kernel, weights map[any]bool, chained bool) error {
	g := k.GEMM
	if g == nil {
		return nil
	}
	onWeights := func(f ir.Expr) bool {
		keys := k.FactorKeys(f)
		for _, key := range keys {
			if !weights[key] {
				return false
			}
		}
		return len(keys) > 0
	}
	switch {
	case onWeights(g.A):
	case onWeights(g.B):
		g.Swap()
	default:
		return nil
	}
	// The weights are A now.
	mr, _, _ := blocking.HostTile()
	if !chained && len(ir.CommonSuffix(g.Rows, k.Vars)) > 0 && ir.Extent(g.Cols) >= mr {
		g.Swap()
		return b.packWeights(k, blocking.PackedBLen(g), k.PackBKernel, k.ReadPackedB)
	}
	return b.packWeights(k, blocking.PackedLen(g), k.PackKernel, k.ReadPacked)
}

// packWeights launches, with the weights, the kernel that newPack makes
// to pack n floats of k's weight factor, where no kernel packed the same
// weights alike before, and makes k read them (read).
func (b *builder) packWeights(k *kernel.Kernel, n int64, newPack func(n int64) *kernel.Kernel, read func(key any, n int64)) error {
	pk := newPack(n)
	key, err := b.packKeyOf(pk)
	if err != nil {
		return err
	}
	pk.SetPackKey(key)
	_, packed := b.bufferOf[key]
	read(key, n)
	if packed {
		return nil
	}
	id := b.buffer(key, k.Label+" packed", 0, lang.F32, []int64{n}, plan.RoleWorkspace)
	b.keep(id)
	_, err = b.launch(0, true, pk)
	return err
}

// packKeyOf is the key of the buffer packing kernel pk writes.
func (b *builder) packKeyOf(pk *kernel.Kernel) (packKey, error) {
	name, err := kernelName(pk, b.p.Precision)
	if err != nil {
		return packKey{}, err
	}
	var factors []string
	for _, key := range pk.FactorKeys(pk.GEMM.PackedFactor()) {
		id, ok := b.bufferOf[key]
		if !ok {
			return packKey{}, fmt.Errorf("%s: its weights %v have no buffer", pk.Label, key)
		}
		factors = append(factors, fmt.Sprint(id))
	}
	return packKey{kernel: name, factors: strings.Join(factors, ",")}, nil
}

// valueBuffer returns the buffer of graph value v on device 0.
func (b *builder) valueBuffer(v *ir.Value) (int, error) {
	shape, err := concrete(v.Name, v.Shape)
	if err != nil {
		return 0, err
	}
	return b.buffer(v, v.Name, 0, v.DType, shape, roleOf(v)), nil
}

func roleOf(v *ir.Value) string {
	if v.GradOf != nil {
		return plan.RoleGradient
	}
	return plan.RoleActivation
}

// bind adds a whole-tensor binding of v (an input or a parameter).
func (b *builder) bind(list *[]plan.Binding, v *ir.Value, role string) error {
	shape, err := concrete(v.Name, v.Shape)
	if err != nil {
		return err
	}
	id := b.buffer(v, v.Name, 0, v.DType, shape, role)
	b.keep(id)
	*list = append(*list, plan.Binding{Name: v.Name, DType: v.DType.String(), Shape: shape, Tiles: []plan.Tile{{Buffer: id, Box: whole(shape)}}})
	return nil
}

// output binds a graph output; a literal constant gets a kernel that
// writes it.
func (b *builder) output(v *ir.Value) error {
	if v.Const != nil {
		if _, ok := b.bufferOf[v]; !ok {
			if err := b.constantOutput(v); err != nil {
				return err
			}
		}
	}
	id, err := b.valueBuffer(v)
	if err != nil {
		return err
	}
	b.keep(id)
	if b.p.Buffers[id].Role != plan.RoleInput && b.p.Buffers[id].Role != plan.RoleParameter {
		b.p.Buffers[id].Role = plan.RoleOutput
	}
	buf := b.p.Buffers[id]
	b.p.Outputs = append(b.p.Outputs, plan.Binding{Name: v.Name, DType: buf.DType, Shape: buf.Shape, Tiles: []plan.Tile{{Buffer: id, Box: whole(buf.Shape)}}})
	return nil
}

// constantOutput launches a kernel writing the literal value of v.
func (b *builder) constantOutput(v *ir.Value) error {
	t := &ir.Tensor{Name: v.Name, DType: v.DType}
	d := &ir.Def{Tensor: t, Body: &ir.Const{T: v.DType, Float: v.Const.Float, Int: v.Const.Int}}
	inst := &ir.Instance{Op: "constant", Outputs: []*ir.Def{d}}
	if _, err := b.valueBuffer(v); err != nil {
		return err
	}
	k, err := kernel.Build("constant "+v.Name, v, []kernel.Stage{{Inst: inst, Def: d, Bind: noInputs}})
	if err != nil {
		return err
	}
	_, err = b.launch(0, false, k)
	return err
}

func noInputs(t *ir.Tensor) (kernel.Binding, error) {
	return kernel.Binding{}, fmt.Errorf("tensor %s has no binding", t.Name)
}

// scheduleKernel builds the kernel of launch k of s, creating the
// buffers it reads and writes.
func (b *builder) scheduleKernel(s *schedule.Schedule, k int) (*kernel.Kernel, error) {
	kern := s.Kernels[k]
	root := kern.Root()
	recomputed := func(n *ir.Node) func(*ir.Def) bool {
		return func(d *ir.Def) bool { return s.Recomputed(n, d) }
	}
	stages := []kernel.Stage{{Inst: root.Inst, Def: kern.Def, Bind: b.binder(s, root, nil), Recomputed: recomputed(root)}}
	for i, n := range kern.Nodes[1:] {
		prev := kern.Nodes[i].Outputs[0]
		if i == 0 {
			prev = kern.Root().Outputs[outputIndex(root, kern.Def)]
		}
		stages = append(stages, kernel.Stage{Inst: n.Inst, Def: n.Inst.Outputs[0], Bind: b.binder(s, n, prev), Recomputed: recomputed(n)})
	}
	var out any
	if v := kern.Out(); v != nil {
		if _, err := b.valueBuffer(v); err != nil {
			return nil, err
		}
		out = v
	} else {
		out = localKey{root, kern.Def}
		if err := b.localBuffer(root, kern.Def); err != nil {
			return nil, err
		}
	}
	label, ops := root.Name, root.Inst.Op
	for _, n := range kern.Nodes[1:] {
		label += "+" + n.Name
		ops += "+" + n.Inst.Op
	}
	if len(schedule.Launches(root.Inst)) > 1 || kern.Out() == nil {
		label += "/" + kern.Def.Tensor.Name
	}
	label += " (" + ops + ")"
	kn, err := kernel.Build(label, out, stages)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", root.Pos, root.Inst.Op, err)
	}
	kn.Call = root.Pos
	return kn, nil
}

func outputIndex(n *ir.Node, d *ir.Def) int {
	for i, o := range n.Inst.Outputs {
		if o == d {
			return i
		}
	}
	return -1
}

// binder binds the tensors of node n's instance: inputs to their values'
// buffers (or constants, or prev: the value a fused node reads in
// registers, or the producer of a value computed in a prologue of s),
// materialised locals to their workspace buffers.
func (b *builder) binder(s *schedule.Schedule, n *ir.Node, prev *ir.Value) func(t *ir.Tensor) (kernel.Binding, error) {
	return func(t *ir.Tensor) (kernel.Binding, error) {
		for i, in := range n.Inst.Inputs {
			if in != t {
				continue
			}
			v := n.Inputs[i]
			switch {
			case v == prev:
				return kernel.Binding{Prev: true}, nil
			case v.Const != nil:
				return kernel.Binding{Const: v.Const}, nil
			case s.Prologue(v) != nil:
				p := s.Prologue(v)
				return kernel.Binding{Inline: &kernel.Inline{Inst: p.Inst, Bind: b.binder(s, p, nil)}}, nil
			}
			if _, err := b.valueBuffer(v); err != nil {
				return kernel.Binding{}, err
			}
			return kernel.Binding{Buffer: v}, nil
		}
		if d := schedule.Local(n.Inst, t); d != nil {
			if err := b.localBuffer(n, d); err != nil {
				return kernel.Binding{}, err
			}
			return kernel.Binding{Buffer: localKey{n, d}}, nil
		}
		return kernel.Binding{}, fmt.Errorf("tensor %s is not an input or a local of %s", t.Name, n.Inst.Op)
	}
}

func (b *builder) localBuffer(n *ir.Node, d *ir.Def) error {
	shape, err := concrete(d.Tensor.Name, d.Tensor.Shape)
	if err != nil {
		return err
	}
	b.buffer(localKey{n, d}, n.Name+"/"+d.Tensor.Name, 0, d.Tensor.DType, shape, plan.RoleWorkspace)
	return nil
}

// viewNode makes the outputs of a view node views of its input's memory
// (schedule.IsView: each reads one contiguous range of an input).
func (b *builder) viewNode(n *ir.Node) error {
	for o, d := range n.Inst.Outputs {
		a := d.Body.(*ir.Access)
		src := -1
		for i, in := range n.Inst.Inputs {
			if in == a.T {
				src = i
			}
		}
		if src < 0 || n.Inputs[src].Const != nil {
			return fmt.Errorf("%s: view %s reads no input buffer", n.Pos, n.Name)
		}
		base, err := b.valueBuffer(n.Inputs[src])
		if err != nil {
			return err
		}
		id, err := b.valueBuffer(n.Outputs[o])
		if err != nil {
			return err
		}
		inShape := b.p.Buffers[base].Shape
		var elems int64
		stride := int64(1)
		for i := len(a.Index) - 1; i >= 0; i-- {
			at, ok := ir.AffineOf(a.Index[i], nil)
			c, cok := at.Const.IsConst()
			if !ok || !cok {
				return fmt.Errorf("%s: view %s has a non-constant offset", n.Pos, n.Name)
			}
			elems += c * stride
			stride *= inShape[i]
		}
		b.views[id] = view{base: base, offset: elems * int64(n.Inputs[src].DType.Size())}
	}
	return nil
}

func concrete(name string, s []lang.Dim) ([]int64, error) {
	out := make([]int64, len(s))
	for i, d := range s {
		n, ok := d.IsConst()
		if !ok {
			return nil, fmt.Errorf("%s has the symbolic shape %s: set its symbols (--set) before compiling", name, lang.ShapeString(s))
		}
		if n < 0 {
			return nil, fmt.Errorf("%s has a negative extent: shape %s", name, lang.ShapeString(s))
		}
		out[i] = n
	}
	return out, nil
}

func whole(shape []int64) []plan.Dim {
	box := make([]plan.Dim, len(shape))
	for i, d := range shape {
		box[i] = plan.Dim{Lo: 0, Hi: d}
	}
	return box
}
