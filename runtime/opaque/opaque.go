// Package opaque holds the implementations of TDL's opaque functions
// (lang.OpaqueFuncs: operations TDL cannot express, Tofu's Opaque), for
// every runtime that evaluates them on the host: the interpreter and the
// compiled runtimes' host steps.
package opaque

import (
	"fmt"
	"math"
	"runtime/debug"
	"sync"

	"tofuc/lang"
	"tofuc/runtime/tensor"
)

// Func computes an opaque function's result from its argument views. It
// must not modify its arguments and must be safe to call concurrently.
type Func func(args []*tensor.Tensor) (*tensor.Tensor, error)

var (
	mu    sync.RWMutex
	funcs = map[string]Func{
		"cholesky": cholesky,
		"inverse":  inverse,
	}
)

// Register makes fn the implementation of the opaque function name,
// replacing any earlier one (including a built-in).
func Register(name string, fn func(args []*tensor.Tensor) (*tensor.Tensor, error)) {
	mu.Lock()
	defer mu.Unlock()
	funcs[name] = fn
}

// Lookup returns the implementation of name, or nil.
func Lookup(name string) Func {
	mu.RLock()
	defer mu.RUnlock()
	return funcs[name]
}

// Call calls fn (the implementation of name) and checks that its result
// has the given shape; a panic in fn is an error.
func Call(name string, fn Func, args []*tensor.Tensor, shape []int) (res *tensor.Tensor, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("opaque function %s panicked: %v\n%s", name, r, debug.Stack())
		}
	}()
	res, err = fn(args)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if res == nil {
		return nil, fmt.Errorf("%s returned no tensor", name)
	}
	ok := len(res.Shape) == len(shape)
	for i := 0; ok && i < len(shape); i++ {
		ok = res.Shape[i] == shape[i]
	}
	if !ok {
		return nil, fmt.Errorf("%s returned a tensor of shape %v, want %v", name, res.Shape, shape)
	}
	n := tensor.NumElements(shape)
	if res.DType.Size() == 0 || res.DType.IsFloat() && len(res.F) != n || !res.DType.IsFloat() && len(res.I) != n {
		return nil, fmt.Errorf("%s returned a malformed %s tensor", name, res.DType)
	}
	return res, nil
}

// matrix returns the single square rank-2 argument as float64 rows.
func matrix(name string, args []*tensor.Tensor) (int, []float64, error) {
	if len(args) != 1 {
		return 0, nil, fmt.Errorf("%s takes one matrix, got %d arguments", name, len(args))
	}
	a := args[0]
	if len(a.Shape) != 2 || a.Shape[0] != a.Shape[1] {
		return 0, nil, fmt.Errorf("%s needs a square matrix, got shape %v", name, a.Shape)
	}
	m := make([]float64, a.Len())
	for i := range m {
		m[i] = a.Flat(i)
	}
	return a.Shape[0], m, nil
}

// cholesky returns the lower-triangular L with A = L·Lᵀ, reading the lower
// triangle of A.
func cholesky(args []*tensor.Tensor) (*tensor.Tensor, error) {
	n, a, err := matrix("cholesky", args)
	if err != nil {
		return nil, err
	}
	l := tensor.New(lang.F64, []int{n, n})
	L := l.F
	for j := 0; j < n; j++ {
		s := a[j*n+j]
		for k := 0; k < j; k++ {
			s -= L[j*n+k] * L[j*n+k]
		}
		if !(s > 0) || math.IsInf(s, 0) {
			return nil, fmt.Errorf("matrix is not positive definite (pivot %d is %g)", j, s)
		}
		d := math.Sqrt(s)
		L[j*n+j] = d
		for i := j + 1; i < n; i++ {
			s := a[i*n+j]
			for k := 0; k < j; k++ {
				s -= L[i*n+k] * L[j*n+k]
			}
			L[i*n+j] = s / d
		}
	}
	return l, nil
}

// inverse inverts a square matrix by Gauss-Jordan elimination with partial
// pivoting.
func inverse(args []*tensor.Tensor) (*tensor.Tensor, error) {
	n, a, err := matrix("inverse", args)
	if err != nil {
		return nil, err
	}
	inv := tensor.New(lang.F64, []int{n, n})
	b := inv.F
	for i := 0; i < n; i++ {
		b[i*n+i] = 1
	}
	for col := 0; col < n; col++ {
		p := col
		for r := col + 1; r < n; r++ {
			if math.Abs(a[r*n+col]) > math.Abs(a[p*n+col]) {
				p = r
			}
		}
		pv := a[p*n+col]
		if pv == 0 || math.IsNaN(pv) {
			return nil, fmt.Errorf("matrix is singular (no pivot in column %d)", col)
		}
		if p != col {
			for k := 0; k < n; k++ {
				a[p*n+k], a[col*n+k] = a[col*n+k], a[p*n+k]
				b[p*n+k], b[col*n+k] = b[col*n+k], b[p*n+k]
			}
		}
		for k := 0; k < n; k++ {
			a[col*n+k] /= pv
			b[col*n+k] /= pv
		}
		for r := 0; r < n; r++ {
			if r == col {
				continue
			}
			m := a[r*n+col]
			if m == 0 {
				continue
			}
			for k := 0; k < n; k++ {
				a[r*n+k] -= m * a[col*n+k]
				b[r*n+k] -= m * b[col*n+k]
			}
		}
	}
	return inv, nil
}
