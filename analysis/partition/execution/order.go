package execution

import (
	"container/heap"
	"fmt"
	"math"

	"tofuc/lang/ir"
)

// Unit is one slot's copy of a node (Ops[Node][Slot]) or, with Slot
// Done, the node's completion: its partial outputs combined and its
// outputs stored into the tiles they are not computed in.
type Unit struct{ Node, Slot int }

// Done is the Slot of a node's completion.
const Done = -1

// Order lists the units of the graph (the copies that compute, and
// every node's completion) in an order that respects their dataflow:
// a copy comes after the writes of the tiles it fetches from (the
// producing copy where it writes its tile, else the producer's
// completion), a completion after its node's copies. Among the units
// ready, the least by key comes first (completions as soon as they are
// ready), ties by node then slot: a compiled plan's devices run their
// steps in this order. Units left out (a cycle) are an error.
func (eg *Graph) Order(key func(Unit) float64) ([]Unit, error) {
	o := newOrdering(eg)
	for j, ops := range eg.Ops {
		done := Unit{j, Done}
		for _, op := range ops {
			if op.Inst == nil {
				continue
			}
			u := Unit{j, op.Device}
			o.add(u, key(u))
			o.edge(u, done)
			for i, v := range op.Node.Inputs {
				if op.In[i] == nil || v.Const != nil {
					continue
				}
				for _, sum := range op.In[i].Sums {
					for _, piece := range sum {
						if w, ok := eg.writer(v, piece.From, o.producer); ok {
							o.edge(w, u)
						}
					}
				}
			}
		}
		o.add(done, math.Inf(-1))
	}
	out := o.sort()
	if len(out) < len(o.units) {
		return nil, fmt.Errorf("the execution graph's units wait for one another: %d of %d ordered", len(out), len(o.units))
	}
	return out, nil
}

// writer is the unit after which slot e's tile of v holds its values
// (false for an input's or a parameter's, written before the steps).
func (eg *Graph) writer(v *ir.Value, e int, producer map[*ir.Value][2]int) (Unit, bool) {
	at, ok := producer[v]
	if !ok {
		return Unit{}, false
	}
	op := eg.Ops[at[0]][e]
	switch {
	case op.Inst != nil && op.Groups[at[1]] == nil && op.Outputs[at[1]].Equal(eg.Tiles[v][e]):
		return Unit{at[0], e}, true
	case eg.Owner(v, e) != e:
		return eg.writer(v, eg.Owner(v, e), producer)
	}
	return Unit{at[0], Done}, true
}

// ordering is a graph of units sorted by Kahn's algorithm with a heap.
type ordering struct {
	producer map[*ir.Value][2]int // node and output
	keys     map[Unit]float64
	succ     map[Unit][]Unit
	preds    map[Unit]int
	seen     map[[2]Unit]bool
	units    []Unit
}

func newOrdering(eg *Graph) *ordering {
	o := &ordering{producer: map[*ir.Value][2]int{}, keys: map[Unit]float64{}, succ: map[Unit][]Unit{},
		preds: map[Unit]int{}, seen: map[[2]Unit]bool{}}
	for j, ops := range eg.Ops {
		for k, v := range ops[0].Node.Outputs {
			o.producer[v] = [2]int{j, k}
		}
	}
	return o
}

func (o *ordering) add(u Unit, key float64) {
	o.keys[u] = key
	o.units = append(o.units, u)
}

func (o *ordering) edge(from, to Unit) {
	if from == to || o.seen[[2]Unit{from, to}] {
		return
	}
	o.seen[[2]Unit{from, to}] = true
	o.succ[from] = append(o.succ[from], to)
	o.preds[to]++
}

func (o *ordering) sort() []Unit {
	h := &unitHeap{keys: o.keys}
	for _, u := range o.units {
		if o.preds[u] == 0 {
			heap.Push(h, u)
		}
	}
	out := make([]Unit, 0, len(o.units))
	for h.Len() > 0 {
		u := heap.Pop(h).(Unit)
		out = append(out, u)
		for _, s := range o.succ[u] {
			if o.preds[s]--; o.preds[s] == 0 {
				heap.Push(h, s)
			}
		}
	}
	return out
}

type unitHeap struct {
	keys  map[Unit]float64
	units []Unit
}

func (h *unitHeap) Len() int { return len(h.units) }
func (h *unitHeap) Less(i, j int) bool {
	a, b := h.units[i], h.units[j]
	if ka, kb := h.keys[a], h.keys[b]; ka != kb {
		return ka < kb
	}
	if a.Node != b.Node {
		return a.Node < b.Node
	}
	return a.Slot < b.Slot
}
func (h *unitHeap) Swap(i, j int) { h.units[i], h.units[j] = h.units[j], h.units[i] }
func (h *unitHeap) Push(x any)    { h.units = append(h.units, x.(Unit)) }
func (h *unitHeap) Pop() any {
	u := h.units[len(h.units)-1]
	h.units = h.units[:len(h.units)-1]
	return u
}
