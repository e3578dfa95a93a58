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
}

// Roofline estimates g on d. Every node is a kernel, except that an
// element-wise node whose floating input is produced by a node with no
// other consumer (and which is not a graph output) is fused into that
// producer's kernel: the intermediate tensor is neither written nor read,
// and no launch is paid (conv + relu, conv + add). Shapes must be
// concrete.
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
	for _, n := range g.Nodes {
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
