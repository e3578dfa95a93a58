package stages

import (
	"fmt"
	"slices"

	"tofuc/analysis/cost"
	"tofuc/analysis/partition"
	"tofuc/analysis/unionfind"
	"tofuc/lang/ir"
)

// Layer is a unit of the stage partitioner: a forward operator group of
// the coarsened graph (partition.Coarsen) with its backward operators,
// gradient sums and the updates of its parameters.
type Layer struct {
	Name  string // its first forward node's
	Nodes []int  // indices into the graph's nodes, in node order
	Work
}

// Work is what some layers cost a stage.
type Work struct {
	// Forward and Backward are the kernels' seconds per micro-batch of s
	// samples on one device; Update the per-step seconds (the
	// optimizer's, once per step).
	Forward, Backward Affine
	Update            float64
	// GradientBytes are the trained parameters' gradients, all-reduced
	// once per step over a stage's devices; StateBytes what a replica
	// keeps whole: the parameters the layers' nodes read (trained ones,
	// buffers, and the optimizer's states where the graph holds them as
	// parameters) and the trained ones' gradients.
	GradientBytes, StateBytes int64
	// ActivationBytes are the forward outputs per sample (each output's
	// bytes over the batch), kept from a micro-batch's forward pass to
	// its backward pass.
	ActivationBytes float64
}

func (w Work) plus(o Work) Work {
	return Work{w.Forward.plus(o.Forward), w.Backward.plus(o.Backward), w.Update + o.Update,
		w.GradientBytes + o.GradientBytes, w.StateBytes + o.StateBytes, w.ActivationBytes + o.ActivationBytes}
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
	// Succ and Pred are the forward edges between layers.
	Succ, Pred [][]int
	// Sends are the values a layer's forward nodes produce and other
	// layers' forward nodes read (their gradients flow back).
	Sends []Send
	// Batch is the samples of one step; the graph's other extents stay
	// whole.
	Batch int64
}

// Send is a value from one layer to others: its bytes per sample.
type Send struct {
	From      int
	To        []int // distinct, sorted
	PerSample float64
}

// NewLayers reads the layers of training graph g, their kernels priced
// on device dev at the whole batch and at half of it (the split data
// parallelism makes of every operator), which fixes each layer's affine
// seconds. Groups that read the same parameter are one layer (its
// gradient is summed there), and so are the groups of a cycle that
// joining them closes.
func NewLayers(g *cost.Graph, dev cost.Device) (*Layers, error) {
	batch, half, err := halfBatch(g)
	if err != nil {
		return nil, err
	}
	class := layerClasses(g)
	ls := &Layers{Batch: batch}
	index := map[int]int{} // class → layer
	for j, n := range g.IR.Nodes {
		li, ok := index[class[j]]
		if !ok {
			li = len(ls.Layers)
			index[class[j]] = li
			ls.Layers = append(ls.Layers, Layer{Name: n.Name})
		}
		l := &ls.Layers[li]
		l.Nodes = append(l.Nodes, j)
		if err := l.add(g, n, half, dev, batch); err != nil {
			return nil, err
		}
	}
	for _, l := range ls.Layers {
		if !slices.ContainsFunc(l.Nodes, func(j int) bool { return forwardRole(g.IR.Nodes[j]) }) {
			return nil, fmt.Errorf("operator %s belongs to no forward operator's layer", g.IR.Nodes[l.Nodes[0]].Name)
		}
	}
	ls.addParams(g)
	ls.sends(g, func(j int) int { return index[class[j]] })
	return ls.condense(), nil
}

// halfBatch is the step's batch and every node's choice in the plan of
// data parallelism over two devices. The batch is the first extent of
// the input the loss reads (its labels or targets). Data parallelism
// must split every input that has an extent of that size along one,
// as it splits the samples; an input without one (a seed, a per-feature
// scale) is whole on every device. And the samples must be independent:
// no forward operator (the loss aside) may fetch another device's part
// of a batched value when the batch is split, as an RNN's step would
// its input's if its time steps were taken for samples (batch
// statistics, whole on every device, may be fetched: micro-batches
// then normalise by their own, as GPipe's do).
func halfBatch(g *cost.Graph) (int64, *cost.Plan, error) {
	labels := lossInput(g.IR)
	if labels == nil {
		return 0, nil, fmt.Errorf("no loss reads per-sample labels or targets: pipeline plans need the batch of a training graph")
	}
	batch := g.Shapes[labels][0]
	if batch < 2 {
		return 0, nil, fmt.Errorf("the batch is %d: there are no micro-batches to pipeline", batch)
	}
	dp, err := partition.Baseline(g, "data_parallel", 2, partition.Options{})
	if err != nil {
		return 0, nil, err
	}
	var whole []*ir.Node // the readers of inputs made whole
	for _, in := range g.IR.Inputs {
		d := dp.Plan.Tensors[in][0]
		switch {
		case splitAlongBatch(g, dp.Plan, in, batch):
		case !slices.Contains(g.Shapes[in], batch):
			dp.Plan.Tensors[in] = []int{cost.Replicated}
			whole = append(whole, readersOf(g.IR, in)...)
		default:
			return 0, nil, fmt.Errorf("data parallelism splits the input %s %v along dimension %d, not along its batch of %d (the first extent of %s): pipeline plans need the batch first splittable", in.Name, g.Shapes[in], d, batch, labels.Name)
		}
	}
	if err := partition.Rechoose(g, dp.Plan, whole); err != nil {
		return 0, nil, err
	}
	for _, n := range g.IR.Nodes {
		if n.Role != "" && n.Role != "forward" {
			continue
		}
		for i, bytes := range g.FirstFetches(dp.Plan, n) {
			if v := n.Inputs[i]; bytes > 0 && splitAlongBatch(g, dp.Plan, v, batch) {
				return 0, nil, fmt.Errorf("operator %s reads other samples' part of %s %v when the batch of %d (the first extent of %s) is split: pipeline plans need samples computed apart", n.Name, v.Name, g.Shapes[v], batch, labels.Name)
			}
		}
	}
	return batch, dp.Plan, nil
}

// splitAlongBatch says whether plan p splits v along an extent of the
// batch's size, as it splits a batched value (a batch statistic, held
// whole or as partial sums, is not split so).
func splitAlongBatch(g *cost.Graph, p *cost.Plan, v *ir.Value, batch int64) bool {
	d := p.Tensors[v][0]
	return d >= 0 && g.Shapes[v][d] == batch
}

// readersOf are the nodes that read v.
func readersOf(g *ir.Graph, v *ir.Value) []*ir.Node {
	var out []*ir.Node
	for _, n := range g.Nodes {
		if slices.Contains(n.Inputs, v) {
			out = append(out, n)
		}
	}
	return out
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
	// The half view is the larger part, ⌈batch/2⌉ samples: the
	// difference is ⌊batch/2⌋ samples' work.
	perSample := max(0, (whole-halved)/float64(batch/2))
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

// layerClasses numbers each node's layer: the coarsened graph's groups,
// a group without a forward operator (an update, a gradient sum) joined
// to the group of the first node whose output it reads (else of the
// first that reads its outputs), and groups whose nodes read the same
// parameter joined.
func layerClasses(g *cost.Graph) []int {
	c := partition.Coarsen(g)
	sets := unionfind.New(len(c.Groups))
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
	forward := make([]bool, len(c.Groups))
	for j, n := range g.IR.Nodes {
		forward[c.Group[j]] = forward[c.Group[j]] || forwardRole(n)
	}
	for gr, members := range c.Groups {
		if !forward[gr] {
			if other, ok := neighbour(g, members, gr, c.Group, producer, readers); ok {
				sets.Union(gr, other)
			}
		}
	}
	firstReader := map[*ir.Value]int{}
	for _, p := range g.IR.Params {
		for _, j := range readers[p.Value] {
			if r, ok := firstReader[p.Value]; ok {
				sets.Union(c.Group[r], c.Group[j])
			} else {
				firstReader[p.Value] = j
			}
		}
	}
	_, groupClass := sets.Classes()
	out := make([]int, len(g.IR.Nodes))
	for j := range out {
		out[j] = groupClass[c.Group[j]]
	}
	return out
}

// neighbour is the group of the first node another group's members read
// from, or else of the first that reads their outputs.
func neighbour(g *cost.Graph, members []int, self int, group []int, producer map[*ir.Value]int, readers map[*ir.Value][]int) (int, bool) {
	for _, j := range members {
		for _, v := range g.IR.Nodes[j].Inputs {
			if p, ok := producer[v]; ok && group[p] != self {
				return group[p], true
			}
		}
	}
	for _, j := range members {
		for _, v := range g.IR.Nodes[j].Outputs {
			for _, r := range readers[v] {
				if group[r] != self {
					return group[r], true
				}
			}
		}
	}
	return 0, false
}

// addParams counts each layer's parameters: every parameter its nodes
// read, once (all of a parameter's readers are in one layer:
// layerClasses); a trained one's gradient too; and the graph's outputs
// its nodes compute (each parameter's next value and its optimizer
// states', which a compiled plan holds beside the parameters until the
// step ends).
func (ls *Layers) addParams(g *cost.Graph) {
	seen := map[*ir.Value]bool{}
	params := map[*ir.Value]*ir.Param{}
	for _, p := range g.IR.Params {
		params[p.Value] = p
	}
	outputs := map[*ir.Value]bool{}
	for _, v := range g.IR.Outputs {
		outputs[v] = true
	}
	for li := range ls.Layers {
		l := &ls.Layers[li]
		for _, j := range l.Nodes {
			for _, v := range g.IR.Nodes[j].Outputs {
				if outputs[v] {
					l.StateBytes += g.Bytes(v)
				}
			}
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

// sends lists, per value a forward node of one layer produces, the
// other layers whose forward nodes read it, and adds their edges.
func (ls *Layers) sends(g *cost.Graph, layerOf func(node int) int) {
	producer := map[*ir.Value]int{}
	readers := map[*ir.Value][]int{}
	var order []*ir.Value
	for j, node := range g.IR.Nodes {
		if !forwardRole(node) {
			continue
		}
		to := layerOf(j)
		for _, v := range node.Inputs {
			if p, ok := producer[v]; ok && p != to && !slices.Contains(readers[v], to) {
				if readers[v] == nil {
					order = append(order, v)
				}
				readers[v] = append(readers[v], to)
			}
		}
		for _, v := range node.Outputs {
			producer[v] = to
		}
	}
	for _, v := range order {
		slices.Sort(readers[v])
		ls.Sends = append(ls.Sends, Send{From: producer[v], To: readers[v], PerSample: float64(g.Bytes(v)) / float64(ls.Batch)})
	}
	ls.link()
}

// link derives the edges from the sends.
func (ls *Layers) link() {
	n := len(ls.Layers)
	ls.Succ, ls.Pred = make([][]int, n), make([][]int, n)
	for _, s := range ls.Sends {
		for _, to := range s.To {
			if !slices.Contains(ls.Succ[s.From], to) {
				ls.Succ[s.From] = append(ls.Succ[s.From], to)
				ls.Pred[to] = append(ls.Pred[to], s.From)
			}
		}
	}
	for i := range n {
		slices.Sort(ls.Succ[i])
		slices.Sort(ls.Pred[i])
	}
}

// condense merges the layers of every cycle of forward edges (joining
// groups by a shared parameter can close one) into one layer, in
// topological order.
func (ls *Layers) condense() *Layers {
	comp := sccs(ls.Succ)
	out := &Layers{Batch: ls.Batch}
	byComp := map[int]int{}
	for li, c := range comp {
		oi, ok := byComp[c]
		if !ok {
			oi = len(out.Layers)
			byComp[c] = oi
			out.Layers = append(out.Layers, Layer{Name: ls.Layers[li].Name})
		}
		o := &out.Layers[oi]
		o.Nodes = append(o.Nodes, ls.Layers[li].Nodes...)
		slices.Sort(o.Nodes)
		o.Work = o.Work.plus(ls.Layers[li].Work)
	}
	for _, s := range ls.Sends {
		from := byComp[comp[s.From]]
		var to []int
		for _, t := range s.To {
			if t := byComp[comp[t]]; t != from && !slices.Contains(to, t) {
				to = append(to, t)
			}
		}
		if len(to) > 0 {
			slices.Sort(to)
			out.Sends = append(out.Sends, Send{From: from, To: to, PerSample: s.PerSample})
		}
	}
	out.link()
	return out.sorted()
}
