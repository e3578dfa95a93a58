package partition

import (
	"fmt"
	"time"

	"tofuc/analysis/cost"
	"tofuc/lang/ir"
)

// ExhaustiveLimit bounds the plans Exhaustive enumerates.
const ExhaustiveLimit = 1 << 20

// Exhaustive finds the cheapest plan of a small graph by enumerating
// every sequence of splits of every tensor over the factors; for each,
// every node takes its cheapest sequence of choices (a node's choices only
// change its own cost once the splits are fixed). It is the reference the
// search is tested against.
func Exhaustive(g *cost.Graph, devices int, opt Options) (*Result, error) {
	start := time.Now()
	factors := opt.Factors
	if factors == nil {
		factors = Factorise(devices)
	}
	if err := CheckFactors(factors, devices); err != nil {
		return nil, err
	}
	tensors := g.Tensors()
	seqs := make([][][]int, len(tensors))
	count := int64(1)
	for i, v := range tensors {
		seqs[i] = layoutSequences(g, v, factors)
		if count *= int64(len(seqs[i])); count > ExhaustiveLimit {
			return nil, fmt.Errorf("exhaustive search: more than %d plans", ExhaustiveLimit)
		}
	}
	p := cost.NewPlan(factors)
	best := int64(-1)
	var bestPlan map[*ir.Value][]int
	var bestOps map[*ir.Node][]cost.Choice
	pick := make([]int, len(tensors))
	index := map[*ir.Value]int{}
	for i, v := range tensors {
		index[v] = i
	}
	memo := map[memoKey]opMemo{}
	for {
		for i, v := range tensors {
			p.Tensors[v] = seqs[i][pick[i]]
		}
		total, ops := int64(0), map[*ir.Node][]cost.Choice{}
		for _, n := range g.IR.Nodes {
			key := keyOf(n, index, pick)
			m, ok := memo[key]
			if !ok {
				m.bytes, m.choices = cheapestOp(p, n, g.Root(n), 0, 1)
				memo[key] = m
			}
			if m.bytes < 0 {
				total = -1 // no choice of the node suits these layouts
				break
			}
			total += m.bytes
			ops[n] = m.choices
		}
		if total >= 0 && (best < 0 || total < best) {
			best, bestOps = total, ops
			bestPlan = map[*ir.Value][]int{}
			for k, v := range p.Tensors {
				bestPlan[k] = v
			}
		}
		if !advance(pick, seqs) {
			break
		}
	}
	p.Tensors, p.Ops = bestPlan, bestOps
	c, err := g.Evaluate(p)
	if err != nil {
		return nil, err
	}
	return &Result{Plan: p, Cost: c, Seconds: time.Since(start).Seconds(), Exact: true}, nil
}

// opMemo is a node's cheapest choices for the splits of its tensors.
type opMemo struct {
	bytes   int64
	choices []cost.Choice
}

// memoKey identifies a node and the splits of up to 16 of its tensors.
type memoKey struct {
	n     *ir.Node
	picks [16]int32
}

func keyOf(n *ir.Node, index map[*ir.Value]int, pick []int) memoKey {
	key := memoKey{n: n}
	for j := 0; j < len(n.Inputs)+len(n.Outputs) && j < len(key.picks); j++ {
		var v *ir.Value
		if j < len(n.Inputs) {
			v = n.Inputs[j]
		} else {
			v = n.Outputs[j-len(n.Inputs)]
		}
		if i, ok := index[v]; ok {
			key.picks[j] = int32(pick[i])
		}
	}
	return key
}

func advance(pick []int, seqs [][][]int) bool {
	for i := range pick {
		pick[i]++
		if pick[i] < len(seqs[i]) {
			return true
		}
		pick[i] = 0
	}
	return false
}

// layoutSequences lists every sequence of layouts of a tensor, one per
// step (cost.Graph.Layouts).
func layoutSequences(g *cost.Graph, v *ir.Value, factors []int) [][]int {
	out := [][]int{nil}
	for i, k := range factors {
		var next [][]int
		for _, seq := range out {
			for _, d := range g.Layouts(v, cost.TileShape(g.Shapes[v], seq, factors[:i]), k) {
				next = append(next, append(append([]int(nil), seq...), d))
			}
		}
		out = next
	}
	return out
}

// cheapestOp is the least a node can cost from step i on, with its
// choices; -1 when no sequence of choices suits the layouts.
func cheapestOp(p *cost.Plan, n *ir.Node, v *cost.View, i int, groups int64) (int64, []cost.Choice) {
	if i == len(p.Factors) {
		return 0, nil
	}
	k := p.Factors[i]
	pl := p.Placement(n, i)
	best, bestChs := int64(-1), []cost.Choice(nil)
	for _, c := range choices(v, allowAll) {
		here, ok := v.Step(k).Bytes(c, pl)
		sub, err := v.Sub(c, k)
		if !ok || err != nil {
			continue
		}
		here *= groups
		rest, chs := cheapestOp(p, n, sub, i+1, groups*int64(k))
		if rest >= 0 && (best < 0 || here+rest < best) {
			best, bestChs = here+rest, append([]cost.Choice{c}, chs...)
		}
	}
	return best, bestChs
}
