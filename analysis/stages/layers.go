package stages

import (
	"fmt"
	"slices"

	"tofuc/analysis/cost"
	"tofuc/analysis/partition"
	"tofuc/lang/ir"
)

// Layer is a unit of the stage partitioner: a forward operator group of
// the coarsened graph (partition.Coarsen) with its backward operators,
// gradient sums and the updates of its parameters.
type Layer struct {
	Name  string // its first forward node's
	Nodes []int  // indices into the graph's nodes, in node order
	// Forward and Backward are its kernels' seconds per micro-batch of s
	// samples on one device; Update its per-step seconds (the
	// optimizer's, once per step).
	Forward, Backward Affine
	Update            float64
	// GradientBytes are its trained parameters' gradients, all-reduced
	// once per step over a stage's devices; StateBytes what a replica
	// keeps whole (parameters, optimizer states, gradients).
	GradientBytes, StateBytes int64
	// ActivationBytes are its forward outputs per sample, kept from a
	// micro-batch's forward pass to its backward pass.
	ActivationBytes float64
}

// Affine is seconds as a function of the samples s a device computes:
// Fixed + PerSample·s (kernel launches and weight reads are fixed,
// activations' FLOPs and bytes scale with s).
type Affine struct{ Fixed, PerSample float64 }

// At is the seconds for s samples.
func (a Affine) At(s float64) float64 { return a.Fixed + a.PerSample*s }

func (a Affine) plus(b Affine) Affine { return Affine{a.Fixed + b.Fixed, a.PerSample + b.PerSample} }

// Layers is a training graph as layers: a DAG of forward dataflow.
type Layers struct {
	Layers []Layer
	// Succ and Pred are the forward edges; Bytes[[2]int{a, b}] the
	// bytes per sample flowing from a to b (their gradients flow back).
	Succ, Pred [][]int
	Bytes      map[[2]int]float64
	// Batch is the samples of one step (the extent data parallelism
	// splits); the graph's other extents stay whole.
	Batch int64
}

// NewLayers reads the layers of training graph g, their kernels priced
// on device dev at the whole batch and at half of it (the split data
// parallelism makes of every operator), which fixes each layer's affine
// seconds. Groups tied by shared weights, or by a cycle through shared
// weights, are one layer.
func NewLayers(g *cost.Graph, dev cost.Device) (*Layers, error) {
	batch, half, err := halfBatch(g)
	if err != nil {
		return nil, err
	}
	c := partition.Coarsen(g)
	group := layerGroups(g, c)
	ls := &Layers{Batch: batch, Bytes: map[[2]int]float64{}}
	index := map[int]int{} // group → layer
	for j, n := range g.IR.Nodes {
		gr := group[j]
		li, ok := index[gr]
		if !ok {
			li = len(ls.Layers)
			index[gr] = li
			ls.Layers = append(ls.Layers, Layer{Name: n.Name})
		}
		l := &ls.Layers[li]
		l.Nodes = append(l.Nodes, j)
		if err := l.add(g, n, half, dev, batch); err != nil {
			return nil, err
		}
	}
	ls.addParams(g)
	ls.edges(g, index, group)
	return ls.condense(), nil
}

// halfBatch is the step's batch and every node's choice in the plan of
// data parallelism over two devices. The batch is the first extent of
// the input the loss reads (its labels or targets); data parallelism
// must split every input along an extent of that size, as it splits
// the samples (an input whose first splittable dimension is another,
// such as an RNN's [steps, batch, features], is refused: its time
// steps are not samples).
func halfBatch(g *cost.Graph) (int64, *cost.Plan, error) {
	labels := lossInput(g.IR)
	if labels == nil {
		return 0, nil, fmt.Errorf("no loss reads an input of the graph: pipeline plans need a training graph")
	}
	batch := g.Shapes[labels][0]
	if batch < 2 {
		return 0, nil, fmt.Errorf("the batch is %d: there are no micro-batches to pipeline", batch)
	}
	dp, err := partition.Baseline(g, "data_parallel", 2, partition.Options{})
	if err != nil {
		return 0, nil, err
	}
	for _, in := range g.IR.Inputs {
		d := dp.Plan.Tensors[in][0]
		if d < 0 || g.Shapes[in][d] != batch {
			return 0, nil, fmt.Errorf("data parallelism splits the input %s %v along dimension %d, not along its batch of %d (the first extent of %s): pipeline plans need the batch first splittable", in.Name, g.Shapes[in], d, batch, labels.Name)
		}
	}
	return batch, dp.Plan, nil
}

// lossInput is the graph input a loss node reads (its labels or
// targets), or nil.
func lossInput(g *ir.Graph) *ir.Value {
	for _, n := range g.Nodes {
		if n.Role != "loss" {
			continue
		}
		for _, v := range n.Inputs {
			if slices.Contains(g.Inputs, v) && len(v.Shape) > 0 {
				return v
			}
		}
	}
	return nil
}

// add prices node n into l: the kernel of its whole view and of its
// half-batch view fix a line through the two.
func (l *Layer) add(g *cost.Graph, n *ir.Node, half *cost.Plan, dev cost.Device, batch int64) error {
	root := g.Root(n)
	whole, err := root.KernelSeconds(dev)
	if err != nil {
		return fmt.Errorf("operator %s: %w", n.Name, err)
	}
	if n.Role == "update" {
		l.Update += whole
		return nil
	}
	sub, err := root.Sub(half.Ops[n][0], 2)
	if err != nil {
		return fmt.Errorf("operator %s: %w", n.Name, err)
	}
	halved, err := sub.KernelSeconds(dev)
	if err != nil {
		return fmt.Errorf("operator %s: %w", n.Name, err)
	}
	perSample := max(0, (whole-halved)/float64(batch-batch/2))
	a := Affine{max(0, whole-perSample*float64(batch)), perSample}
	if forwardRole(n) {
		l.Forward = l.Forward.plus(a)
		for _, v := range n.Outputs {
			l.ActivationBytes += float64(g.Bytes(v)) / float64(batch)
		}
	} else {
		l.Backward = l.Backward.plus(a)
	}
	return nil
}

func forwardRole(n *ir.Node) bool { return n.Role == "" || n.Role == "forward" || n.Role == "loss" }

// layerGroups maps each node to a layer's representative group: groups
// with a forward operator are layers; a group without one (an update, a
// gradient sum of an input) joins the layer of the first node whose
// output it reads, or else of the first that reads its outputs.
func layerGroups(g *cost.Graph, c *partition.Coarse) []int {
	forward := map[int]bool{}
	for j, n := range g.IR.Nodes {
		if forwardRole(n) {
			forward[c.Group[j]] = true
		}
	}
	producer := map[*ir.Value]int{}
	readers := map[*ir.Value][]int{}
	for j, n := range g.IR.Nodes {
		for _, v := range n.Outputs {
			producer[v] = j
		}
		for _, v := range n.Inputs {
			readers[v] = append(readers[v], j)
		}
	}
	joined := map[int]int{}
	host := func(gr int) int {
		if forward[gr] {
			return gr
		}
		if h, ok := joined[gr]; ok {
			return h
		}
		joined[gr] = gr // a group no forward operator touches stays its own
		for _, j := range c.Groups[gr] {
			for _, v := range g.IR.Nodes[j].Inputs {
				if p, ok := producer[v]; ok && forward[c.Group[p]] {
					joined[gr] = c.Group[p]
					return joined[gr]
				}
			}
		}
		for _, j := range c.Groups[gr] {
			for _, v := range g.IR.Nodes[j].Outputs {
				for _, r := range readers[v] {
					if forward[c.Group[r]] {
						joined[gr] = c.Group[r]
						return joined[gr]
					}
				}
			}
		}
		return gr
	}
	out := make([]int, len(g.IR.Nodes))
	for j := range out {
		out[j] = host(c.Group[j])
	}
	return out
}

// addParams counts each layer's parameters: every parameter a node of
// the layer reads, once, in the first layer that reads it; a trained
// one's gradient too.
func (ls *Layers) addParams(g *cost.Graph) {
	seen := map[*ir.Value]bool{}
	params := map[*ir.Value]*ir.Param{}
	for _, p := range g.IR.Params {
		params[p.Value] = p
	}
	for li := range ls.Layers {
		l := &ls.Layers[li]
		for _, j := range l.Nodes {
			for _, v := range g.IR.Nodes[j].Inputs {
				p, ok := params[v]
				if !ok || seen[v] {
					continue
				}
				seen[v] = true
				l.StateBytes += g.Bytes(v)
				if p.Trained() && v.DType.IsFloat() {
					l.GradientBytes += g.Bytes(v)
					l.StateBytes += g.Bytes(v)
				}
			}
		}
	}
}

// edges adds an edge wherever a forward node of one layer reads what a
// forward node of another produced.
func (ls *Layers) edges(g *cost.Graph, index map[int]int, group []int) {
	n := len(ls.Layers)
	ls.Succ, ls.Pred = make([][]int, n), make([][]int, n)
	producer := map[*ir.Value]int{}
	for j, node := range g.IR.Nodes {
		if !forwardRole(node) {
			continue
		}
		to := index[group[j]]
		for _, v := range node.Inputs {
			p, ok := producer[v]
			if !ok || p == to {
				continue
			}
			e := [2]int{p, to}
			if _, dup := ls.Bytes[e]; !dup {
				ls.Succ[p] = append(ls.Succ[p], to)
				ls.Pred[to] = append(ls.Pred[to], p)
			}
			ls.Bytes[e] += float64(g.Bytes(v)) / float64(ls.Batch)
		}
		for _, v := range node.Outputs {
			producer[v] = to
		}
	}
}

// condense merges the layers of every cycle of forward edges (groups
// tied by shared weights can close one) into one layer, in topological
// order.
func (ls *Layers) condense() *Layers {
	comp := sccs(ls.Succ)
	out := &Layers{Batch: ls.Batch, Bytes: map[[2]int]float64{}}
	byComp := map[int]int{}
	for li, c := range comp {
		oi, ok := byComp[c]
		if !ok {
			oi = len(out.Layers)
			byComp[c] = oi
			out.Layers = append(out.Layers, Layer{Name: ls.Layers[li].Name})
		}
		out.Layers[oi].merge(&ls.Layers[li])
	}
	n := len(out.Layers)
	out.Succ, out.Pred = make([][]int, n), make([][]int, n)
	for e, bytes := range ls.Bytes {
		a, b := byComp[comp[e[0]]], byComp[comp[e[1]]]
		if a == b {
			continue
		}
		k := [2]int{a, b}
		if _, dup := out.Bytes[k]; !dup {
			out.Succ[a] = append(out.Succ[a], b)
			out.Pred[b] = append(out.Pred[b], a)
		}
		out.Bytes[k] += bytes
	}
	return out.sorted()
}

func (l *Layer) merge(o *Layer) {
	l.Nodes = append(l.Nodes, o.Nodes...)
	slices.Sort(l.Nodes)
	l.Forward = l.Forward.plus(o.Forward)
	l.Backward = l.Backward.plus(o.Backward)
	l.Update += o.Update
	l.GradientBytes += o.GradientBytes
	l.StateBytes += o.StateBytes
	l.ActivationBytes += o.ActivationBytes
}
