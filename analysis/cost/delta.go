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
	key   []byte
	// recomputed counts the nodes priced or simulated anew.
	recomputed int
}

// NewDelta is a Delta of g's plans on t.
func (g *Graph) NewDelta(t *Topology) *Delta {
	n := len(g.IR.Nodes)
	return &Delta{g: g, t: t, graph: newTaskGraph(g), bytes: make([]map[string][]int64, n), tasks: make([]map[string]nodeTasks, n)}
}

// Evaluate is Graph.Evaluate of p.
func (d *Delta) Evaluate(p *Plan) (*Cost, error) {
	d.forFactors(p.Factors)
	return d.g.evaluate(p, func(p *Plan, j int) ([]int64, error) {
		return rememberNode(d.bytes, j, d.nodeKey(p, j), func() ([]int64, error) {
			d.recomputed++
			return d.g.nodeBytes(p, j)
		})
	})
}

// Simulate is Graph.Simulate of p.
func (d *Delta) Simulate(p *Plan) (*Simulation, error) {
	d.forFactors(p.Factors)
	if d.links == nil {
		var err error
		if d.dev, d.links, err = d.t.stepLinks(p.Factors); err != nil {
			return nil, err
		}
	}
	return d.g.simulate(p, d.dev, d.links, d.graph, func(p *Plan, j int, dev Device, links []Link) (nodeTasks, error) {
		return rememberNode(d.tasks, j, d.nodeKey(p, j), func() (nodeTasks, error) {
			d.recomputed++
			return d.g.nodeTasks(p, j, dev, links)
		})
	})
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

// nodeKey is what node j's bytes and tasks depend on in plan p (its
// choices and the layouts of the tensors it reads and writes, at every
// step, each list after its length), in d's buffer.
func (d *Delta) nodeKey(p *Plan, j int) []byte {
	n := d.g.IR.Nodes[j]
	d.key = appendNodeKey(d.key[:0], p, n)
	return d.key
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
