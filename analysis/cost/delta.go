package cost

import (
	"encoding/binary"
	"slices"

	"tofuc/lang/ir"
)

// A Delta prices and simulates plans of one graph on one topology, one
// after another (a search's proposals), as Graph.Evaluate and
// Graph.Simulate do and to the bit: it recomputes a node's bytes and
// tasks only where its operator's choices or its tensors' layouts differ
// from every plan it saw before, and reuses them elsewhere (FlexFlow's
// delta simulation); told which nodes changed since the plan it priced
// last, it looks at those alone. The task graph, the same for every
// plan, is built once.
type Delta struct {
	g     *Graph
	t     *Topology
	graph *taskGraph
	// bytes and tasks hold, per node, what every configuration of it
	// seen costs, by nodeKey; factors are the plans' they were priced
	// for.
	bytes   []map[string][]int64
	tasks   []map[string]nodeTasks
	factors []int
	// dev and links are the plans' device and steps' links (stepLinks;
	// nil: not found yet).
	dev   Device
	links []Link
	// curBytes and curTasks are each node's in the plan priced last
	// (when curOK).
	curBytes [][]int64
	curTasks []nodeTasks
	curOK    bool
	key      []byte
	// recomputed counts the nodes priced or simulated anew.
	recomputed int
}

// NewDelta is a Delta of g's plans on t.
func (g *Graph) NewDelta(t *Topology) *Delta {
	n := len(g.IR.Nodes)
	return &Delta{g: g, t: t, graph: newTaskGraph(g), bytes: make([]map[string][]int64, n), tasks: make([]map[string]nodeTasks, n),
		curBytes: make([][]int64, n), curTasks: make([]nodeTasks, n)}
}

// Price is Graph.Evaluate and Graph.Simulate of p. changed lists the
// nodes whose choices or tensors' layouts may differ from the plan
// priced last (nil: any may).
func (d *Delta) Price(p *Plan, changed []*ir.Node) (*Cost, *Simulation, error) {
	c, sim, err := d.price(p, changed)
	d.curOK = err == nil
	return c, sim, err
}

func (d *Delta) price(p *Plan, changed []*ir.Node) (*Cost, *Simulation, error) {
	if err := d.g.checkPlan(p); err != nil {
		return nil, nil, err
	}
	d.forFactors(p.Factors)
	if d.links == nil {
		var err error
		if d.dev, d.links, err = d.t.stepLinks(p.Factors); err != nil {
			return nil, nil, err
		}
	}
	if !d.curOK || changed == nil {
		changed = d.g.IR.Nodes
	}
	for _, n := range changed {
		if err := d.refresh(p, d.g.Index[n]); err != nil {
			return nil, nil, err
		}
	}
	c, err := d.g.evaluate(p, func(_ *Plan, j int) ([]int64, error) { return d.curBytes[j], nil })
	if err != nil {
		return nil, nil, err
	}
	sim, err := d.g.simulate(p, d.dev, d.links, d.graph, func(_ *Plan, j int, _ Device, _ []Link) (nodeTasks, error) {
		return d.curTasks[j], nil
	})
	if err != nil {
		return nil, nil, err
	}
	return c, sim, nil
}

// refresh finds node j's bytes and tasks in plan p: remembered where its
// configuration (its choices and the layouts of the tensors it reads
// and writes, at every step, each list after its length) was seen,
// else computed and remembered.
func (d *Delta) refresh(p *Plan, j int) error {
	d.key = appendNodeKey(d.key[:0], p, d.g.IR.Nodes[j])
	bytes, err := rememberNode(d.bytes, j, d.key, func() ([]int64, error) {
		d.recomputed++
		return d.g.nodeBytes(p, j)
	})
	if err != nil {
		return err
	}
	tasks, err := rememberNode(d.tasks, j, d.key, func() (nodeTasks, error) {
		d.recomputed++
		return d.g.nodeTasks(p, j, d.dev, d.links)
	})
	if err != nil {
		return err
	}
	d.curBytes[j], d.curTasks[j] = bytes, tasks
	return nil
}

// forFactors forgets what plans of other factors cost, and their steps'
// links: they say nothing of these.
func (d *Delta) forFactors(factors []int) {
	if !slices.Equal(d.factors, factors) {
		d.factors, d.links, d.curOK = slices.Clone(factors), nil, false
		clear(d.bytes)
		clear(d.tasks)
	}
}

// rememberNode is memo[j][key], computed and kept where it is not known
// (errors are not kept).
func rememberNode[T any](memo []map[string]T, j int, key []byte, compute func() (T, error)) (T, error) {
	if x, ok := memo[j][string(key)]; ok {
		return x, nil
	}
	x, err := compute()
	if err != nil {
		return x, err
	}
	if memo[j] == nil {
		memo[j] = map[string]T{}
	}
	memo[j][string(key)] = x
	return x, nil
}

// appendNodeKey appends node n's choices and the layouts of the tensors
// it reads and writes in plan p to buf.
func appendNodeKey(buf []byte, p *Plan, n *ir.Node) []byte {
	ops := p.Ops[n]
	buf = binary.AppendUvarint(buf, uint64(len(ops)))
	for _, c := range ops {
		buf = binary.AppendVarint(buf, int64(c))
	}
	for _, vs := range [][]*ir.Value{n.Inputs, n.Outputs} {
		buf = binary.AppendUvarint(buf, uint64(len(vs)))
		for _, v := range vs {
			layouts := p.Tensors[v]
			buf = binary.AppendUvarint(buf, uint64(len(layouts)))
			for _, d := range layouts {
				buf = binary.AppendVarint(buf, int64(d))
			}
		}
	}
	return buf
}
