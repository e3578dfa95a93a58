package partition

import (
	"fmt"
	"slices"
	"time"

	"tofuc/analysis/cost"
	"tofuc/lang/ir"
)

// Baselines are data parallelism and the other algorithms of Tofu
// §3.7.3, priced with the same cost model, by their report.json keys.
var Baselines = []string{"data_parallel", "allrow_greedy", "spartan", "equal_chop", "icml18"}

// Baseline runs one baseline:
//
//   - data_parallel: what frameworks do by default: parameters and
//     optimizer states replicated (their next values too), gradients of
//     parameters kept as partial sums until the optimizer combines them
//     (one all-reduce's worth per step), every other tensor split along
//     its first dimension that has enough values (the batch), each
//     operator the best strategy given that;
//   - allrow_greedy (AllRow-Greedy, Tofu's "data parallelism"): every
//     tensor split along its first dimension that has enough values,
//     each operator the best strategy given that;
//   - spartan: tensors in decreasing size, each split along the dimension
//     cheapest for its operators given the tensors already decided, then
//     each operator the best strategy;
//   - equal_chop: the elimination, but every tensor chopped along one
//     dimension into all the devices at once (one step of k = devices);
//   - icml18: the recursive elimination without output reductions
//     (operators that only reduce run whole).
func Baseline(g *cost.Graph, name string, devices int, opt Options) (*Result, error) {
	start := time.Now()
	c := Coarsen(g)
	var res *Result
	var err error
	all := space{ok: allowAll}
	switch name {
	case "data_parallel":
		res, err = recursive(g, c, devices, opt, all, greedy("data parallel", (*step).dataParallel), false)
	case "allrow_greedy":
		res, err = recursive(g, c, devices, opt, all, greedy("allrow greedy", (*step).allRow), false)
	case "spartan":
		res, err = recursive(g, c, devices, opt, all, greedy("spartan greedy", (*step).spartan), false)
	case "equal_chop":
		one := opt
		one.Factors = []int{devices}
		res, err = recursive(g, c, devices, one, all, opt.eliminator(), false)
	case "icml18":
		res, err = recursive(g, c, devices, opt, space{ok: noReduction}, opt.eliminator(), true)
	default:
		return nil, fmt.Errorf("unknown baseline %q", name)
	}
	if err != nil {
		return nil, err
	}
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

func greedy(method string, f func(*step) []int) solveStep {
	return func(s *step) ([]int, StepStats) { return f(s), StepStats{Method: method} }
}

// allRow splits every tensor along its first splittable dimension and
// gives each operator its best choice.
func (s *step) allRow() []int {
	assign := make([]int, len(s.tdom)+len(s.odom))
	s.bestOps(assign)
	return assign
}

// dataParallel replicates the weights (parameters, the values the
// optimizer computes for them), keeps their gradients as partial sums,
// splits every other tensor along its first splittable dimension and
// gives each operator its best choice; a partial sum its producer cannot
// make is replicated instead.
func (s *step) dataParallel() []int {
	weights := map[*ir.Value]bool{}
	for _, p := range s.g.IR.Params {
		weights[p.Value] = true
	}
	for _, n := range s.g.IR.Nodes {
		if n.Role == "update" {
			for _, v := range n.Outputs {
				weights[v] = true
			}
		}
	}
	assign := make([]int, len(s.tdom)+len(s.odom))
	for _, v := range s.tensors {
		id := s.tensorID(v)
		switch {
		case weights[v]:
			assign[id] = max(0, slices.Index(s.tdom[id], cost.Replicated))
		case s.g.PartialOK(v):
			assign[id] = max(0, slices.Index(s.tdom[id], cost.Partial))
		}
	}
	s.bestOps(assign)
	return s.repair(assign)
}

// repair replaces, until the assignment has no forbidden entry, a
// partial layout involved in one by Replicated, choosing the operators
// again: every operator can produce and read replicated tensors.
func (s *step) repair(assign []int) []int {
	dom := s.domains()
	for {
		fixed := false
		for _, f := range s.factors {
			if len(f.vars) != 2 || total(dom, []*factor{f}, assign) <= s.bound {
				continue
			}
			t := f.vars[0]
			if s.tdom[t][assign[t]] == cost.Partial {
				assign[t] = max(0, slices.Index(s.tdom[t], cost.Replicated))
				fixed = true
			}
		}
		if !fixed {
			return assign
		}
		s.bestOps(assign)
	}
}

// bestOps sets every node variable to its cheapest choice given the
// tensor variables.
func (s *step) bestOps(assign []int) {
	byOp := s.factorsByVar()
	dom := s.domains()
	for o := range s.odom {
		v := s.c.nTensor + o
		best, arg := int64(-1), 0
		for x := range dom[v] {
			assign[v] = x
			if c := total(dom, byOp[v], assign); best < 0 || c < best {
				best, arg = c, x
			}
		}
		assign[v] = arg
	}
}

func (s *step) factorsByVar() [][]*factor {
	out := make([][]*factor, len(s.tdom)+len(s.odom))
	for _, f := range s.factors {
		for _, v := range f.vars {
			out[v] = append(out[v], f)
		}
	}
	return out
}

// spartan decides the tensors largest first, each along the dimension
// that costs its operators least given the tensors decided before.
func (s *step) spartan() []int {
	dom := s.domains()
	byVar := s.factorsByVar()
	size := make([]int64, len(s.tdom))
	for _, v := range s.tensors {
		id := s.tensorID(v)
		size[id] = max(size[id], s.g.Bytes(v))
	}
	order := make([]int, len(s.tdom))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		if size[a] != size[b] {
			if size[a] > size[b] {
				return -1
			}
			return 1
		}
		return a - b
	})
	// known[o][c]: node o's bytes under choice c on the decided tensors.
	known := make([][]int64, len(s.odom))
	for o := range s.odom {
		known[o] = make([]int64, dom[s.c.nTensor+o])
	}
	assign := make([]int, len(dom))
	for _, t := range order {
		best, arg := int64(-1), 0
		for d := range dom[t] {
			var c int64
			for _, f := range byVar[t] {
				if len(f.vars) == 1 {
					c += f.table[d] // a unary factor: carried bytes, memory
					continue
				}
				c += minOver(known[f.vars[1]-s.c.nTensor], f, d)
			}
			if best < 0 || c < best {
				best, arg = c, d
			}
		}
		assign[t] = arg
		for _, f := range byVar[t] {
			if len(f.vars) == 1 {
				continue
			}
			k := known[f.vars[1]-s.c.nTensor]
			for c := range k {
				k[c] += f.table[arg*len(k)+c]
			}
		}
	}
	s.bestOps(assign)
	return assign
}

// minOver is a node's cheapest choice with a pair factor's tensor at d.
func minOver(known []int64, f *factor, d int) int64 {
	best := int64(-1)
	for c, k := range known {
		if v := k + f.table[d*len(known)+c]; best < 0 || v < best {
			best = v
		}
	}
	return best
}
