package tensor

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"tofuc/lang"
)

// Tensor is a dense, row-major tensor. See the package comment for how the
// elements are stored.
type Tensor struct {
	DType lang.DType
	Shape []int
	F     []float64 // elements of a floating dtype
	I     []int64   // elements of an integer or bool dtype
}

// ElementBytes is what a Tensor stores per element of any dtype (a
// float64 or an int64).
const ElementBytes = 8

// NumElements is the product of shape (1 for a scalar). It panics on a
// negative extent.
func NumElements(shape []int) int {
	n := 1
	for _, d := range shape {
		if d < 0 {
			panic(fmt.Sprintf("tensor: negative extent in shape %v", shape))
		}
		n *= d
	}
	return n
}

// New returns a zero tensor of the given dtype and shape (shape is copied).
func New(dt lang.DType, shape []int) *Tensor {
	t := &Tensor{DType: dt, Shape: append([]int{}, shape...)}
	n := NumElements(shape)
	if dt.IsFloat() {
		t.F = make([]float64, n)
	} else {
		t.I = make([]int64, n)
	}
	return t
}

// FromFloats returns a tensor holding vals converted to dt: rounded with
// dt.RoundFloat for a floating dtype, converted with FloatToInt otherwise.
// vals is copied; it panics if len(vals) does not match shape.
func FromFloats(dt lang.DType, shape []int, vals []float64) *Tensor {
	t := New(dt, shape)
	if len(vals) != t.Len() {
		panic(fmt.Sprintf("tensor: %d values for shape %v", len(vals), shape))
	}
	for i, v := range vals {
		t.SetFlat(i, v)
	}
	return t
}

// FromInts returns a tensor holding vals converted to dt: wrapped with
// dt.WrapInt for an integer or bool dtype, converted with IntToFloat and
// rounded for a floating one. It panics if len(vals) does not match shape.
func FromInts(dt lang.DType, shape []int, vals []int64) *Tensor {
	t := New(dt, shape)
	if len(vals) != t.Len() {
		panic(fmt.Sprintf("tensor: %d values for shape %v", len(vals), shape))
	}
	for i, v := range vals {
		if dt.IsFloat() {
			t.F[i] = dt.RoundFloat(float64(v))
		} else {
			t.I[i] = dt.WrapInt(v)
		}
	}
	return t
}

// Scalar returns a rank-0 tensor holding v converted to dt as by FromFloats.
func Scalar(dt lang.DType, v float64) *Tensor {
	return FromFloats(dt, nil, []float64{v})
}

// Len is the number of elements.
func (t *Tensor) Len() int { return NumElements(t.Shape) }

// Rank is the number of dimensions.
func (t *Tensor) Rank() int { return len(t.Shape) }

// Strides returns the row-major element strides of t's shape.
func (t *Tensor) Strides() []int { return Strides(t.Shape) }

// Strides returns the row-major element strides of shape.
func Strides(shape []int) []int {
	s := make([]int, len(shape))
	n := 1
	for i := len(shape) - 1; i >= 0; i-- {
		s[i] = n
		n *= shape[i]
	}
	return s
}

// Offset is the flat position of the element at idx; it panics when idx
// has the wrong length or lies outside the shape.
func (t *Tensor) Offset(idx ...int) int {
	if len(idx) != len(t.Shape) {
		panic(fmt.Sprintf("tensor: %d indices for rank %d", len(idx), len(t.Shape)))
	}
	off := 0
	for i, x := range idx {
		if x < 0 || x >= t.Shape[i] {
			panic(fmt.Sprintf("tensor: index %v out of range for shape %v", idx, t.Shape))
		}
		off = off*t.Shape[i] + x
	}
	return off
}

// At returns the element at idx as a float64 (integers converted with
// IntToFloat).
func (t *Tensor) At(idx ...int) float64 { return t.Flat(t.Offset(idx...)) }

// Set stores v at idx, converted to t's dtype as by FromFloats.
func (t *Tensor) Set(v float64, idx ...int) { t.SetFlat(t.Offset(idx...), v) }

// Flat returns the element at flat position i as a float64.
func (t *Tensor) Flat(i int) float64 {
	if t.DType.IsFloat() {
		return t.F[i]
	}
	return IntToFloat(t.DType, t.I[i])
}

// SetFlat stores v at flat position i, converted to t's dtype.
func (t *Tensor) SetFlat(i int, v float64) {
	if t.DType.IsFloat() {
		t.F[i] = t.DType.RoundFloat(v)
	} else {
		t.I[i] = FloatToInt(t.DType, v)
	}
}

// Clone returns a deep copy of t.
func (t *Tensor) Clone() *Tensor {
	c := &Tensor{DType: t.DType, Shape: append([]int{}, t.Shape...)}
	if t.F != nil {
		c.F = append([]float64{}, t.F...)
	}
	if t.I != nil {
		c.I = append([]int64{}, t.I...)
	}
	return c
}

// FloatToInt converts v to the integer or bool dtype dt: truncation toward
// zero, then wrapping modulo 2^width as C does on two's complement machines;
// NaN and ±Inf give 0. For bool the result is v != 0 (so NaN is true).
func FloatToInt(dt lang.DType, v float64) int64 {
	if dt == lang.Bool {
		if v != 0 {
			return 1
		}
		return 0
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	v = math.Trunc(v)
	const two63 = 1 << 63
	if v >= -two63 && v < two63 {
		return dt.WrapInt(int64(v))
	}
	// |v| >= 2^63: reduce modulo 2^64 exactly (v is a multiple of 2^11).
	const two64 = 1 << 64
	m := math.Mod(v, two64)
	if m < 0 {
		m += two64
	}
	if m >= two63 {
		m -= two64
	}
	return dt.WrapInt(int64(m))
}

// IntToFloat converts an element of integer or bool dtype dt to float64
// (u64 elements are read as unsigned).
func IntToFloat(dt lang.DType, v int64) float64 {
	if dt == lang.U64 {
		return float64(uint64(v))
	}
	return float64(v)
}

// maxPrint bounds how many elements String prints.
const maxPrint = 64

// String prints the dtype, the shape and, for small tensors, the elements
// as nested brackets, e.g. "f32[2, 2] [[1, 2], [3, 4]]".
func (t *Tensor) String() string {
	if t == nil {
		return "<nil>"
	}
	var b strings.Builder
	b.WriteString(t.DType.String())
	b.WriteString("[")
	for i, d := range t.Shape {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(d))
	}
	b.WriteString("]")
	for _, d := range t.Shape {
		if d < 0 {
			return b.String() + " <invalid shape>"
		}
	}
	n := NumElements(t.Shape)
	if (t.DType.IsFloat() && len(t.F) != n) || (!t.DType.IsFloat() && len(t.I) != n) {
		return b.String() + " <invalid data>"
	}
	if n > maxPrint {
		return b.String() + " ..."
	}
	b.WriteString(" ")
	pos := 0
	t.format(&b, 0, &pos)
	return b.String()
}

func (t *Tensor) format(b *strings.Builder, dim int, pos *int) {
	if dim == len(t.Shape) {
		b.WriteString(t.elemString(*pos))
		*pos++
		return
	}
	b.WriteString("[")
	for i := 0; i < t.Shape[dim]; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		t.format(b, dim+1, pos)
	}
	b.WriteString("]")
}

func (t *Tensor) elemString(i int) string {
	switch {
	case t.DType.IsFloat():
		return strconv.FormatFloat(t.F[i], 'g', -1, 64)
	case t.DType == lang.Bool:
		return strconv.FormatBool(t.I[i] != 0)
	case t.DType == lang.U64:
		return strconv.FormatUint(uint64(t.I[i]), 10)
	}
	return strconv.FormatInt(t.I[i], 10)
}

// Validate reports whether t's dtype, shape and data agree.
func (t *Tensor) Validate() error {
	if t == nil {
		return fmt.Errorf("nil tensor")
	}
	if t.DType.Size() == 0 {
		return fmt.Errorf("invalid dtype %s", t.DType)
	}
	n := 1
	for _, d := range t.Shape {
		if d < 0 {
			return fmt.Errorf("negative extent in shape %v", t.Shape)
		}
		n *= d
	}
	if t.DType.IsFloat() && len(t.F) != n || !t.DType.IsFloat() && len(t.I) != n {
		return fmt.Errorf("%s tensor of shape %v holds %d float and %d integer elements", t.DType, t.Shape, len(t.F), len(t.I))
	}
	return nil
}

// MaxElements bounds the elements of a tensor a runtime allocates.
const MaxElements = 1 << 40

// CheckSize rejects a shape with more than MaxElements elements (an
// element count that would overflow).
func CheckSize(shape []int) error {
	n := 1
	for _, d := range shape {
		if d == 0 {
			return nil
		}
	}
	for _, d := range shape {
		if n > MaxElements/d {
			return fmt.Errorf("shape %v has too many elements", shape)
		}
		n *= d
	}
	return nil
}

// ForEachIndex calls f with every index of shape in row-major order, and
// its flat position (idx is reused between calls).
func ForEachIndex(shape []int, f func(i int, idx []int)) {
	n := NumElements(shape)
	idx := make([]int, len(shape))
	for i := 0; i < n; i++ {
		f(i, idx)
		for d := len(idx) - 1; d >= 0; d-- {
			idx[d]++
			if idx[d] < shape[d] {
				break
			}
			idx[d] = 0
		}
	}
}
