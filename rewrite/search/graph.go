package search

import (
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"

	"tofuc/lang"
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
	out := make(map[*ir.Value]*ir.Node, len(g.Nodes))
	for _, n := range g.Nodes {
		for _, v := range n.Outputs {
			out[v] = n
		}
	}
	return out
}

// edges is the number of g's node inputs and outputs, the most values a
// map over g's values holds: maps are made that large (a search makes
// them for each of thousands of graphs, and growing them cost more).
func edges(g *ir.Graph) int {
	n := len(g.Outputs)
	for _, x := range g.Nodes {
		n += len(x.Inputs) + len(x.Outputs)
	}
	return n
}

// topoSort orders the nodes so that producers come first (ties keep the
// current order).
func topoSort(g *ir.Graph) error {
	prod := producers(g)
	state := make(map[*ir.Node]int, len(g.Nodes)) // 1 visiting, 2 done
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
	live := make(map[*ir.Value]bool, edges(g))
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
	seen := make(map[uint64][]*ir.Node, len(g.Nodes))
	ids := make(map[*ir.Value]uint64, edges(g))
	for _, n := range g.Nodes {
		k := instHash(n.Inst)
		for _, v := range n.Inputs {
			id, ok := ids[v]
			if !ok {
				id = uint64(len(ids) + 1)
				ids[v] = id
			}
			k = mix(k, id)
		}
		for _, m := range seen[k] {
			if instKey(m.Inst) == instKey(n.Inst) && slices.Equal(m.Inputs, n.Inputs) {
				for i, v := range n.Outputs {
					replaceUses(g, v, m.Outputs[i])
				}
				deadCode(g)
				return true
			}
		}
		seen[k] = append(seen[k], n)
	}
	return false
}

// instKeys caches each instance's operator and attributes as text, and
// instHashes that text hashed (instances are shared by the graphs of a
// search and never change).
var instKeys, instHashes sync.Map

// instKey is inst's operator and attributes as text: instances with
// equal keys compute the same function of their inputs.
func instKey(inst *ir.Instance) string {
	if k, ok := instKeys.Load(inst); ok {
		return k.(string)
	}
	var b strings.Builder
	b.WriteString(inst.Op)
	for _, a := range inst.Attrs {
		b.WriteString("|" + a.Name + "=" + a.Value.String())
	}
	k, _ := instKeys.LoadOrStore(inst, b.String())
	return k.(string)
}

// instHash is instKey(inst) hashed.
func instHash(inst *ir.Instance) uint64 {
	if h, ok := instHashes.Load(inst); ok {
		return h.(uint64)
	}
	h, _ := instHashes.LoadOrStore(inst, fnv64(instKey(inst)))
	return h.(uint64)
}

// mix combines hash h with x, in order.
func mix(h, x uint64) uint64 {
	h ^= x
	h *= 0xbf58476d1ce4e5b9
	return h ^ h>>31
}

// canonicalHash identifies a graph by what it computes, independently of
// node names and order: each value hashes its producer's operator,
// attributes, inputs' hashes and output index; a constant its dtype and
// value, an input or parameter its name. Only what the outputs read
// counts, so tidying a graph keeps its hash (merged nodes hash alike);
// ok is false when the outputs read a cycle.
func canonicalHash(g *ir.Graph) (h uint64, ok bool) {
	prod := producers(g)
	memo := make(map[*ir.Value]uint64, edges(g))
	visiting := map[*ir.Node]bool{}
	var val func(v *ir.Value) uint64
	val = func(v *ir.Value) uint64 {
		if h, ok := memo[v]; ok {
			return h
		}
		var h uint64
		switch n := prod[v]; {
		case n != nil:
			if visiting[n] {
				ok = false
				return 0
			}
			visiting[n] = true
			h = instHash(n.Inst)
			for _, in := range n.Inputs {
				h = mix(h, val(in))
			}
			h = mix(h, uint64(slices.Index(n.Outputs, v)))
			delete(visiting, n)
		case v.Const != nil:
			h = mix(mix(fnv64("c:"+v.DType.String()), math.Float64bits(v.Const.Float)), uint64(v.Const.Int))
		default:
			h = fnv64("in:" + v.Name)
		}
		memo[v] = h
		return h
	}
	ok = true
	h = uint64(len(g.Outputs))
	for _, v := range g.Outputs {
		h = mix(h, val(v))
	}
	return h, ok
}

func fnv64(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// around is the set of the names of g's nodes within hops of a node
// named in seeds, those included: a hop joins a node to the producers of
// its inputs and the consumers of its outputs and, with siblings, to the
// other consumers of its inputs (which a concat rule fuses).
func around(g *ir.Graph, seeds map[string]bool, hops int, siblings bool) map[string]bool {
	prod, cons := producers(g), consumers(g)
	out := map[string]bool{}
	var frontier []*ir.Node
	for _, n := range g.Nodes {
		if seeds[n.Name] {
			out[n.Name] = true
			frontier = append(frontier, n)
		}
	}
	for range hops {
		var next []*ir.Node
		reach := func(m *ir.Node) {
			if !out[m.Name] {
				out[m.Name] = true
				next = append(next, m)
			}
		}
		for _, n := range frontier {
			for _, v := range n.Inputs {
				if p := prod[v]; p != nil {
					reach(p)
				}
				if siblings {
					for _, c := range cons[v] {
						reach(c)
					}
				}
			}
			for _, v := range n.Outputs {
				for _, c := range cons[v] {
					reach(c)
				}
			}
		}
		frontier = next
	}
	return out
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

// keepOutputNames returns g with the outputs named as orig's: a rewrite
// at an output gives it the value its rule made (rw3.0), and runtimes
// and users find outputs by name (a model's y1, chained matrix products
// rewritten, was asked for and reported never computed). The value a
// node makes takes the output's name; an output that is an input, a
// parameter or another output's value is copied by an identity node of
// that name. An intermediate value that holds the name already (an
// output's old value, still read) is renamed first.
func (rw *rewriter) keepOutputNames(orig, g *ir.Graph) (*ir.Graph, error) {
	out := clone(g)
	byName := map[string]*ir.Value{}
	for _, v := range out.Inputs {
		byName[v.Name] = v
	}
	for _, p := range out.Params {
		byName[p.Value.Name] = p.Value
	}
	producer := map[*ir.Value]*ir.Node{}
	for _, n := range out.Nodes {
		for _, v := range n.Outputs {
			byName[v.Name], producer[v] = v, n
		}
	}
	rename := func(v *ir.Value, name string) *ir.Value {
		named := &ir.Value{Name: name, DType: v.DType, Shape: v.Shape}
		n := producer[v]
		n.Outputs = slices.Clone(n.Outputs)
		n.Outputs[slices.Index(n.Outputs, v)] = named
		replaceUses(out, v, named)
		producer[named], byName[name] = n, named
		return named
	}
	for i, v := range out.Outputs {
		want := orig.Outputs[i].Name
		if v.Name == want {
			continue
		}
		if other := byName[want]; other != nil {
			if producer[other] == nil || slices.Contains(out.Outputs, other) {
				continue // an input's or another output's name: kept as it is
			}
			fresh := want + "'"
			for byName[fresh] != nil {
				fresh += "'"
			}
			rename(other, fresh)
		}
		if producer[v] != nil && !outputTwice(out, v) {
			rename(v, want)
			continue
		}
		id, err := rw.node("identity", nil, []*ir.Value{v}, lang.Pos{})
		if err != nil {
			return nil, err
		}
		named := &ir.Value{Name: want, DType: v.DType, Shape: v.Shape}
		id.Outputs[0] = named
		out.Nodes = append(out.Nodes, id)
		out.Outputs[i] = named
		producer[named], byName[want] = id, named
	}
	return out, nil
}

// outputTwice reports whether v is more than one of g's outputs.
func outputTwice(g *ir.Graph, v *ir.Value) bool {
	count := 0
	for _, o := range g.Outputs {
		if o == v {
			count++
		}
	}
	return count > 1
}
