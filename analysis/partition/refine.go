package partition

import (
	"cmp"
	"fmt"
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
	index := map[refineKey]int{}
	var firsts []*ir.Node // a node of each distinct key
	at := make([]int, len(g.IR.Nodes))
	for j, n := range g.IR.Nodes {
		key := keyOfSplits(g, p, n)
		id, found := index[key]
		if !found {
			id = len(firsts)
			index[key] = id
			firsts = append(firsts, n)
		}
		at[j] = id
	}
	seqs := make([][]cost.Choice, len(firsts))
	errs := make([]error, len(firsts))
	parallel(len(firsts), func(i int) {
		n := firsts[i]
		r := refiner{p: p, n: n, ok: ok, memo: map[viewStep]suffix{}}
		cur, err := r.price(g.Root(n), p.Ops[n])
		if err != nil {
			errs[i] = fmt.Errorf("operator %s: %w", n.Name, err)
			return
		}
		seqs[i] = p.Ops[n]
		if s := r.best(g.Root(n), 0, 1, cur); s.exact {
			seqs[i] = s.seq
		}
	})
	for j, n := range g.IR.Nodes {
		if err := errs[at[j]]; err != nil {
			return err
		}
		p.Ops[n] = slices.Clone(seqs[at[j]])
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
	memo map[viewStep]suffix
}

type viewStep struct {
	v *cost.View
	i int
}

// suffix is the cheapest sequence of choices from a view at a step on
// (exact), or a lower bound on its bytes (not exact: none is cheaper).
type suffix struct {
	bytes int64
	seq   []cost.Choice
	exact bool
}

// price is the node's bytes under a sequence of choices.
func (r *refiner) price(v *cost.View, seq []cost.Choice) (int64, error) {
	var sum int64
	groups := int64(1)
	for i, k := range r.p.Factors {
		b, ok := v.Step(k).Bytes(seq[i], r.p.Placement(r.n, i))
		if !ok {
			return 0, fmt.Errorf("step %d: %s cannot read or write its tensors as laid out", i+1, v.Name(seq[i]))
		}
		sum += groups * b
		if i+1 < len(r.p.Factors) {
			var err error
			if v, err = v.Sub(seq[i], k); err != nil {
				return 0, err
			}
		}
		groups *= int64(k)
	}
	return sum, nil
}

// best is the cheapest sequence of choices from step i on at view v when
// it costs less than budget, else the bound budget: a branch and bound
// over the choices, cheapest at this step first, memoised over the views
// (different orders of the same splits reach the same worker instance,
// Tofu's Theorem 2).
func (r *refiner) best(v *cost.View, i int, groups, budget int64) suffix {
	if i == len(r.p.Factors) {
		return suffix{exact: true}
	}
	key := viewStep{v, i}
	if s, ok := r.memo[key]; ok && (s.exact || s.bytes >= budget) {
		return s
	}
	k := r.p.Factors[i]
	sc := v.Step(k)
	pl := r.p.Placement(r.n, i)
	type option struct {
		c     cost.Choice
		bytes int64
	}
	var opts []option
	for _, c := range choices(v, r.ok) {
		if b, ok := sc.Bytes(c, pl); ok {
			opts = append(opts, option{c, groups * b})
		}
	}
	slices.SortStableFunc(opts, func(a, b option) int { return cmp.Compare(a.bytes, b.bytes) })
	res := suffix{bytes: budget}
	for _, o := range opts {
		if o.bytes >= res.bytes {
			break
		}
		rest := suffix{exact: true}
		if i+1 < len(r.p.Factors) { // the last step's views are not needed
			sub, err := v.Sub(o.c, k)
			if err != nil {
				continue // no worker instance for this choice
			}
			rest = r.best(sub, i+1, groups*int64(k), res.bytes-o.bytes)
		}
		if rest.exact && o.bytes+rest.bytes < res.bytes {
			res = suffix{bytes: o.bytes + rest.bytes, seq: append([]cost.Choice{o.c}, rest.seq...), exact: true}
		}
	}
	r.memo[key] = res
	return res
}

// Rechoose gives each of the nodes its cheapest sequence of choices for
// the plan's layouts, whatever its current one; it fails when no
// sequence suits the layouts.
func Rechoose(g *cost.Graph, p *cost.Plan, nodes []*ir.Node) error {
	for _, n := range nodes {
		r := refiner{p: p, n: n, ok: allowAll, memo: map[viewStep]suffix{}}
		s := r.best(g.Root(n), 0, 1, math.MaxInt64)
		if !s.exact {
			return fmt.Errorf("operator %s: no choices suit its tensors' layouts", n.Name)
		}
		p.Ops[n] = s.seq
	}
	return nil
}
