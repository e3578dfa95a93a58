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
// delta simulation); the task graph, the same for every plan, is built
// once.
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
	// key holds the nodes' keys one after another, node j's ending at
	// keyEnd[j].
	key    []byte
	keyEnd []int
	// recomputed counts the nodes priced or simulated anew.
	recomputed int
}

// NewDelta is a Delta of g's plans on t.
func (g *Graph) NewDelta(t *Topology) *Delta {
	n := len(g.IR.Nodes)
	return &Delta{g: g, t: t, graph: newTaskGraph(g), bytes: make([]map[string][]int64, n), tasks: make([]map[string]nodeTasks, n)}
}

// Price is Graph.Evaluate and Graph.Simulate of p, each node's key
// built once for both.
func (d *Delta) Price(p *Plan) (*Cost, *Simulation, error) {
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
	d.buildKeys(p)
	c, err := d.g.evaluate(p, func(p *Plan, j int) ([]int64, error) {
		return rememberNode(d.bytes, j, d.keyOf(j), func() ([]int64, error) {
			d.recomputed++
			return d.g.nodeBytes(p, j)
		})
	})
	if err != nil {
		return nil, nil, err
	}
	sim, err := d.g.simulate(p, d.dev, d.links, d.graph, func(p *Plan, j int, dev Device, links []Link) (nodeTasks, error) {
		return rememberNode(d.tasks, j, d.keyOf(j), func() (nodeTasks, error) {
			d.recomputed++
			return d.g.nodeTasks(p, j, dev, links)
		})
	})
	if err != nil {
		return nil, nil, err
	}
	return c, sim, nil
}

// forFactors forgets what plans of other factors cost, and their steps'
// links: they say nothing of these.
func (d *Delta) forFactors(factors []int) {
	if !slices.Equal(d.factors, factors) {
		d.factors, d.links = slices.Clone(factors), nil
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

// buildKeys builds what each node's bytes and tasks depend on in plan
// p (its choices and the layouts of the tensors it reads and writes, at
// every step, each list after its length), one after another in d's
// buffer.
func (d *Delta) buildKeys(p *Plan) {
	d.key, d.keyEnd = d.key[:0], d.keyEnd[:0]
	for _, n := range d.g.IR.Nodes {
		d.key = appendNodeKey(d.key, p, n)
		d.keyEnd = append(d.keyEnd, len(d.key))
	}
}

// keyOf is node j's key (buildKeys).
func (d *Delta) keyOf(j int) []byte {
	start := 0
	if j > 0 {
		start = d.keyEnd[j-1]
	}
	return d.key[start:d.keyEnd[j]]
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
