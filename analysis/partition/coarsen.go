package partition

import (
	"fmt"
	"tofuc/analysis/unionfind"

	"tofuc/analysis/cost"
	"tofuc/lang"
	"tofuc/lang/ir"
)

// Coarse is the coarsened graph (Tofu §3.5.1), read from the graph's
// structure: node roles, backward-to-forward links, gradient links,
// element-wise operators and shared parameters. Names play no part.
type Coarse struct {
	// Groups are the operator groups, each a list of node indices in node
	// order: a forward operator with its backward operators, merged with
	// the operators of consecutive element-wise forward operators, and a
	// tensor's gradient sums with the operator that produced the tensor.
	Groups [][]int
	// Group is each node's group.
	Group []int
	// TensorGroup numbers each tensor's group: a tensor with its
	// gradients and their sums.
	TensorGroup map[*ir.Value]int
	// Repeats are the classes of repeated operators that share weights
	// (unrolled time steps, a block called in a loop with the same
	// parameters): same instance, same parameters, and likewise the
	// backward operators of such a class. Members of a class share their
	// choices and their outputs' splits.
	Repeats [][]int

	tensorVar map[*ir.Value]int
	nTensor   int
	opVar     []int
	nOp       int
}

// Coarsen builds the coarsened graph of g.
func Coarsen(g *cost.Graph) *Coarse {
	nodes := g.IR.Nodes
	c := &Coarse{Group: make([]int, len(nodes)), TensorGroup: map[*ir.Value]int{}}
	c.Repeats = repeats(g)
	c.groups(g)
	c.tensorGroups(g)
	c.ties(g)
	return c
}

// repeats finds classes of forward nodes with the same instance reading
// the same parameters, and the matching backward nodes of their members.
func repeats(g *cost.Graph) [][]int {
	params := map[*ir.Value]bool{}
	for _, p := range g.IR.Params {
		params[p.Value] = true
	}
	type key struct {
		inst   *ir.Instance
		params string
	}
	byKey := map[key][]int{}
	var keys []key
	classOf := map[*ir.Node]int{}
	for j, n := range g.IR.Nodes {
		if n.Forward != nil || n.Role == "gradient sum" || n.Role == "update" {
			continue
		}
		sig := ""
		for _, v := range n.Inputs {
			if params[v] {
				sig += v.Name + "\x00"
			}
		}
		if sig == "" {
			continue
		}
		k := key{n.Inst, sig}
		if byKey[k] == nil {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], j)
	}
	var out [][]int
	for _, k := range keys {
		if m := byKey[k]; len(m) > 1 {
			for _, j := range m {
				classOf[g.IR.Nodes[j]] = len(out)
			}
			out = append(out, m)
		}
	}
	// Backward nodes of a class, by (class, instance, input position).
	type bkey struct {
		class int
		inst  *ir.Instance
	}
	back := map[bkey][]int{}
	var bkeys []bkey
	for j, n := range g.IR.Nodes {
		if n.Forward == nil {
			continue
		}
		cl, ok := classOf[n.Forward]
		if !ok {
			continue
		}
		k := bkey{cl, n.Inst}
		if back[k] == nil {
			bkeys = append(bkeys, k)
		}
		back[k] = append(back[k], j)
	}
	for _, k := range bkeys {
		if m := back[k]; len(m) > 1 {
			out = append(out, m)
		}
	}
	return out
}

// groups builds the operator groups.
func (c *Coarse) groups(g *cost.Graph) {
	nodes := g.IR.Nodes
	uf := unionfind.New(len(nodes))
	producer := map[*ir.Value]int{}
	consumers := map[*ir.Value]int{}
	for j, n := range nodes {
		for _, v := range n.Outputs {
			producer[v] = j
		}
		for _, v := range n.Inputs {
			consumers[v]++
		}
	}
	for j, n := range nodes {
		switch {
		case n.Forward != nil:
			uf.Union(j, g.Index[n.Forward])
		case n.Role == "gradient sum":
			for _, v := range n.Inputs {
				if v.GradOf != nil {
					if p, ok := producer[v.GradOf]; ok {
						uf.Union(j, p)
					}
				}
			}
		case n.Role == "" || n.Role == "forward":
			if !g.Root(n).Elementwise() {
				continue
			}
			for _, v := range n.Inputs {
				p, ok := producer[v]
				if ok && consumers[v] == 1 && isForward(nodes[p]) && g.Root(nodes[p]).Elementwise() {
					uf.Union(j, p)
				}
			}
		}
	}
	for _, r := range c.Repeats {
		for _, j := range r[1:] {
			uf.Union(r[0], j)
		}
	}
	c.Groups, c.Group = uf.Classes()
}

func isForward(n *ir.Node) bool { return n.Role == "" || n.Role == "forward" }

// tensorGroups puts each tensor with its gradients and gradient sums.
func (c *Coarse) tensorGroups(g *cost.Graph) {
	tensors := g.Tensors()
	index := map[*ir.Value]int{}
	for i, v := range tensors {
		index[v] = i
	}
	uf := unionfind.New(len(tensors))
	for i, v := range tensors {
		if v.GradOf != nil {
			if j, ok := index[v.GradOf]; ok {
				uf.Union(i, j)
			}
		}
	}
	for _, n := range g.IR.Nodes {
		if n.Role != "gradient sum" {
			continue
		}
		for _, in := range n.Inputs {
			if j, ok := index[in]; ok {
				for _, out := range n.Outputs {
					uf.Union(index[out], j)
				}
			}
		}
	}
	_, cls := uf.Classes()
	for i, v := range tensors {
		c.TensorGroup[v] = cls[i]
	}
}

// ties gives the search its variables: one per node and one per tensor,
// except that tensors in corresponding places of repeated structure share
// one: the outputs of the members of a class, position by position; their
// inputs read only inside the class (the time step's input); and, to a
// fixed point, the outputs of operators with the same instance and role
// whose inputs are tied position by position (the rest of a time step,
// its backward operators).
func (c *Coarse) ties(g *cost.Graph) {
	tensors := g.Tensors()
	index := map[*ir.Value]int{}
	for i, v := range tensors {
		index[v] = i
	}
	tu := unionfind.New(len(tensors))
	readers := map[*ir.Value][]*ir.Node{}
	for _, n := range g.IR.Nodes {
		for _, v := range n.Inputs {
			readers[v] = append(readers[v], n)
		}
	}
	tieOutputs := func(a, b *ir.Node) bool {
		changed := false
		for o, v := range b.Outputs {
			x, y := index[a.Outputs[o]], index[v]
			changed = changed || tu.Find(x) != tu.Find(y)
			tu.Union(x, y)
		}
		return changed
	}
	for _, r := range c.Repeats {
		first := g.IR.Nodes[r[0]]
		for _, j := range r[1:] {
			tieOutputs(first, g.IR.Nodes[j])
		}
		c.tieInputs(g, r, index, readers, tu)
	}
	tieUpdates(g, index, tu)
	for changed := true; changed; {
		changed = false
		seen := map[string]*ir.Node{}
		for _, n := range g.IR.Nodes {
			key := fmt.Sprintf("%p/%s", n.Inst, n.Role)
			for _, v := range n.Inputs {
				if i, ok := index[v]; ok {
					key += fmt.Sprintf("/%d", tu.Find(i))
				} else {
					key += "/" + v.Name
				}
			}
			if m, ok := seen[key]; ok {
				changed = tieOutputs(m, n) || changed
			} else {
				seen[key] = n
			}
		}
	}
	_, tcls := tu.Classes()
	c.tensorVar = map[*ir.Value]int{}
	for i, v := range tensors {
		c.tensorVar[v] = tcls[i]
		c.nTensor = max(c.nTensor, tcls[i]+1)
	}
	c.opVar = make([]int, len(g.IR.Nodes))
	for j := range c.opVar {
		c.opVar[j] = j
	}
	c.nOp = len(g.IR.Nodes)
}

// tieUpdates ties each value an optimizer update computes to the one it
// replaces (inputs: the parameter, its gradient, then its states;
// outputs: the parameter's next value, then the states'): the next
// training step reads it where this one read the parameter, so the two
// are laid out alike. The other nodes of the update role (gradient
// clipping's, a schedule's) read no parameter first, and are not tied
// so: a clipped gradient is no parameter's gradient, and cannot be held
// as partial sums as the gradient it scales can.
func tieUpdates(g *cost.Graph, index map[*ir.Value]int, tu *unionfind.Sets) {
	params := map[*ir.Value]bool{}
	for _, p := range g.IR.Params {
		params[p.Value] = true
	}
	for _, n := range g.IR.Nodes {
		if n.Role != "update" || len(n.Inputs) == 0 || !params[n.Inputs[0]] {
			continue
		}
		for o, v := range n.Outputs {
			in := o
			if o > 0 {
				in = o + 1
			}
			if in < len(n.Inputs) && n.Inputs[in].Const == nil && lang.ShapeEqual(n.Inputs[in].Shape, v.Shape) {
				tu.Union(index[n.Inputs[in]], index[v])
			}
		}
	}
}

// tieInputs ties the inputs of a class's members at each position when
// every one of them is read only by the class and its backward operators.
func (c *Coarse) tieInputs(g *cost.Graph, class []int, index map[*ir.Value]int, readers map[*ir.Value][]*ir.Node, tu *unionfind.Sets) {
	in := map[*ir.Node]bool{}
	for _, j := range class {
		in[g.IR.Nodes[j]] = true
	}
	inside := func(v *ir.Value) bool {
		for _, n := range readers[v] {
			if !in[n] && (n.Forward == nil || !in[n.Forward]) {
				return false
			}
		}
		return true
	}
	first := g.IR.Nodes[class[0]]
	for i := range first.Inputs {
		ok := true
		for _, j := range class {
			v := g.IR.Nodes[j].Inputs[i]
			_, isTensor := index[v]
			ok = ok && isTensor && inside(v)
		}
		if !ok {
			continue
		}
		for _, j := range class[1:] {
			tu.Union(index[first.Inputs[i]], index[g.IR.Nodes[j].Inputs[i]])
		}
	}
}
