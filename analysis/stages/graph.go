package stages

import "slices"

// sccs numbers the strongly connected components of the graph succ
// (Tarjan's algorithm, iterative).
func sccs(succ [][]int) []int {
	n := len(succ)
	const unvisited = -1
	index, low, comp := make([]int, n), make([]int, n), make([]int, n)
	for i := range index {
		index[i], comp[i] = unvisited, unvisited
	}
	onStack := make([]bool, n)
	var stack []int
	next, comps := 0, 0
	type frame struct{ v, edge int }
	for root := range n {
		if index[root] != unvisited {
			continue
		}
		calls := []frame{{root, 0}}
		index[root], low[root] = next, next
		next++
		stack = append(stack, root)
		onStack[root] = true
		for len(calls) > 0 {
			f := &calls[len(calls)-1]
			if f.edge < len(succ[f.v]) {
				w := succ[f.v][f.edge]
				f.edge++
				switch {
				case index[w] == unvisited:
					index[w], low[w] = next, next
					next++
					stack = append(stack, w)
					onStack[w] = true
					calls = append(calls, frame{w, 0})
				case onStack[w]:
					low[f.v] = min(low[f.v], index[w])
				}
				continue
			}
			v := f.v
			calls = calls[:len(calls)-1]
			if len(calls) > 0 {
				u := calls[len(calls)-1].v
				low[u] = min(low[u], low[v])
			}
			if low[v] == index[v] {
				for {
					w := stack[len(stack)-1]
					stack = stack[:len(stack)-1]
					onStack[w] = false
					comp[w] = comps
					if w == v {
						break
					}
				}
				comps++
			}
		}
	}
	return comp
}

// sorted renumbers the layers (a DAG) in topological order, the lowest
// first node first among those ready.
func (ls *Layers) sorted() *Layers {
	n := len(ls.Layers)
	waiting := make([]int, n)
	for i := range n {
		waiting[i] = len(ls.Pred[i])
	}
	var ready, order []int
	for i := range n {
		if waiting[i] == 0 {
			ready = append(ready, i)
		}
	}
	first := func(i int) int { return ls.Layers[i].Nodes[0] }
	for len(ready) > 0 {
		k := 0
		for i := range ready {
			if first(ready[i]) < first(ready[k]) {
				k = i
			}
		}
		v := ready[k]
		ready = slices.Delete(ready, k, k+1)
		order = append(order, v)
		for _, w := range ls.Succ[v] {
			if waiting[w]--; waiting[w] == 0 {
				ready = append(ready, w)
			}
		}
	}
	pos := make([]int, n)
	for p, v := range order {
		pos[v] = p
	}
	out := &Layers{Batch: ls.Batch, Layers: make([]Layer, n)}
	for v := range n {
		out.Layers[pos[v]] = ls.Layers[v]
	}
	for _, s := range ls.Sends {
		to := make([]int, len(s.To))
		for i, t := range s.To {
			to[i] = pos[t]
		}
		slices.Sort(to)
		out.Sends = append(out.Sends, Send{From: pos[s.From], To: to, PerSample: s.PerSample})
	}
	out.link()
	return out
}
