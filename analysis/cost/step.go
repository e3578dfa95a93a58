package cost

import (
	"tofuc/analysis/strategy"
)

// StepCost is what an operator's view costs at one step over K workers,
// for every choice and every way its tensors are split. Once the choice
// is fixed the bytes add up over the tensors, each a function of that
// tensor's split alone.
type StepCost struct {
	K int
	// Fetch[c+1][i][d+1] is the bytes the K workers receive of input i
	// under choice c (Replicate at index 0) when the input is split along
	// dimension d (d = -1: replicated).
	Fetch [][][]int64
	// Store[c+1][o][d+1] is the same for output o: redistributing
	// computed parts to the owners of the tiles, or combining partials.
	Store [][][]int64
}

// Bytes is the cost of choice c with the inputs split along in and the
// outputs along out (-1: replicated).
func (sc *StepCost) Bytes(c Choice, in, out []int) int64 {
	var n int64
	for i, d := range in {
		n += sc.Fetch[c+1][i][d+1]
	}
	for o, d := range out {
		n += sc.Store[c+1][o][d+1]
	}
	return n
}

// Step prices the view over k workers (computed once per k).
func (v *View) Step(k int) *StepCost {
	v.mu.Lock()
	defer v.mu.Unlock()
	if sc, ok := v.steps[k]; ok {
		return sc
	}
	sc := &StepCost{K: k}
	sc.Fetch = append(sc.Fetch, v.replicatedFetch(k))
	sc.Store = append(sc.Store, v.zeroStore())
	for c := range v.Strategies() {
		f, s := v.strategyCost(v.Analysis.Strategies[c], k)
		sc.Fetch = append(sc.Fetch, f)
		sc.Store = append(sc.Store, s)
	}
	v.steps[k] = sc
	return sc
}

func (v *View) replicatedFetch(k int) [][]int64 {
	out := make([][]int64, len(v.InShapes))
	for i, shape := range v.InShapes {
		whole := strategy.WholeBox(shape)
		es := elemSize(v.Inst.Inputs[i].DType)
		out[i] = perSplit(shape, k, func(w int, tile strategy.Box) int64 {
			return (whole.Size() - strategy.Box(tile).Size()) * es
		})
	}
	return out
}

func (v *View) zeroStore() [][]int64 {
	out := make([][]int64, len(v.OutShapes))
	for o, shape := range v.OutShapes {
		out[o] = make([]int64, len(shape)+1)
	}
	return out
}

// strategyCost prices strategy s over k workers.
func (v *View) strategyCost(s *strategy.Strategy, k int) (fetch, store [][]int64) {
	extent, _ := s.Var.Extent.IsConst()
	lo, hi := s.PartSymbols()
	parts := make([]strategy.Box1, k)
	regions := make([][]strategy.Box, k) // per worker, per input
	for w := range k {
		plo, phi := strategy.Part(extent, w, k)
		parts[w] = strategy.Box1{Lo: plo, Hi: phi}
		if phi < plo {
			continue
		}
		env := map[string]int64{lo: plo, hi: phi}
		for i, r := range s.Regions {
			regions[w] = append(regions[w], regionBox(r, env, v.InShapes[i]))
		}
	}
	for i, shape := range v.InShapes {
		es := elemSize(v.Inst.Inputs[i].DType)
		fetch = append(fetch, perSplit(shape, k, func(w int, tile strategy.Box) int64 {
			if regions[w] == nil {
				return 0
			}
			r := regions[w][i]
			return (r.Size() - r.Intersect(strategy.Box(tile)).Size()) * es
		}))
	}
	for o, shape := range v.OutShapes {
		es := elemSize(v.Inst.Outputs[o].Tensor.DType)
		whole := strategy.WholeBox(shape)
		store = append(store, perSplit(shape, k, func(w int, tile strategy.Box) int64 {
			t := strategy.Box(tile)
			if s.Kind == strategy.SplitReduction {
				// Reduce-scatter: each worker receives the k-1 other partials
				// of a 1/k share; a replicated result is then all-gathered.
				share := whole.Size() / int64(k)
				if w < int(whole.Size()%int64(k)) {
					share++
				}
				return ((int64(k)-1)*share + t.Size() - share) * es
			}
			if parts[w].Hi < parts[w].Lo {
				return t.Size() * es
			}
			p := strategy.WholeBox(shape)
			p[s.Dim] = parts[w]
			return (t.Size() - t.Intersect(p).Size()) * es
		}))
	}
	return fetch, store
}

// perSplit sums f over the k workers' tiles for every split of a tensor of
// the given shape: index 0 replicated (the whole tensor on each worker),
// index d+1 split along d.
func perSplit(shape []int64, k int, f func(w int, tile strategy.Box) int64) []int64 {
	out := make([]int64, len(shape)+1)
	for d := -1; d < len(shape); d++ {
		for w := range k {
			out[d+1] += f(w, strategy.Box(Tile(shape, d, w, k)))
		}
	}
	return out
}

// Tile is worker w's tile of a tensor of the given shape split along d
// into k parts (d = -1: the whole tensor).
func Tile(shape []int64, d, w, k int) []strategy.Box1 {
	b := strategy.WholeBox(shape)
	if d >= 0 {
		lo, hi := strategy.Part(shape[d], w, k)
		b[d] = strategy.Box1{Lo: lo, Hi: hi}
	}
	return b
}

// regionBox evaluates a worker's region, clipped to the tensor.
func regionBox(r strategy.Region, env map[string]int64, shape []int64) strategy.Box {
	b := make(strategy.Box, len(r.Dims))
	for d, iv := range r.Dims {
		lo, err1 := iv.Lo.Eval(env)
		hi, err2 := iv.Hi.Eval(env)
		if err1 != nil || err2 != nil {
			lo, hi = 0, shape[d]-1 // unbounded: the whole dimension
		}
		b[d] = strategy.Box1{Lo: max(lo, 0), Hi: min(hi, shape[d]-1)}
	}
	return b
}
