package stages

import "math/big"

// spNode is a node of the layers' series-parallel decomposition: a
// layer, a series of parts that run one after another, or parallel
// parts that share no edge.
type spNode struct {
	layer    int // a leaf's layer; -1 for a series or a parallel node
	parallel bool
	children []*spNode
	layers   []int // every layer under it, in topological order
	work     *Work // of its layers, once priced (planner.workOf)
}

// decompose is the series-parallel decomposition of the layers set (in
// topological order): parallel parts where the set falls apart into
// weakly connected components; a series split at every articulation
// layer (one that every other layer of the set reaches or is reached
// from); and a part that is neither, linearised in topological order,
// as a sequential pipeline would (GraphPipe decomposes the same way and
// linearises what does not decompose).
func (ls *Layers) decompose(set []int) *spNode {
	if len(set) == 1 {
		return &spNode{layer: set[0], layers: set}
	}
	node := &spNode{layer: -1, layers: set}
	if parts := ls.components(set); len(parts) > 1 {
		node.parallel = true
		for _, p := range parts {
			node.children = append(node.children, ls.decompose(p))
		}
		return node
	}
	pieces := ls.seriesPieces(set)
	if len(pieces) == 1 { // neither: linearise
		return linear(set)
	}
	for _, p := range pieces {
		c := ls.decompose(p)
		if c.layer < 0 && !c.parallel { // a series in a series: one series, so that a stage may span both
			node.children = append(node.children, c.children...)
		} else {
			node.children = append(node.children, c)
		}
	}
	return node
}

// sequential is the layers linearised in topological order: the
// sequential pipeline's decomposition.
func (ls *Layers) sequential() *spNode {
	all := make([]int, len(ls.Layers))
	for i := range all {
		all[i] = i
	}
	return linear(all)
}

// linear is a series of the layers one by one.
func linear(layers []int) *spNode {
	node := &spNode{layer: -1, layers: layers}
	for _, v := range layers {
		node.children = append(node.children, &spNode{layer: v, layers: []int{v}})
	}
	return node
}

// maxSeries bounds the children of a series node: the dynamic program
// over a series is quadratic in its children, so longer series are cut
// into chunks of consecutive children, each a series of its own.
const maxSeries = 32

// bounded cuts every series of more than maxSeries children under n
// into maxSeries chunks of consecutive children, as many in each (one
// more in the first ones), and those chunks again where they are still
// longer: a stage then spans whole chunks or lies within one, and each
// chunk's own program splits it.
func (ls *Layers) bounded(n *spNode) *spNode {
	for i, c := range n.children {
		n.children[i] = ls.bounded(c)
	}
	k := len(n.children)
	if n.layer >= 0 || n.parallel || k <= maxSeries {
		return n
	}
	out := &spNode{layer: -1, layers: n.layers}
	for c, start := 0, 0; c < maxSeries; c++ {
		end := start + k/maxSeries
		if c < k%maxSeries {
			end++
		}
		chunk := n.children[start:end:end]
		if len(chunk) == 1 {
			out.children = append(out.children, chunk[0])
		} else {
			out.children = append(out.children, ls.bounded(&spNode{layer: -1, children: chunk, layers: segmentLayers(chunk)}))
		}
		start = end
	}
	return out
}

// components are the weakly connected components of set's induced
// subgraph, each in topological order, ordered by their first layer.
func (ls *Layers) components(set []int) [][]int {
	in := map[int]bool{}
	for _, v := range set {
		in[v] = true
	}
	comp := map[int]int{}
	var out [][]int
	for _, v := range set {
		if _, ok := comp[v]; ok {
			continue
		}
		id := len(out)
		comp[v] = id
		members := []int{}
		stack := []int{v}
		for len(stack) > 0 {
			u := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			members = append(members, u)
			for _, w := range append(append([]int(nil), ls.Succ[u]...), ls.Pred[u]...) {
				if _, seen := comp[w]; in[w] && !seen {
					comp[w] = id
					stack = append(stack, w)
				}
			}
		}
		out = append(out, nil)
	}
	for _, v := range set {
		out[comp[v]] = append(out[comp[v]], v)
	}
	return out
}

// seriesPieces splits set at its articulation layers: each articulation
// layer alone, and between two of them the layers after the first and
// before the second. One piece: set has none.
func (ls *Layers) seriesPieces(set []int) [][]int {
	pos := map[int]int{}
	for i, v := range set {
		pos[v] = i
	}
	n := len(set)
	desc, anc := make([]*big.Int, n), make([]*big.Int, n)
	for i := n - 1; i >= 0; i-- {
		desc[i] = new(big.Int)
		for _, w := range ls.Succ[set[i]] {
			if j, ok := pos[w]; ok {
				desc[i].Or(desc[i], desc[j]).SetBit(desc[i], j, 1)
			}
		}
	}
	for i := range n {
		anc[i] = new(big.Int)
		for _, u := range ls.Pred[set[i]] {
			if j, ok := pos[u]; ok {
				anc[i].Or(anc[i], anc[j]).SetBit(anc[i], j, 1)
			}
		}
	}
	var articulation []int // positions
	related := new(big.Int)
	for i := range n {
		related.Or(desc[i], anc[i])
		if bitCount(related) == n-1 {
			articulation = append(articulation, i)
		}
	}
	if len(articulation) == 0 {
		return [][]int{set}
	}
	// A layer between articulation layers a_k and a_k+1 has k+1 of them
	// among its ancestors.
	pieces := map[int][]int{}
	for i := range n {
		before := 0
		for _, a := range articulation {
			if a == i {
				before = -1
				break
			}
			if anc[i].Bit(a) == 1 {
				before++
			}
		}
		if before < 0 {
			continue
		}
		pieces[before] = append(pieces[before], set[i])
	}
	var out [][]int
	for k := 0; k <= len(articulation); k++ {
		if p := pieces[k]; len(p) > 0 {
			out = append(out, p)
		}
		if k < len(articulation) {
			out = append(out, []int{set[articulation[k]]})
		}
	}
	return out
}

func bitCount(x *big.Int) int {
	n := 0
	for _, w := range x.Bits() {
		for ; w != 0; w &= w - 1 {
			n++
		}
	}
	return n
}
