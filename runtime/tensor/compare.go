package tensor

import (
	"errors"
	"fmt"
	"math"

	"tofuc/lang"
)

// Tolerance is tofuc's one policy for comparing results (docs/testing.md):
// a float element got matches want when |got - want| <= Abs + Rel*|want|
// + RMS*rms, where rms is the root mean square of the finite elements
// of want's row (of its last dimension) that holds it (a part relative
// to the row's scale: the rounding error of a sum of terms of random
// signs grows as the sums' spread does, not as each element); NaN
// matches NaN and an infinity matches the same infinity. Integers and
// bools always match exactly.
type Tolerance struct {
	Rel, Abs, RMS float64
}

// Exact asks for bit-for-bit equal values (after rounding to the dtype):
// for results computed in the same order.
var Exact = Tolerance{}

// External is the tolerance against results from other implementations
// (ONNX's reference implementation, ONNX Runtime, PyTorch).
var External = Tolerance{Rel: 1e-3, Abs: 1e-5}

// Reordered returns the tolerance for results of dtype dt computed with
// the additions of a reduction in a different order (a split reduction, a
// rewritten graph, a compiled kernel): a few units in the last place of the
// dtype, times the square root of the reduction length n.
func Reordered(dt lang.DType, n int) Tolerance {
	var eps float64
	switch dt {
	case lang.F64:
		eps = 0x1p-52
	case lang.F32:
		eps = 0x1p-23
	case lang.F16:
		eps = 0x1p-10
	case lang.BF16:
		eps = 0x1p-7
	default:
		return Exact
	}
	scale := 4 * math.Sqrt(float64(max(n, 1)))
	return Tolerance{Rel: scale * eps, Abs: scale * eps}
}

// Compare reports the first difference between got and want beyond tol in
// dtype, shape or values; for values it names the largest error and where.
func Compare(got, want *Tensor, tol Tolerance) error {
	perRow, n := tol.PerRow(want), rowLen(want)
	return compare(got, want, func(i int) Tolerance { return perRow(i / n) }, "")
}

// PerRow is tol for each row of want (of its last dimension): its part
// relative to the row's root mean square added to Abs.
func (tol Tolerance) PerRow(want *Tensor) func(row int) Tolerance {
	if tol.RMS == 0 {
		return func(int) Tolerance { return tol }
	}
	n := rowLen(want)
	rows := make([]Tolerance, want.Len()/n)
	for r := range rows {
		rows[r] = Tolerance{Rel: tol.Rel, Abs: tol.Abs + tol.RMS*rootMeanSquare(want, r*n, n)}
	}
	return func(row int) Tolerance { return rows[row] }
}

// rowLen is the length of t's rows: its last dimension (1 for a scalar,
// at least 1).
func rowLen(t *Tensor) int {
	if len(t.Shape) == 0 {
		return 1
	}
	return max(1, t.Shape[len(t.Shape)-1])
}

// rootMeanSquare is the root mean square of the finite elements of t in
// [from, from+n) (0 for none), scaled by their largest magnitude so that
// no square overflows.
func rootMeanSquare(t *Tensor, from, n int) float64 {
	largest := 0.0
	for i := from; i < from+n; i++ {
		if v := math.Abs(t.Flat(i)); !math.IsInf(v, 0) && !math.IsNaN(v) {
			largest = max(largest, v)
		}
	}
	if largest == 0 {
		return 0
	}
	sum, count := 0.0, 0
	for i := from; i < from+n; i++ {
		if v := t.Flat(i); !math.IsInf(v, 0) && !math.IsNaN(v) {
			sum += (v / largest) * (v / largest)
			count++
		}
	}
	return largest * math.Sqrt(sum/float64(count))
}

// CompareBounded is Compare where element i of got may differ from want's
// by unit·bound[i] (analysis/rounding's bounds, bound of want's shape).
func CompareBounded(got, want, bound *Tensor, unit float64) error {
	if fmt.Sprint(bound.Shape) != fmt.Sprint(want.Shape) {
		return fmt.Errorf("bounds of shape %v for a tensor of shape %v", bound.Shape, want.Shape)
	}
	return compare(got, want, func(i int) Tolerance { return Tolerance{Abs: unit * bound.Flat(i)} }, "bound")
}

// compare is Compare with element i's tolerance tol(i); a message names
// the element's tolerance when what names it.
func compare(got, want *Tensor, tol func(i int) Tolerance, what string) error {
	if got.DType != want.DType {
		return fmt.Errorf("dtype %s, want %s", got.DType, want.DType)
	}
	if fmt.Sprint(got.Shape) != fmt.Sprint(want.Shape) {
		return fmt.Errorf("shape %v, want %v", got.Shape, want.Shape)
	}
	worst, worstErr := -1, 0.0
	for i := range want.Len() {
		g, w := got.Flat(i), want.Flat(i)
		if matches(g, w, tol(i), want.DType.IsFloat()) {
			continue
		}
		e := math.Abs(g - w)
		if math.IsNaN(e) {
			e = math.Inf(1)
		}
		if worst < 0 || e > worstErr {
			worst, worstErr = i, e
		}
	}
	if worst < 0 {
		return nil
	}
	idx := make([]int, len(want.Shape))
	rest := worst
	for d := len(want.Shape) - 1; d >= 0; d-- {
		idx[d] = rest % want.Shape[d]
		rest /= want.Shape[d]
	}
	msg := fmt.Sprintf("largest error %.3g at %v: got %v, want %v", worstErr, idx, got.Flat(worst), want.Flat(worst))
	if what != "" {
		msg += fmt.Sprintf(" (its %s %.3g)", what, tol(worst).Abs)
	}
	return errors.New(msg)
}

func matches(g, w float64, tol Tolerance, isFloat bool) bool {
	if g == w || !isFloat {
		return g == w
	}
	if math.IsNaN(g) || math.IsNaN(w) {
		return math.IsNaN(g) && math.IsNaN(w)
	}
	if math.IsInf(g, 0) || math.IsInf(w, 0) {
		return false
	}
	return math.Abs(g-w) <= tol.Abs+tol.Rel*math.Abs(w)
}
