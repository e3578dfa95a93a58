package ir

import "tofuc/lang"

// Product is the product a sum of products sums, through the casts
// around it, or nil when r's body is no product.
func Product(r *Reduce) *Binary {
	body := r.Body
	for {
		// Only a cast that keeps every value (a float widened) leaves
		// the sum one of products: f32(i32(x*w)) truncates each.
		c, ok := body.(*Cast)
		if !ok || !widens(c.X.Type(), c.T) {
			break
		}
		body = c.X
	}
	m, ok := body.(*Binary)
	if !ok || m.Op != OpMul {
		return nil
	}
	return m
}

// IsContraction reports whether r sums products of two factors that
// read tensors at different sets of index variables, so that each
// factor is reused across outputs (a matrix product, a convolution),
// rather than an element-wise product summed (a dot product of rows
// read alike is still one: its factors read the same variables).
func IsContraction(r *Reduce) bool {
	if r.Kind != Sum {
		return false
	}
	m := Product(r)
	if m == nil {
		return false
	}
	l, rr := ReadVars(m.L), ReadVars(m.R)
	if len(l) == 0 || len(rr) == 0 || len(l) != len(rr) {
		return len(l) > 0 && len(rr) > 0
	}
	for v := range l {
		if !rr[v] {
			return true
		}
	}
	return false
}

// ReadVars is the set of index variables of the reads in e (empty when
// e reads no tensor).
func ReadVars(e Expr) map[*Var]bool {
	out := map[*Var]bool{}
	Walk(e, func(x Expr) bool {
		if a, ok := x.(*Access); ok {
			for _, ix := range a.Index {
				for v := range VarRefs(ix) {
					out[v] = true
				}
			}
		}
		return true
	})
	return out
}

// VarRefs is the set of variables e reads.
func VarRefs(e Expr) map[*Var]bool {
	out := map[*Var]bool{}
	Walk(e, func(x Expr) bool {
		if r, ok := x.(*VarRef); ok {
			out[r.V] = true
		}
		return true
	})
	return out
}

// widens reports whether a cast from float type from to float type to
// keeps every value.
func widens(from, to lang.DType) bool {
	return from.IsFloat() && to.IsFloat() && to.Bits() > from.Bits()
}
