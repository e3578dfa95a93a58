package cost

import (
	"tofuc/analysis/strategy"
	"tofuc/lang"
	"tofuc/lang/ir"
)

// Layouts of a tensor at one step besides a split dimension (0, 1, ...).
const (
	// Replicated: every worker holds the whole tensor.
	Replicated = -1
	// Partial: every worker holds a whole partial sum, and the tensor is
	// their sum (a weight's gradient before its all-reduce).
	Partial = -2
)

// Forbidden marks, in StepCost's tables, a choice that cannot read or
// write a tensor laid out so (a partial sum where the choice makes none).
const Forbidden = -1

// StepCost is what an operator's view costs at one step over K workers,
// for every choice and every layout of its tensors. Once the choice is
// fixed the bytes add up over the tensors, each a function of that
// tensor's layout alone.
type StepCost struct {
	K int
	// Fetch[Slot(c)][i][Col(d)] is the bytes the K workers receive of
	// input i under choice c when the input has layout d, or Forbidden.
	Fetch [][][]int64
	// Store is the same for the outputs: redistributing computed parts
	// to the owners of the tiles, or combining partials.
	Store [][][]int64
}

// Slot is the index of a choice in StepCost's tables.
func Slot(c Choice) int { return int(c) + 2 }

// Col is the index of a layout in StepCost's tables.
func Col(d int) int { return d + 2 }

// Bytes is the cost of choice c with the node's tensors placed as pl;
// ok is false when the combination is forbidden.
func (sc *StepCost) Bytes(c Choice, pl Placement) (n int64, ok bool) {
	for _, t := range []struct {
		table  [][]int64
		dims   []int
		copies []int64
	}{{sc.Fetch[Slot(c)], pl.In, pl.InCopies}, {sc.Store[Slot(c)], pl.Out, pl.OutCopies}} {
		for i, d := range t.dims {
			b := t.table[i][Col(d)]
			if b == Forbidden {
				return 0, false
			}
			n += b * t.copies[i]
		}
	}
	return n, true
}

// Step prices the view over k workers (computed once per k).
func (v *View) Step(k int) *StepCost {
	v.mu.Lock()
	defer v.mu.Unlock()
	if sc, ok := v.steps[k]; ok {
		return sc
	}
	sc := &StepCost{K: k}
	f, s := v.accumulateCost(k)
	sc.Fetch, sc.Store = append(sc.Fetch, f), append(sc.Store, s)
	f, s = v.replicateCost(k)
	sc.Fetch, sc.Store = append(sc.Fetch, f), append(sc.Store, s)
	for c := range v.Strategies() {
		f, s := v.strategyCost(v.Analysis.Strategies[c], k)
		sc.Fetch = append(sc.Fetch, f)
		sc.Store = append(sc.Store, s)
	}
	v.steps[k] = sc
	return sc
}

// accumulateCost prices Accumulate: every worker applies the (linear)
// operator to its partial sums, so every input must be partial; the
// outputs are partial sums, kept so or combined as a reduction's are.
func (v *View) accumulateCost(k int) (fetch, store [][]int64) {
	for _, shape := range v.InShapes {
		fetch = append(fetch, perLayout(shape, k, func(d, w int, tile strategy.Box) int64 {
			if d == Partial && v.Linear() {
				return 0
			}
			return Forbidden
		}))
	}
	for o, shape := range v.OutShapes {
		es := elemSize(v.Inst.Outputs[o].Tensor.DType)
		store = append(store, perLayout(shape, k, func(d, w int, tile strategy.Box) int64 {
			if !v.Linear() {
				return Forbidden
			}
			return combineCost(d, w, k, shape, tile, es)
		}))
	}
	return fetch, store
}

// replicateCost prices Replicate: every worker runs the whole view, so it
// fetches whole inputs and stores nothing.
func (v *View) replicateCost(k int) (fetch, store [][]int64) {
	for i, shape := range v.InShapes {
		whole := readRegion(strategy.WholeBands(shape))
		es := elemSize(v.Inst.Inputs[i].DType)
		fetch = append(fetch, perLayout(shape, k, func(d, w int, tile strategy.Box) int64 {
			return whole.cost(d, k, tile) * es
		}))
	}
	for _, shape := range v.OutShapes {
		store = append(store, perLayout(shape, k, func(d, w int, tile strategy.Box) int64 {
			if d == Partial {
				return Forbidden // the whole result on every worker, not a partial sum
			}
			return 0
		}))
	}
	return fetch, store
}

// strategyCost prices strategy s over k workers.
func (v *View) strategyCost(s *strategy.Strategy, k int) (fetch, store [][]int64) {
	extent, _ := s.Var.Extent.IsConst()
	lo, hi := s.PartSymbols()
	parts := make([]strategy.Box1, k)
	regions := make([][]read, k) // per worker, per input
	for w := range k {
		plo, phi := strategy.Part(extent, w, k)
		parts[w] = strategy.Box1{Lo: plo, Hi: phi}
		if phi < plo {
			continue
		}
		env := map[string]int64{lo: plo, hi: phi}
		for i, r := range s.Regions {
			regions[w] = append(regions[w], readRegion(regionBands(r, env, v.InShapes[i])))
		}
	}
	for i, shape := range v.InShapes {
		es := elemSize(v.Inst.Inputs[i].DType)
		fetch = append(fetch, perLayout(shape, k, func(d, w int, tile strategy.Box) int64 {
			if regions[w] == nil {
				return 0
			}
			return regions[w][i].cost(d, k, tile) * es
		}))
	}
	for o, shape := range v.OutShapes {
		es := elemSize(v.Inst.Outputs[o].Tensor.DType)
		store = append(store, perLayout(shape, k, func(d, w int, tile strategy.Box) int64 {
			switch {
			case s.Kind == strategy.SplitReduction && (d != Partial || s.Reducer == ir.Sum):
				return combineCost(d, w, k, shape, tile, es)
			case d == Partial:
				return Forbidden // partial sums come from sums
			case parts[w].Hi < parts[w].Lo:
				return tile.Size() * es
			}
			p := strategy.WholeBox(shape)
			p[s.Dims[o]] = parts[w]
			return (tile.Size() - tile.Overlap(p)) * es
		}))
	}
	return fetch, store
}

// read is a region a worker reads, as its boxes and their size.
type read struct {
	boxes []strategy.Box
	size  int64
}

func readRegion(b strategy.Bands) read {
	r := read{size: b.Size()}
	for _, p := range b.Boxes() {
		r.boxes = append(r.boxes, p.Box)
	}
	return r
}

// cost is the elements a worker receives to read the region of a tensor
// laid out as d, holding tile: what it lacks of it, or for partial sums
// the region's partials from the k-1 others.
func (r read) cost(d, k int, tile strategy.Box) int64 {
	if d == Partial {
		return int64(k-1) * r.size
	}
	var n int64
	for _, b := range r.boxes {
		n += b.Size() - b.Overlap(tile)
	}
	return n
}

// combineCost is worker w's bytes to turn partial outputs into layout d:
// nothing to keep them partial; a reduce-scatter receives the k-1 other
// partials of a 1/k share; a replicated result is then all-gathered.
func combineCost(d, w, k int, shape []int64, tile strategy.Box, es int64) int64 {
	if d == Partial {
		return 0
	}
	whole := strategy.WholeBox(shape).Size()
	share := whole / int64(k)
	if w < int(whole%int64(k)) {
		share++
	}
	return ((int64(k)-1)*share + tile.Size() - share) * es
}

// perLayout sums f over the k workers' tiles for every layout of a tensor
// of the given shape (by Col), a forbidden entry making the sum
// forbidden.
func perLayout(shape []int64, k int, f func(d, w int, tile strategy.Box) int64) []int64 {
	out := make([]int64, Col(len(shape)))
	tile := strategy.WholeBox(shape)
	for d := Partial; d < len(shape); d++ {
		for w := range k {
			if d >= 0 {
				lo, hi := strategy.Part(shape[d], w, k)
				tile[d] = strategy.Box1{Lo: lo, Hi: hi}
			}
			b := f(d, w, tile)
			if b == Forbidden {
				out[Col(d)] = Forbidden
				break
			}
			out[Col(d)] += b
		}
		if d >= 0 {
			tile[d] = strategy.Box1{Lo: 0, Hi: shape[d] - 1}
		}
	}
	return out
}

// Tile is worker w's tile of a tensor of the given shape with layout d
// over k workers (the whole tensor unless d splits a dimension).
func Tile(shape []int64, d, w, k int) []strategy.Box1 {
	b := strategy.WholeBox(shape)
	if d >= 0 {
		lo, hi := strategy.Part(shape[d], w, k)
		b[d] = strategy.Box1{Lo: lo, Hi: hi}
	}
	return b
}

// regionBands evaluates a worker's region, clipped to the tensor; a
// region that does not evaluate is taken whole.
func regionBands(r strategy.Region, env map[string]int64, shape []int64) strategy.Bands {
	bind := func(name string) (lang.Dim, bool) {
		n, ok := env[name]
		return lang.Const(n), ok
	}
	b, err := r.Concrete(bind, shape)
	if err != nil {
		return strategy.WholeBands(shape)
	}
	return b
}
