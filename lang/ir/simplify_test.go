package ir

import (
	"math/rand/v2"
	"testing"

	"tofuc/lang"
)

// evalIndex evaluates an integer index expression with the variables
// at the values of at, as TDL does (division and remainder truncate).
func evalIndex(t *testing.T, e Expr, at map[*Var]int64) int64 {
	switch e := e.(type) {
	case *Const:
		return e.Int
	case *VarRef:
		return at[e.V]
	case *Unary:
		return -evalIndex(t, e.X, at)
	case *Binary:
		l, r := evalIndex(t, e.L, at), evalIndex(t, e.R, at)
		switch e.Op {
		case OpAdd:
			return l + r
		case OpSub:
			return l - r
		case OpMul:
			return l * r
		case OpDiv:
			return l / r
		case OpMod:
			return l % r
		}
	}
	t.Fatalf("cannot evaluate %T", e)
	return 0
}

func ravel(idx []Expr, dims []int64) Expr {
	var lin Expr = IndexConst(0)
	for i, x := range idx {
		lin = IndexAdd(IndexMul(lin, dims[i]), x)
	}
	return lin
}

func unravel(lin Expr, dims []int64) []Expr {
	out := make([]Expr, len(dims))
	stride := int64(1)
	for i := len(dims) - 1; i >= 0; i-- {
		e := IndexBin(OpDiv, lin, IndexConst(stride))
		if i > 0 {
			e = IndexBin(OpMod, e, IndexConst(dims[i]))
		}
		out[i] = e
		stride *= dims[i]
	}
	return out
}

// randomFactors splits n into a random list of factors.
func randomFactors(r *rand.Rand, n int64) []int64 {
	var out []int64
	for n > 1 {
		f := int64(2)
		for n%f != 0 {
			f++
		}
		if len(out) > 0 && r.IntN(2) == 0 {
			out[len(out)-1] *= f
		} else {
			out = append(out, f)
		}
		n /= f
	}
	if len(out) == 0 {
		out = []int64{1}
	}
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// TestSimplifyIndexReshapes: chains of random reshapes and transposes
// (a channel shuffle among them), read as a reshape reads its input,
// simplify to expressions equal to the originals at every index, an
// offset on the first index included.
func TestSimplifyIndexReshapes(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	extent := func(v *Var) (int64, bool) { return v.Extent.IsConst() }
	for trial := range 300 {
		total := []int64{24, 36, 48, 64, 90, 120, 128}[r.IntN(7)]
		outDims := randomFactors(r, total)
		vars := make([]*Var, len(outDims))
		idx := make([]Expr, len(outDims))
		for i, d := range outDims {
			vars[i] = &Var{Name: "v", Extent: lang.Const(d)}
			idx[i] = &VarRef{V: vars[i]}
		}
		// Each step: the index of the tensor before a reshape (or a
		// transpose) from the index of the one after.
		dims := outDims
		for range 1 + r.IntN(3) {
			if r.IntN(2) == 0 {
				perm := r.Perm(len(dims))
				next, nidx := make([]int64, len(dims)), make([]Expr, len(dims))
				for i, p := range perm {
					next[p], nidx[p] = dims[i], idx[i]
				}
				dims, idx = next, nidx
				continue
			}
			next := randomFactors(r, total)
			idx = unravel(ravel(idx, dims), next)
			dims = next
		}
		if trial%3 == 0 {
			idx[0] = IndexAdd(idx[0], IndexConst(int64(r.IntN(5))-2))
		}
		simple := make([]Expr, len(idx))
		for i, x := range idx {
			simple[i] = SimplifyIndex(x, extent)
		}
		at := map[*Var]int64{}
		var visit func(int)
		visit = func(d int) {
			if d == len(vars) {
				for i := range idx {
					if want, got := evalIndex(t, idx[i], at), evalIndex(t, simple[i], at); want != got {
						t.Fatalf("trial %d: index %d at %v: %s simplified to %s: %d, want %d", trial, i, at, ExprString(idx[i]), ExprString(simple[i]), got, want)
					}
				}
				return
			}
			for x := range outDims[d] {
				at[vars[d]] = x
				visit(d + 1)
			}
		}
		visit(0)
	}
}

// TestSimplifyChannelShuffle: ShuffleNet's shuffle of 116 channels of
// 28 × 28 (reshape to 2 × 58, swap, reshape back) reads channel
// (c % 2)·58 + c / 2 at the same row and column, in range.
func TestSimplifyChannelShuffle(t *testing.T) {
	extent := func(v *Var) (int64, bool) { return v.Extent.IsConst() }
	n, c, h, w := &Var{Name: "n", Extent: lang.Const(1)}, &Var{Name: "c", Extent: lang.Const(116)}, &Var{Name: "h", Extent: lang.Const(28)}, &Var{Name: "w", Extent: lang.Const(28)}
	o := []Expr{&VarRef{V: n}, &VarRef{V: c}, &VarRef{V: h}, &VarRef{V: w}}
	t5 := unravel(ravel(o, []int64{1, 116, 28, 28}), []int64{1, 58, 2, 28, 28})
	t5[1], t5[2] = t5[2], t5[1]
	in := unravel(ravel(t5, []int64{1, 2, 58, 28, 28}), []int64{1, 116, 28, 28})
	want := []string{"0", "(((c % 2) * 58) + (c / 2))", "h", "w"}
	for i, x := range in {
		got := ExprString(SimplifyIndex(x, extent))
		if got != want[i] {
			t.Errorf("index %d: %s, want %s", i, got, want[i])
		}
	}
	lo, hi, ok := IndexRange(SimplifyIndex(in[1], extent), extent)
	if !ok || lo != 0 || hi != 115 {
		t.Errorf("the channel's range: [%d, %d] %v, want [0, 115]", lo, hi, ok)
	}
	// A sum of two variables is no multiple of a divisor: kept.
	sum := IndexBin(OpDiv, IndexAdd(o[1], o[2]), IndexConst(4))
	if got := ExprString(SimplifyIndex(sum, extent)); got != ExprString(sum) {
		t.Errorf("(c + h) / 4 simplified to %s", got)
	}
}

// TestSimplifyIndexRandomSums: random non-negative sums of variables
// with random coefficients and extents, divided and reduced by random
// constants (and those of them), equal their simplifications at every
// index; a negative sum is left as it is.
func TestSimplifyIndexRandomSums(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	extent := func(v *Var) (int64, bool) { return v.Extent.IsConst() }
	simplified := 0
	for trial := range 2000 {
		n := 1 + r.IntN(3)
		vars := make([]*Var, n)
		var sum Expr = IndexConst(int64(r.IntN(20)))
		for i := range vars {
			vars[i] = &Var{Name: "v", Extent: lang.Const(int64(1 + r.IntN(9)))}
			coef := []int64{1, 2, 3, 4, 6, 8, 12, 16, 32, 64}[r.IntN(10)]
			sum = IndexAdd(sum, IndexMul(&VarRef{V: vars[i]}, coef))
		}
		if trial%10 == 0 {
			sum = IndexBin(OpSub, sum, IndexConst(30)) // may be negative
		}
		k := []int64{1, 2, 3, 4, 5, 6, 8, 12, 16, 24, 32, 64}[r.IntN(12)]
		e := IndexBin([]BinOp{OpDiv, OpMod}[r.IntN(2)], sum, IndexConst(k))
		if r.IntN(3) == 0 {
			e = IndexBin([]BinOp{OpDiv, OpMod}[r.IntN(2)], e, IndexConst([]int64{2, 3, 4}[r.IntN(3)]))
		}
		s := SimplifyIndex(e, extent)
		if ExprString(s) != ExprString(e) {
			simplified++
		}
		at := map[*Var]int64{}
		var visit func(int)
		visit = func(d int) {
			if d == n {
				if want, got := evalIndex(t, e, at), evalIndex(t, s, at); want != got {
					t.Fatalf("%s simplified to %s: %d at %v, want %d", ExprString(e), ExprString(s), got, at, want)
				}
				return
			}
			ext, _ := vars[d].Extent.IsConst()
			for x := range ext {
				at[vars[d]] = x
				visit(d + 1)
			}
		}
		visit(0)
	}
	if simplified < 500 {
		t.Errorf("%d of 2000 expressions simplified, want at least 500", simplified)
	}
}

// TestIndexRangeRefusesOverflow: a product whose range would leave
// int64 has no range (it would have been [0, 0] at i = 1 of 3 for
// (i·2³³)·2³⁰, wrapped), and a sum of huge terms is not simplified.
func TestIndexRangeRefusesOverflow(t *testing.T) {
	extent := func(v *Var) (int64, bool) { return v.Extent.IsConst() }
	i := &VarRef{V: &Var{Name: "i", Extent: lang.Const(3)}}
	huge := IndexMul(IndexMul(i, 1<<33), 1<<30)
	if lo, hi, ok := IndexRange(huge, extent); ok {
		t.Errorf("(i·2³³)·2³⁰ has the range [%d, %d]", lo, hi)
	}
	sum := IndexBin(OpDiv, IndexAdd(IndexMul(i, 1<<58), IndexMul(i, 1<<58)), IndexConst(1<<58))
	if got := ExprString(SimplifyIndex(sum, extent)); got != ExprString(sum) {
		t.Errorf("%s simplified to %s", ExprString(sum), got)
	}
}
