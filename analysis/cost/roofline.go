package cost

import (
	"fmt"

	"tofuc/lang/ir"
)

// Device is a profile for the roofline estimate of a graph on one GPU.
type Device struct {
	Name      string
	PeakFLOPS float64 // floating-point operations per second (f32, no tensor cores)
	Bandwidth float64 // device-memory bytes per second
	Launch    float64 // seconds of overhead per kernel launch
}

// H100 is the default profile: an H100 SXM's f32 CUDA-core peak, its HBM3
// bandwidth, and a typical kernel launch overhead.
var H100 = Device{Name: "H100 SXM", PeakFLOPS: 67e12, Bandwidth: 3.35e12, Launch: 3e-6}

// KernelEstimate is one kernel of a graph: a node and the element-wise
// nodes fused into it.
type KernelEstimate struct {
	Nodes []string // the node that launches it first, then those fused into it
	FLOPs int64
	Bytes int64 // read from and written to device memory
	Time  float64
}

// Estimate is the roofline cost of running a graph as a sequence of
// kernels: each kernel takes the longer of its compute and its memory
// time, plus the launch overhead.
type Estimate struct {
	Device   Device
	FLOPs    int64
	Bytes    int64
	Launches int
	Time     float64 // seconds
	Kernels  []KernelEstimate
	// Precomputed counts the nodes computed from parameters and constants
	// alone, and Views the nodes whose outputs are contiguous ranges of an
	// input: neither runs a kernel (see Roofline).
	Precomputed int
	Views       int
}

// Roofline estimates g on d, for inference. Every node is a kernel, except
// that:
//   - a node whose inputs are all parameters, constants or outputs of such
//     nodes (a weight transformation: a kernel enlarged with zeros, two
//     weights concatenated, a batch norm folded into a convolution) is
//     precomputed once when the weights are loaded, as MetaFlow computes
//     the weights of a target graph, and costs nothing per run;
//   - a node each of whose outputs reads one contiguous range of one input
//     (a slice or split along an axis preceded by extents of 1: a channel
//     range of an NCHW tensor with batch 1) is a view of that input's
//     memory: no kernel and no bytes; its consumers read the range;
//   - an element-wise node whose floating input is produced by a kernel
//     with no other consumer (and which is not a graph output) is fused
//     into that producer's kernel: the intermediate tensor is neither
//     written nor read, and no launch is paid (conv + relu, conv + add).
//
// Shapes must be concrete.
func Roofline(g *ir.Graph, d Device) (*Estimate, error) {
	uses := map[*ir.Value]int{}
	for _, n := range g.Nodes {
		for _, v := range n.Inputs {
			uses[v]++
		}
	}
	for _, v := range g.Outputs {
		uses[v] += 2
	}
	kernelOf := map[*ir.Value]int{}
	est := &Estimate{Device: d}
	weight := map[*ir.Value]bool{}
	for _, p := range g.Params {
		weight[p.Value] = true
	}
	for _, n := range g.Nodes {
		if fromWeights(n, weight) {
			for _, v := range n.Outputs {
				weight[v] = true
			}
			est.Precomputed++
			continue
		}
		if IsView(n.Inst) {
			est.Views++
			continue
		}
		f, err := InstanceFLOPs(n.Inst)
		if err != nil {
			return nil, fmt.Errorf("node %s: %v", n.Name, err)
		}
		k := fusionTarget(n, uses, kernelOf)
		if k < 0 {
			k = len(est.Kernels)
			est.Kernels = append(est.Kernels, KernelEstimate{})
		}
		ke := &est.Kernels[k]
		ke.Nodes = append(ke.Nodes, n.Name)
		ke.FLOPs += f
		for _, v := range n.Inputs {
			if j, ok := kernelOf[v]; !ok || j != k || uses[v] > 1 {
				ke.Bytes += valueBytes(v)
			}
		}
		for _, v := range n.Outputs {
			kernelOf[v] = k
		}
	}
	for i := range est.Kernels {
		ke := &est.Kernels[i]
		ke.Bytes += kernelWrites(g, ke, uses)
		ke.Time = max(float64(ke.FLOPs)/d.PeakFLOPS, float64(ke.Bytes)/d.Bandwidth) + d.Launch
		est.FLOPs += ke.FLOPs
		est.Bytes += ke.Bytes
		est.Time += ke.Time
	}
	est.Launches = len(est.Kernels)
	return est, nil
}

// fromWeights reports whether every input of n is a parameter, a constant
// or computed from them alone.
func fromWeights(n *ir.Node, weight map[*ir.Value]bool) bool {
	for _, v := range n.Inputs {
		if !weight[v] && v.Const == nil {
			return false
		}
	}
	return true
}

// IsView reports whether each output of inst reads one contiguous range of
// one input, read from its lambda: the body is an access to an input at
// the output's own indices, except at most one axis shifted by a
// constant; on the first axis where the range is narrower than the input
// (or shifted), every axis before has extent 1 and every axis after is
// whole.
func IsView(inst *ir.Instance) bool {
	if len(inst.Locals) > 0 || len(inst.Outputs) == 0 {
		return false
	}
	for _, d := range inst.Outputs {
		a, ok := d.Body.(*ir.Access)
		if !ok || a.Default != nil || len(a.Index) != len(d.Vars) {
			return false
		}
		shifted := -1
		for i, x := range a.Index {
			if r, ok := x.(*ir.VarRef); ok && r.V == d.Vars[i] {
				continue
			}
			if shifted >= 0 || !shiftOf(x, d.Vars[i]) {
				return false
			}
			shifted = i
		}
		if shifted < 0 {
			for i, v := range d.Vars {
				if !a.T.Shape[i].Equal(v.Extent) {
					shifted = i
					break
				}
			}
		}
		if shifted < 0 {
			continue // the whole input
		}
		for i := 0; i < shifted; i++ {
			if c, ok := a.T.Shape[i].IsConst(); !ok || c != 1 {
				return false
			}
		}
		for i := shifted + 1; i < len(d.Vars); i++ {
			if !a.T.Shape[i].Equal(d.Vars[i].Extent) {
				return false
			}
		}
	}
	return true
}

// shiftOf reports whether x is v plus a constant.
func shiftOf(x ir.Expr, v *ir.Var) bool {
	b, ok := x.(*ir.Binary)
	if !ok || b.Op != ir.OpAdd {
		return false
	}
	r, isVar := b.L.(*ir.VarRef)
	if !isVar || r.V != v {
		return false
	}
	switch k := b.R.(type) {
	case *ir.Const:
		return true
	case *ir.Size:
		_, ok := k.D.IsConst()
		return ok
	}
	return false
}

// fusionTarget is the kernel an element-wise node joins, or -1.
func fusionTarget(n *ir.Node, uses map[*ir.Value]int, kernelOf map[*ir.Value]int) int {
	if !Elementwise(n.Inst) {
		return -1
	}
	for _, v := range n.Inputs {
		if k, ok := kernelOf[v]; ok && uses[v] == 1 && v.DType.IsFloat() && sameShape(v, n.Outputs[0]) {
			return k
		}
	}
	return -1
}

func sameShape(a, b *ir.Value) bool {
	if len(a.Shape) != len(b.Shape) {
		return false
	}
	for i := range a.Shape {
		if !a.Shape[i].Equal(b.Shape[i]) {
			return false
		}
	}
	return true
}

// kernelWrites counts the outputs of a kernel's nodes that leave it.
func kernelWrites(g *ir.Graph, ke *KernelEstimate, uses map[*ir.Value]int) int64 {
	names := map[string]bool{}
	for _, s := range ke.Nodes {
		names[s] = true
	}
	var total int64
	for _, n := range g.Nodes {
		if !names[n.Name] {
			continue
		}
		for _, v := range n.Outputs {
			last := n.Name == ke.Nodes[len(ke.Nodes)-1]
			if last || uses[v] != 1 {
				total += valueBytes(v)
			}
		}
	}
	return total
}

func valueBytes(v *ir.Value) int64 {
	n := int64(max(1, v.DType.Size()))
	for _, d := range v.Shape {
		c, _ := d.IsConst()
		n *= c
	}
	return n
}
