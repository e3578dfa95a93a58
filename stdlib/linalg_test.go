package stdlib_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/runtime/tensor"
)

// Helpers shared by the linalg, conv, pool, reduce, norm and shape tests
// (prefixed sp to keep clear of the other test files' names).

// spEach calls f for every index of shape in row-major order (once, with
// an empty index, for a scalar). f must not keep idx.
func spEach(shape []int, f func(idx []int)) {
	n := tensor.NumElements(shape)
	idx := make([]int, len(shape))
	for range n {
		f(idx)
		for d := len(shape) - 1; d >= 0; d-- {
			idx[d]++
			if idx[d] < shape[d] {
				break
			}
			idx[d] = 0
		}
	}
}

// spBuild returns a tensor of dtype dt whose element at idx is f(idx).
func spBuild(dt lang.DType, shape []int, f func(idx []int) float64) *tensor.Tensor {
	t := tensor.New(dt, shape)
	i := 0
	spEach(shape, func(idx []int) {
		t.SetFlat(i, f(idx))
		i++
	})
	return t
}

func spF32(shape []int, f func(idx []int) float64) *tensor.Tensor {
	return spBuild(lang.F32, shape, f)
}

func spI64(shape []int, f func(idx []int) float64) *tensor.Tensor {
	return spBuild(lang.I64, shape, f)
}

// spSeq is an f32 tensor holding 1, 2, 3, ... in row-major order.
func spSeq(shape ...int) *tensor.Tensor {
	t := tensor.New(lang.F32, shape)
	for i := range t.Len() {
		t.SetFlat(i, float64(i+1))
	}
	return t
}

// spRandInt is an f32 tensor of random integers in [lo, hi]: sums of such
// values are exact in any order.
func spRandInt(seed uint64, lo, hi int, shape ...int) *tensor.Tensor {
	r := rand.New(rand.NewPCG(seed, 11))
	t := tensor.New(lang.F32, shape)
	for i := range t.Len() {
		t.SetFlat(i, float64(lo+r.IntN(hi-lo+1)))
	}
	return t
}

// spOne wraps an expectation with a single output.
func spOne(f func(in []*tensor.Tensor) *tensor.Tensor) func([]*tensor.Tensor) []*tensor.Tensor {
	return func(in []*tensor.Tensor) []*tensor.Tensor { return []*tensor.Tensor{f(in)} }
}

// spConst is the expectation "this fixed tensor".
func spConst(ts ...*tensor.Tensor) func([]*tensor.Tensor) []*tensor.Tensor {
	return func([]*tensor.Tensor) []*tensor.Tensor { return ts }
}

// spA builds an attribute map from name, value pairs.
func spA(kv ...any) map[string]ir.AttrValue {
	m := map[string]ir.AttrValue{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1].(ir.AttrValue)
	}
	return m
}

func spStr(s string) ir.AttrValue { return ir.AttrValue{Kind: ir.AttrString, Str: s} }

// spIdx concatenates index pieces (ints and []int) into a new index.
func spIdx(parts ...any) []int {
	var out []int
	for _, p := range parts {
		switch v := p.(type) {
		case int:
			out = append(out, v)
		case []int:
			out = append(out, v...)
		default:
			panic("spIdx: bad part")
		}
	}
	return out
}

// spMatmul is a float64 reference matrix product of rank-2 tensors,
// returned unrounded as f64.
func spMatmul(a, b *tensor.Tensor) *tensor.Tensor {
	m, k, n := a.Shape[0], a.Shape[1], b.Shape[1]
	return spBuild(lang.F64, []int{m, n}, func(o []int) float64 {
		s := 0.0
		for q := range k {
			s += a.At(o[0], q) * b.At(q, o[1])
		}
		return s
	})
}

// spNear fails unless got is elementwise within tol of want (values only).
func spNear(t *testing.T, what string, got, want *tensor.Tensor, tol float64) {
	t.Helper()
	if len(got.Shape) != len(want.Shape) || got.Len() != want.Len() {
		t.Fatalf("%s: shape %v, want %v", what, got.Shape, want.Shape)
	}
	for i := range want.Len() {
		if d := math.Abs(got.Flat(i) - want.Flat(i)); !(d <= tol) {
			t.Fatalf("%s: flat element %d is %v, want %v", what, i, got.Flat(i), want.Flat(i))
		}
	}
}

// spEye is the f64 identity matrix.
func spEye(n int) *tensor.Tensor {
	return spBuild(lang.F64, []int{n, n}, func(o []int) float64 {
		if o[0] == o[1] {
			return 1
		}
		return 0
	})
}

// spSlice2 returns matrix b of a [*S, N, N] tensor (b is the flat batch index).
func spSlice2(x *tensor.Tensor, b int) *tensor.Tensor {
	r := x.Rank()
	m, n := x.Shape[r-2], x.Shape[r-1]
	out := tensor.New(lang.F64, []int{m, n})
	for i := range m * n {
		out.F[i] = x.Flat(b*m*n + i)
	}
	return out
}

func spTransposeM(a *tensor.Tensor) *tensor.Tensor {
	return spBuild(lang.F64, []int{a.Shape[1], a.Shape[0]}, func(o []int) float64 { return a.At(o[1], o[0]) })
}

// refBatchMatmul multiplies [*S, M, K] by [*S, K, N] (transB: [*S, N, K]),
// batch shapes broadcast NumPy-style.
func refBatchMatmul(a, b *tensor.Tensor, transB bool) *tensor.Tensor {
	ra, rb := a.Rank(), b.Rank()
	m, k := a.Shape[ra-2], a.Shape[ra-1]
	n := b.Shape[rb-1]
	if transB {
		n = b.Shape[rb-2]
	}
	sa, sb := a.Shape[:ra-2], b.Shape[:rb-2]
	rs := max(len(sa), len(sb))
	batch := make([]int, rs)
	for i := range rs {
		da, db := 1, 1
		if j := i - (rs - len(sa)); j >= 0 {
			da = sa[j]
		}
		if j := i - (rs - len(sb)); j >= 0 {
			db = sb[j]
		}
		batch[i] = max(da, db)
	}
	bidx := func(s []int, full []int) []int {
		out := make([]int, len(s))
		for j := range s {
			v := full[j+rs-len(s)]
			if s[j] == 1 {
				v = 0
			}
			out[j] = v
		}
		return out
	}
	return spF32(spIdx(batch, m, n), func(o []int) float64 {
		z, i, j := o[:rs], o[rs], o[rs+1]
		za, zb := bidx(sa, z), bidx(sb, z)
		s := 0.0
		for q := range k {
			bv := 0.0
			if transB {
				bv = b.At(spIdx(zb, j, q)...)
			} else {
				bv = b.At(spIdx(zb, q, j)...)
			}
			s += a.At(spIdx(za, i, q)...) * bv
		}
		return s
	})
}

func init() {
	eye4 := spF32([]int{4, 4}, func(o []int) float64 {
		if o[0] == o[1] {
			return 1
		}
		return 0
	})
	mmRef := spOne(func(in []*tensor.Tensor) *tensor.Tensor { return refBatchMatmul(in[0], in[1], false) })
	identity := spOne(func(in []*tensor.Tensor) *tensor.Tensor { return in[0] })

	// gemmRef: alpha * A' B' + beta * C, C broadcast to [M, N].
	gemmRef := func(alpha, beta float64, ta, tb, withC bool) func([]*tensor.Tensor) []*tensor.Tensor {
		return spOne(func(in []*tensor.Tensor) *tensor.Tensor {
			a, b := in[0], in[1]
			m, k := a.Shape[0], a.Shape[1]
			if ta {
				m, k = k, m
			}
			n := b.Shape[1]
			if tb {
				n = b.Shape[0]
			}
			return spF32([]int{m, n}, func(o []int) float64 {
				s := 0.0
				for q := range k {
					ai, bi := []int{o[0], q}, []int{q, o[1]}
					if ta {
						ai = []int{q, o[0]}
					}
					if tb {
						bi = []int{o[1], q}
					}
					av, bv := a.At(ai...), b.At(bi...)
					s += av * bv
				}
				if !withC {
					return alpha * s
				}
				c := in[2]
				ci := make([]int, c.Rank())
				for d := range ci {
					if v := o[d+2-c.Rank()]; c.Shape[d] != 1 {
						ci[d] = v
					}
				}
				return alpha*s + beta*c.At(ci...)
			})
		})
	}

	register(
		opCase{op: "matmul", name: "hand 2x2", inputs: []*tensor.Tensor{floats([]int{2, 2}, 1, 2, 3, 4), floats([]int{2, 2}, 5, 6, 7, 8)},
			want: spConst(floats([]int{2, 2}, 19, 22, 43, 50))},
		opCase{op: "matmul", name: "A times I is A", inputs: []*tensor.Tensor{randn(1, 3, 4), eye4}, want: identity},
		opCase{op: "matmul", name: "I times B is B", inputs: []*tensor.Tensor{eye4, randn(2, 4, 5)},
			want: spOne(func(in []*tensor.Tensor) *tensor.Tensor { return in[1] })},
		opCase{op: "matmul", name: "random vs triple loop", inputs: []*tensor.Tensor{randn(3, 5, 7), randn(4, 7, 3)}, want: mmRef},
		opCase{op: "matmul_nt", name: "random vs loop", inputs: []*tensor.Tensor{randn(5, 3, 4), randn(6, 5, 4)},
			want: spOne(func(in []*tensor.Tensor) *tensor.Tensor { return refBatchMatmul(in[0], in[1], true) })},
		opCase{op: "matmul_tn", name: "random vs loop", inputs: []*tensor.Tensor{randn(7, 4, 3), randn(8, 4, 5)},
			want: spOne(func(in []*tensor.Tensor) *tensor.Tensor {
				a, b := in[0], in[1]
				return spF32([]int{3, 5}, func(o []int) float64 {
					s := 0.0
					for k := range 4 {
						s += a.At(k, o[0]) * b.At(k, o[1])
					}
					return s
				})
			})},
		opCase{op: "batch_matmul", name: "two batch axes vs loop", inputs: []*tensor.Tensor{randn(9, 2, 3, 2, 4), randn(10, 2, 3, 4, 3)}, want: mmRef},
		opCase{op: "batch_matmul", name: "no batch axes", inputs: []*tensor.Tensor{randn(11, 3, 2), randn(12, 2, 4)}, want: mmRef},
		opCase{op: "batch_matmul_nt", name: "vs loop", inputs: []*tensor.Tensor{randn(13, 2, 3, 4), randn(14, 2, 5, 4)},
			want: spOne(func(in []*tensor.Tensor) *tensor.Tensor { return refBatchMatmul(in[0], in[1], true) })},
		opCase{op: "matmul_broadcast", name: "[2,1,3,4] x [3,4,2]", inputs: []*tensor.Tensor{randn(15, 2, 1, 3, 4), randn(16, 3, 4, 2)}, want: mmRef},
		opCase{op: "matmul_broadcast", name: "[3,4] x [2,4,2]", inputs: []*tensor.Tensor{randn(17, 3, 4), randn(18, 2, 4, 2)}, want: mmRef},
		opCase{op: "linear", name: "vs loop", inputs: []*tensor.Tensor{randn(19, 2, 3, 4), randn(20, 4, 5), randn(21, 5)},
			want: spOne(func(in []*tensor.Tensor) *tensor.Tensor {
				x, w, b := in[0], in[1], in[2]
				return spF32([]int{2, 3, 5}, func(o []int) float64 {
					s := 0.0
					for k := range 4 {
						s += x.At(o[0], o[1], k) * w.At(k, o[2])
					}
					return s + b.At(o[2])
				})
			})},
		opCase{op: "linear_nobias", name: "vs loop", inputs: []*tensor.Tensor{randn(22, 2, 3, 4), randn(23, 4, 5)},
			want: spOne(func(in []*tensor.Tensor) *tensor.Tensor {
				return refBatchMatmul(in[0], in[1], false)
			})},
		opCase{op: "gemm", name: "defaults, C [M, N]", inputs: []*tensor.Tensor{randn(24, 3, 4), randn(25, 4, 5), randn(26, 3, 5)},
			want: gemmRef(1, 1, false, false, true)},
		opCase{op: "gemm", name: "transA, alpha, beta, C [N]", attrs: spA("alpha", aFloat(0.5), "beta", aFloat(2), "transA", aInt(1)),
			inputs: []*tensor.Tensor{randn(27, 4, 3), randn(28, 4, 5), randn(29, 5)}, want: gemmRef(0.5, 2, true, false, true)},
		opCase{op: "gemm", name: "transB, C [M, 1]", attrs: spA("alpha", aFloat(-1.5), "beta", aFloat(0.25), "transB", aInt(1)),
			inputs: []*tensor.Tensor{randn(30, 3, 4), randn(31, 5, 4), randn(32, 3, 1)}, want: gemmRef(-1.5, 0.25, false, true, true)},
		opCase{op: "gemm", name: "transA and transB, scalar C", attrs: spA("alpha", aFloat(2), "beta", aFloat(-1), "transA", aInt(1), "transB", aInt(1)),
			inputs: []*tensor.Tensor{randn(33, 4, 3), randn(34, 5, 4), randn(35)}, want: gemmRef(2, -1, true, true, true)},
		opCase{op: "gemm", name: "hand", attrs: spA("alpha", aFloat(2), "beta", aFloat(3)),
			inputs: []*tensor.Tensor{floats([]int{1, 2}, 1, 2), floats([]int{2, 2}, 1, 0, 0, 1), floats([]int{2}, 10, 20)},
			want:   spConst(floats([]int{1, 2}, 32, 64))},
		opCase{op: "gemm", name: "C [1, N]", attrs: spA("beta", aFloat(0.5)),
			inputs: []*tensor.Tensor{randn(48, 2, 3), randn(49, 3, 4), randn(50, 1, 4)}, want: gemmRef(1, 0.5, false, false, true)},
		opCase{op: "gemm_noc", name: "transA and transB", attrs: spA("alpha", aFloat(0.5), "transA", aInt(1), "transB", aInt(1)),
			inputs: []*tensor.Tensor{randn(36, 4, 3), randn(37, 2, 4)}, want: gemmRef(0.5, 0, true, true, false)},
		opCase{op: "gemm_noc", name: "defaults", inputs: []*tensor.Tensor{randn(38, 3, 4), randn(39, 4, 2)}, want: gemmRef(1, 0, false, false, false)},
		opCase{op: "einsum", name: "ij,jk->ik", inputs: []*tensor.Tensor{randn(40, 3, 4), randn(41, 4, 2)}, want: mmRef},
		opCase{op: "einsum", name: "bij,bjk->bik", attrs: spA("batch", aInt(1)), inputs: []*tensor.Tensor{randn(42, 2, 3, 4), randn(43, 2, 4, 2)}, want: mmRef},
		opCase{op: "einsum", name: "i,j->ij outer", attrs: spA("contract", aInt(0)), inputs: []*tensor.Tensor{floats([]int{3}, 1, 2, 3), floats([]int{2}, 10, -1)},
			want: spConst(floats([]int{3, 2}, 10, -1, 20, -2, 30, -3))},
		opCase{op: "einsum", name: "i,i-> dot", inputs: []*tensor.Tensor{floats([]int{3}, 1, 2, 3), floats([]int{3}, 4, -5, 6)},
			want: spConst(floats(nil, 12))},
		opCase{op: "einsum", name: "bi,bi->b", attrs: spA("batch", aInt(1)), inputs: []*tensor.Tensor{floats([]int{2, 2}, 1, 2, 3, 4), floats([]int{2, 2}, 5, 6, 7, 8)},
			want: spConst(floats([]int{2}, 17, 53))},
		opCase{op: "einsum", name: "ijk,jkl->il two contracted axes", attrs: spA("contract", aInt(2)), inputs: []*tensor.Tensor{randn(44, 2, 3, 4), randn(45, 3, 4, 2)},
			want: spOne(func(in []*tensor.Tensor) *tensor.Tensor {
				a, b := in[0], in[1]
				return spF32([]int{2, 2}, func(o []int) float64 {
					s := 0.0
					for j := range 3 {
						for k := range 4 {
							s += a.At(o[0], j, k) * b.At(j, k, o[1])
						}
					}
					return s
				})
			})},
		opCase{op: "einsum", name: "ik,kjl->ijl", inputs: []*tensor.Tensor{randn(51, 2, 3), randn(52, 3, 2, 2)},
			want: spOne(func(in []*tensor.Tensor) *tensor.Tensor {
				a, b := in[0], in[1]
				return spF32([]int{2, 2, 2}, func(o []int) float64 {
					s := 0.0
					for k := range 3 {
						s += a.At(o[0], k) * b.At(k, o[1], o[2])
					}
					return s
				})
			})},
		opCase{op: "trace", name: "hand", inputs: []*tensor.Tensor{spSeq(2, 3, 3)}, want: spConst(floats([]int{2}, 15, 42))},
		opCase{op: "trace", name: "rank 2", inputs: []*tensor.Tensor{spSeq(2, 2)}, want: spConst(floats(nil, 5))},
		opCase{op: "diagonal", name: "hand", inputs: []*tensor.Tensor{spSeq(2, 3, 3)}, want: spConst(floats([]int{2, 3}, 1, 5, 9, 10, 14, 18))},
		opCase{op: "inverse", name: "permutation needs pivoting", inputs: []*tensor.Tensor{floats([]int{3, 3}, 0, 1, 0, 0, 0, 2, 4, 0, 0)},
			want: spConst(floats([]int{3, 3}, 0, 0, 0.25, 1, 0, 0, 0, 0.5, 0))},
		opCase{op: "inverse", name: "hand 2x2", inputs: []*tensor.Tensor{floats([]int{2, 2}, 4, 7, 2, 6)},
			want: spOne(func([]*tensor.Tensor) *tensor.Tensor {
				return floats([]int{2, 2}, 0.6, -0.7, -0.2, 0.4)
			}), tol: 1e-6},
	)

	// Random SPD matrices M Mᵀ + n I for cholesky; well-conditioned
	// matrices (random + 4 I) for inverse.
	spd := func(seed uint64, b, n int) *tensor.Tensor {
		m := randn(seed, b, n, n)
		return spF32([]int{b, n, n}, func(o []int) float64 {
			s := 0.0
			for k := range n {
				s += m.At(o[0], o[1], k) * m.At(o[0], o[2], k)
			}
			if o[1] == o[2] {
				s += float64(n)
			}
			return s
		})
	}
	invBase := randn(47, 3, 4, 4)
	register(
		opCase{op: "cholesky", name: "L Lt reconstructs random SPD", inputs: []*tensor.Tensor{spd(46, 2, 4)},
			check: func(t *testing.T, in, out []*tensor.Tensor) {
				if got := out[0].Shape; len(got) != 3 || got[0] != 2 || got[1] != 4 || got[2] != 4 {
					t.Fatalf("shape %v", got)
				}
				for b := range 2 {
					l := spSlice2(out[0], b)
					for i := range 4 {
						if l.At(i, i) <= 0 {
							t.Fatalf("batch %d: L[%d,%d] = %v not positive", b, i, i, l.At(i, i))
						}
						for j := i + 1; j < 4; j++ {
							if l.At(i, j) != 0 {
								t.Fatalf("batch %d: L[%d,%d] = %v above the diagonal", b, i, j, l.At(i, j))
							}
						}
					}
					spNear(t, "L Lt", spMatmul(l, spTransposeM(l)), spSlice2(in[0], b), 1e-4)
				}
			}},
		opCase{op: "cholesky", name: "hand, the upper triangle is not read", inputs: []*tensor.Tensor{floats([]int{2, 2}, 4, 99, 2, 5)},
			check: func(t *testing.T, in, out []*tensor.Tensor) {
				spNear(t, "L", out[0], floats([]int{2, 2}, 2, 0, 1, 2), 1e-6)
			}},
		opCase{op: "inverse", name: "A inv(A) is I", inputs: []*tensor.Tensor{spF32([]int{3, 4, 4}, func(o []int) float64 {
			v := invBase.At(o...)
			if o[1] == o[2] {
				v += 4
			}
			return v
		})},
			check: func(t *testing.T, in, out []*tensor.Tensor) {
				for b := range 3 {
					a, inv := spSlice2(in[0], b), spSlice2(out[0], b)
					spNear(t, "A inv(A)", spMatmul(a, inv), spEye(4), 1e-5)
					spNear(t, "inv(A) A", spMatmul(inv, a), spEye(4), 1e-5)
				}
			}},
	)
}
