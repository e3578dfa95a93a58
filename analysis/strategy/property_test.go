package strategy_test

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"
	"tofuc/parser"

	"tofuc/analysis/check"
	"tofuc/analysis/strategy"
	"tofuc/internal/opcase"
	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/runtime/interp"
	"tofuc/runtime/tensor"
)

// TestPartitionedEqualsWhole checks every strategy of every standard
// library operator: each of k workers (k = 2, 3, 4) evaluates the operator
// on the regions of the inputs the analysis gives it, cut out of the full
// inputs, and the parts, concatenated (output splits) or combined with the
// reducer (reduction splits), equal the interpreter's result for the whole
// operator: exactly for output splits, within the tolerance policy for
// reductions. Shapes are random, so extents k does not divide occur.
func TestPartitionedEqualsWhole(t *testing.T) {
	ops, names, err := opcase.Stdlib()
	if err != nil {
		t.Fatal(err)
	}
	var skipped []string
	strategies := 0
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			c, err := opcase.New(ops[name], opcase.Options{})
			if err != nil {
				if strings.Contains(err.Error(), "positive definite") {
					skipped = append(skipped, name+": the input must be positive definite")
					return
				}
				t.Fatalf("no concrete case: %v", err)
			}
			a, err := strategy.Analyse(c.Inst)
			if err != nil {
				t.Fatalf("not analysable: %v", err)
			}
			for _, s := range a.Strategies {
				strategies++
				for k := 2; k <= 4; k++ {
					t.Run(fmt.Sprintf("%s/k=%d", s.Name(), k), func(t *testing.T) {
						checkStrategy(t, a, s, c, k)
					})
				}
			}
		})
	}
	// Operators whose inputs random values cannot satisfy are named here,
	// so that a new one cannot slip through unnoticed.
	want := []string{"cholesky: the input must be positive definite"}
	if strings.Join(skipped, "\n") != strings.Join(want, "\n") {
		t.Errorf("operators not run:\n%s\nwant:\n%s", strings.Join(skipped, "\n"), strings.Join(want, "\n"))
	}
	t.Logf("%d operators, %d strategies, each for k = 2, 3, 4", len(names), strategies)
}

func checkStrategy(t *testing.T, a *strategy.Analysis, s *strategy.Strategy, c *opcase.Case, k int) {
	got := make([]*tensor.Tensor, len(c.Want))
	for i, w := range c.Want {
		got[i] = tensor.New(w.DType, w.Shape)
	}
	first := true
	for w := range k {
		worker, err := a.Worker(s, nil, w, k)
		if err != nil {
			t.Fatalf("worker %d: %v", w, err)
		}
		if worker.Empty {
			continue
		}
		inputs := make([]*tensor.Tensor, len(c.Inputs))
		for i, in := range c.Inputs {
			inputs[i] = cutBands(in, worker.Inputs[i])
		}
		parts, err := interp.EvalInstance(worker.Inst, inputs, nil)
		if err != nil {
			t.Fatalf("worker %d of %d: %v", w, k, err)
		}
		for i, part := range parts {
			if s.Kind == strategy.SplitOutput {
				paste(got[i], part, s.Dims[i], worker.Part.Lo)
			} else {
				combine(got[i], part, s.Reducer, first)
			}
		}
		first = false
	}
	for i := range got {
		tol := tensor.Exact
		if s.Kind == strategy.SplitReduction {
			n, _ := s.Var.Extent.IsConst()
			tol = tensor.Reordered(got[i].DType, int(n)*8)
			round(got[i])
		}
		if err := tensor.Compare(got[i], c.Want[i], tol); err != nil {
			t.Errorf("output %d: %v", i, err)
		}
	}
}

// cutBands copies the bands of x a worker reads into their packing.
func cutBands(x *tensor.Tensor, bands strategy.Bands) *tensor.Tensor {
	shape := make([]int, len(bands))
	for d, n := range bands.Shape() {
		shape[d] = int(n)
	}
	out := tensor.New(x.DType, shape)
	for _, p := range bands.Boxes() {
		idx, at := make([]int, len(shape)), make([]int, len(shape))
		n := int(p.Box.Size())
		for i := range n {
			rest := i
			for d := len(shape) - 1; d >= 0; d-- {
				size := int(p.Box[d].Size())
				idx[d] = rest%size + int(p.Box[d].Lo)
				at[d] = rest%size + int(p.At[d])
				rest /= size
			}
			out.SetFlat(out.Offset(at...), x.Flat(x.Offset(idx...)))
		}
	}
	return out
}

// paste copies part into whole along dim, starting at lo.
func paste(whole, part *tensor.Tensor, dim int, lo int64) {
	idx := make([]int, len(part.Shape))
	for i := range part.Len() {
		rest := i
		for d := len(part.Shape) - 1; d >= 0; d-- {
			idx[d] = rest % part.Shape[d]
			rest /= part.Shape[d]
		}
		idx[dim] += int(lo)
		if at := whole.Offset(idx...); part.DType.IsFloat() {
			whole.SetFlat(at, part.Flat(i))
		} else {
			whole.I[at] = part.I[i] // as stored: a u64 past 2^63 has no exact float64
		}
	}
}

// combine folds a partial output into the total with the reducer, in
// float64 (acc.F keeps the unrounded sum until round).
func combine(acc, part *tensor.Tensor, r ir.Reducer, first bool) {
	for i := range part.Len() {
		v := part.Flat(i)
		if first {
			setRaw(acc, i, v)
			continue
		}
		old := raw(acc, i)
		switch r {
		case ir.Sum:
			v += old
		case ir.Prod:
			v *= old
		case ir.Max:
			if math.IsNaN(old) || old > v {
				v = old
			}
		case ir.Min:
			if math.IsNaN(old) || old < v {
				v = old
			}
		}
		setRaw(acc, i, v)
	}
}

func raw(t *tensor.Tensor, i int) float64 {
	if t.DType.IsFloat() {
		return t.F[i]
	}
	return float64(t.I[i])
}

func setRaw(t *tensor.Tensor, i int, v float64) {
	if t.DType.IsFloat() {
		t.F[i] = v
	} else {
		t.I[i] = int64(v)
	}
}

// round rounds combined values to the dtype, as a store would.
func round(t *tensor.Tensor) {
	if t.DType.IsFloat() {
		for i, v := range t.F {
			t.F[i] = t.DType.RoundFloat(v)
		}
	} else {
		for i, v := range t.I {
			t.I[i] = t.DType.WrapInt(v)
		}
	}
}

// TestPartitionedEqualsWholeIntegers repeats the check with i8 values for
// every input that accepts any dtype: integer division truncates and
// narrow integers wrap, so a strategy that is right for floats may not be.
func TestPartitionedEqualsWholeIntegers(t *testing.T) {
	p, err := check.NewProgram(parser.Parse)
	if err != nil {
		t.Fatal(err)
	}
	ops := p.StdOps()
	names := make([]string, 0, len(ops))
	for n, op := range ops {
		for _, in := range op.Inputs {
			if in.DType == "" {
				names = append(names, n)
				break
			}
		}
	}
	sort.Strings(names)
	ran := 0
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			c, err := opcase.New(ops[name], opcase.Options{Any: lang.I8})
			if err != nil {
				return
			}
			a, err := strategy.Analyse(c.Inst)
			if err != nil {
				return // integer index arithmetic the analysis declines: fine
			}
			ran++
			for _, s := range a.Strategies {
				for k := 2; k <= 4; k++ {
					t.Run(fmt.Sprintf("%s/k=%d", s.Name(), k), func(t *testing.T) {
						checkStrategy(t, a, s, c, k)
					})
				}
			}
		})
	}
	t.Logf("%d operators run with i8 inputs", ran)
}
