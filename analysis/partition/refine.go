package partition

import (
	"math"
	"slices"
	"strconv"
	"strings"

	"tofuc/analysis/cost"
	"tofuc/lang/ir"
)

// refine re-chooses every operator's strategies over all the steps at
// once, the tensors' splits fixed. The recursion chooses an operator's
// strategy one step at a time, but the strategy decides the instance its
// workers run at the next steps (its view), so a choice that is cheapest
// at one step can cost more later (a split reduction that leaves a view
// whose later splits fetch more). With the splits fixed, an operator's
// bytes depend on its own choices alone, so its best sequence is found
// exactly by a depth-first search over its views (branch and bound from
// its current sequence); operators with the same view and the same
// splits share the result. The plan's cost never rises.
func refine(g *cost.Graph, p *cost.Plan, ok allow) error {
	memo := map[refineKey][]cost.Choice{}
	for _, n := range g.IR.Nodes {
		key := keyOfSplits(g, p, n)
		seq, found := memo[key]
		if !found {
			r := refiner{p: p, n: n, ok: ok, best: math.MaxInt64}
			cur, err := r.price(g.Root(n), p.Ops[n])
			if err != nil {
				return err
			}
			r.best, r.seq = cur+1, p.Ops[n]
			r.search(g.Root(n), 0, 1, 0, nil)
			seq = r.seq
			memo[key] = seq
		}
		p.Ops[n] = slices.Clone(seq)
	}
	return nil
}

// refineKey identifies a node's root view and its tensors' splits.
type refineKey struct {
	view   *cost.View
	splits string
}

func keyOfSplits(g *cost.Graph, p *cost.Plan, n *ir.Node) refineKey {
	var b strings.Builder
	for _, v := range append(slices.Clone(n.Inputs), n.Outputs...) {
		b.WriteByte('/')
		if v.Const == nil {
			for _, d := range p.Tensors[v] {
				b.WriteString(strconv.Itoa(d))
				b.WriteByte(',')
			}
		}
	}
	return refineKey{g.Root(n), b.String()}
}

type refiner struct {
	p    *cost.Plan
	n    *ir.Node
	ok   allow
	best int64
	seq  []cost.Choice
}

// price is the node's bytes under a sequence of choices.
func (r *refiner) price(v *cost.View, seq []cost.Choice) (int64, error) {
	var sum int64
	groups := int64(1)
	for i, k := range r.p.Factors {
		sum += groups * v.Step(k).Bytes(seq[i], r.p.Dims(r.n.Inputs, i), r.p.Dims(r.n.Outputs, i))
		var err error
		if v, err = v.Sub(seq[i], k); err != nil {
			return 0, err
		}
		groups *= int64(k)
	}
	return sum, nil
}

// search extends prefix (the choices of steps before i, costing acc)
// with every allowed choice, cheapest at this step first, and keeps the
// cheapest complete sequence below r.best.
func (r *refiner) search(v *cost.View, i int, groups, acc int64, prefix []cost.Choice) {
	if acc >= r.best {
		return
	}
	if i == len(r.p.Factors) {
		r.best, r.seq = acc, slices.Clone(prefix)
		return
	}
	k := r.p.Factors[i]
	sc := v.Step(k)
	in, out := r.p.Dims(r.n.Inputs, i), r.p.Dims(r.n.Outputs, i)
	type option struct {
		c     cost.Choice
		bytes int64
	}
	var opts []option
	for _, c := range choices(v, r.ok) {
		opts = append(opts, option{c, groups * sc.Bytes(c, in, out)})
	}
	slices.SortStableFunc(opts, func(a, b option) int {
		switch {
		case a.bytes < b.bytes:
			return -1
		case a.bytes > b.bytes:
			return 1
		}
		return 0
	})
	for _, o := range opts {
		if acc+o.bytes >= r.best {
			break
		}
		sub, err := v.Sub(o.c, k)
		if err != nil {
			continue // this choice leaves a worker nothing to run
		}
		r.search(sub, i+1, groups*int64(k), acc+o.bytes, append(prefix, o.c))
	}
}
