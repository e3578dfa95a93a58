package search

import (
	"fmt"
	"hash/fnv"
	"sort"
	"strings"
	"sync"

	"tofuc/lang/ir"
)

// clone copies g's node list and node structs; values and instances are
// shared (they are never changed in place).
func clone(g *ir.Graph) *ir.Graph {
	out := *g
	out.Nodes = make([]*ir.Node, len(g.Nodes))
	for i, n := range g.Nodes {
		c := *n
		c.Inputs = append([]*ir.Value(nil), n.Inputs...)
		out.Nodes[i] = &c
	}
	out.Outputs = append([]*ir.Value(nil), g.Outputs...)
	return &out
}

// replaceUses makes every consumer of old (and the graph outputs) read new.
func replaceUses(g *ir.Graph, old, new *ir.Value) {
	for _, n := range g.Nodes {
		for i, v := range n.Inputs {
			if v == old {
				n.Inputs[i] = new
			}
		}
	}
	for i, v := range g.Outputs {
		if v == old {
			g.Outputs[i] = new
		}
	}
}

// tidy removes dead nodes, merges nodes computing the same thing (common
// subexpressions) and sorts the nodes topologically; it fails on a cycle.
func tidy(g *ir.Graph) error {
	for {
		if err := topoSort(g); err != nil {
			return err
		}
		deadCode(g)
		if !mergeCommon(g) {
			return nil
		}
	}
}

func producers(g *ir.Graph) map[*ir.Value]*ir.Node {
	out := map[*ir.Value]*ir.Node{}
	for _, n := range g.Nodes {
		for _, v := range n.Outputs {
			out[v] = n
		}
	}
	return out
}

// topoSort orders the nodes so that producers come first (ties keep the
// current order).
func topoSort(g *ir.Graph) error {
	prod := producers(g)
	state := map[*ir.Node]int{} // 1 visiting, 2 done
	var order []*ir.Node
	var visit func(n *ir.Node) error
	visit = func(n *ir.Node) error {
		switch state[n] {
		case 1:
			return fmt.Errorf("the rewrite makes a cycle through %s", n.Name)
		case 2:
			return nil
		}
		state[n] = 1
		for _, v := range n.Inputs {
			if p := prod[v]; p != nil {
				if err := visit(p); err != nil {
					return err
				}
			}
		}
		state[n] = 2
		order = append(order, n)
		return nil
	}
	for _, n := range g.Nodes {
		if err := visit(n); err != nil {
			return err
		}
	}
	g.Nodes = order
	return nil
}

// deadCode drops nodes none of whose outputs is used.
func deadCode(g *ir.Graph) {
	live := map[*ir.Value]bool{}
	for _, v := range g.Outputs {
		live[v] = true
	}
	var kept []*ir.Node
	for i := len(g.Nodes) - 1; i >= 0; i-- {
		n := g.Nodes[i]
		used := false
		for _, v := range n.Outputs {
			used = used || live[v]
		}
		if !used {
			continue
		}
		for _, v := range n.Inputs {
			live[v] = true
		}
		kept = append(kept, n)
	}
	for i, j := 0, len(kept)-1; i < j; i, j = i+1, j-1 {
		kept[i], kept[j] = kept[j], kept[i]
	}
	g.Nodes = kept
}

// mergeCommon merges the first pair of nodes with the same operator,
// attributes and inputs; it reports whether it merged one.
func mergeCommon(g *ir.Graph) bool {
	seen := map[string]*ir.Node{}
	for _, n := range g.Nodes {
		k := nodeKey(n, func(v *ir.Value) string { return fmt.Sprintf("%p", v) })
		if m, ok := seen[k]; ok {
			for i, v := range n.Outputs {
				replaceUses(g, v, m.Outputs[i])
			}
			deadCode(g)
			return true
		}
		seen[k] = n
	}
	return false
}

// instKeys caches each instance's operator and attributes as text
// (instances are shared by the graphs of a search and never change).
var instKeys sync.Map

func nodeKey(n *ir.Node, val func(*ir.Value) string) string {
	var b strings.Builder
	k, ok := instKeys.Load(n.Inst)
	if !ok {
		var ib strings.Builder
		ib.WriteString(n.Inst.Op)
		for _, a := range n.Inst.Attrs {
			ib.WriteString("|" + a.Name + "=" + a.Value.String())
		}
		k, _ = instKeys.LoadOrStore(n.Inst, ib.String())
	}
	b.WriteString(k.(string))
	for _, v := range n.Inputs {
		b.WriteString("|" + val(v))
	}
	return b.String()
}

// canonicalHash identifies a graph by what it computes, independently of
// node names and order: each value hashes its producer's operator,
// attributes and input hashes.
func canonicalHash(g *ir.Graph) uint64 {
	prod := producers(g)
	memo := map[*ir.Value]string{}
	var val func(v *ir.Value) string
	val = func(v *ir.Value) string {
		if h, ok := memo[v]; ok {
			return h
		}
		var s string
		switch n := prod[v]; {
		case n != nil:
			idx := 0
			for i, o := range n.Outputs {
				if o == v {
					idx = i
				}
			}
			s = hashString(fmt.Sprintf("%s#%d", nodeKey(n, val), idx))
		case v.Const != nil:
			s = fmt.Sprintf("c:%s:%v:%v", v.DType, v.Const.Float, v.Const.Int)
		default:
			s = "in:" + v.Name
		}
		memo[v] = s
		return s
	}
	var outs []string
	for _, v := range g.Outputs {
		outs = append(outs, val(v))
	}
	return fnv64(strings.Join(outs, ";"))
}

func hashString(s string) string { return fmt.Sprintf("%016x", fnv64(s)) }

func fnv64(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// consumers maps each value to the nodes that read it, in node order.
func consumers(g *ir.Graph) map[*ir.Value][]*ir.Node {
	out := map[*ir.Value][]*ir.Node{}
	for _, n := range g.Nodes {
		for _, v := range n.Inputs {
			out[v] = append(out[v], n)
		}
	}
	return out
}

func sortedNames(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}
