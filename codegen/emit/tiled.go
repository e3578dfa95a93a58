package emit

import (
	"github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"tofuc/codegen/kernel"
	tir "tofuc/lang/ir"
)

// The GPU flavour of a contraction (kernel.Tiled) is a tiled matrix
// product with register blocking (docs/codegen.md, "The tiled form"):
//
//	for each tile (batch b, rows [m0, m0+M), columns [n0, n0+N)), blocks striding:
//	  C = 0                                     16 doubles a thread
//	  for each stage of K values of the depth, from k0:
//	    As[kk·M + m] = A[b, m0+m, k0+kk]         f32, the block's threads together, the
//	    Bs[kk·N + n] = B[b, n0+n, k0+kk]         lambdas evaluated, 0 past the edges
//	    barrier
//	    for kk < K: C[i,j] = fma(As[kk·M + ty + i·M/4], Bs[kk·N + tx + j·N/4], C[i,j])  in double
//	    barrier
//	  epilogue: each of the thread's elements inside the output: its stages
//	  with the sum replaced by C[i,j], stored
//
// Every thread of a block runs the same trip counts (tiles, stages, the
// loads' loop), so the barriers are uniform: edge tiles are padded by
// predicated loads (zero) and stores, never by an early exit.

// tiledLoop lowers a Tiled kernel (GPU flavour).
func (f *fn) tiledLoop() {
	g := f.k.GEMM
	t := g.Tile()
	rows, cols, depth := kernel.Extent(g.Rows), kernel.Extent(g.Cols), kernel.Extent(g.K)
	shared := func(name string, n int64) *ir.Global {
		arr := types.NewArray(uint64(n), types.Float)
		s := f.m.M.NewGlobalDef(f.f.Name()+"."+name, constant.NewUndef(arr))
		s.Linkage = enum.LinkageInternal
		s.AddrSpace = sharedSpace
		s.Typ = nil // recomputed with the address space
		s.Align = 16
		return s
	}
	as, bs := shared("as", t.K*t.M), shared("bs", t.K*t.N)
	const mu = kernel.TileMicro
	nacc := uint64(mu * mu)
	dvec := types.NewVector(nacc, types.Double)
	fma := f.m.declare("llvm.fma.v16f64", dvec, dvec, dvec, dvec)
	tid := f.sreg("tid.x")
	tx := f.b.NewURem(tid, i64(t.N/mu))
	ty := f.b.NewUDiv(tid, i64(t.N/mu))
	perBatch := t.RowTiles * t.ColTiles
	f.loop(f.sreg("ctaid.x"), i64(t.Tiles), f.sreg("nctaid.x"), func(tile value.Value) {
		f.unflatten(f.b.NewUDiv(tile, i64(perBatch)), g.Batch, extents(g.Batch))
		rest := f.b.NewURem(tile, i64(perBatch))
		m0 := f.b.NewMul(f.b.NewUDiv(rest, i64(t.ColTiles)), i64(t.M))
		n0 := f.b.NewMul(f.b.NewURem(rest, i64(t.ColTiles)), i64(t.N))
		acc := f.fold(i64(0), i64(depth), i64(t.K), constant.NewZeroInitializer(dvec), func(k0, acc value.Value) value.Value {
			f.stageFactor(g.A, g.Rows, as, t.M, rows, m0, k0, tid, t)
			f.stageFactor(g.B, g.Cols, bs, t.N, cols, n0, k0, tid, t)
			f.barrier()
			acc = f.fold(i64(0), i64(t.K), i64(1), acc, func(kk, acc value.Value) value.Value {
				var a, b [mu]value.Value
				for i := range a {
					a[i] = f.b.NewFPExt(f.sharedLoad(as, f.b.NewAdd(f.b.NewMul(kk, i64(t.M)), f.b.NewAdd(ty, i64(int64(i)*t.M/mu)))), types.Double)
					b[i] = f.b.NewFPExt(f.sharedLoad(bs, f.b.NewAdd(f.b.NewMul(kk, i64(t.N)), f.b.NewAdd(tx, i64(int64(i)*t.N/mu)))), types.Double)
				}
				// Element i·4 + j multiplies a[i] by b[j]; the product of
				// two floats is exact in double, so the fused multiply-add
				// rounds as the interpreter's multiply and add do.
				var av, bv value.Value = constant.NewUndef(dvec), constant.NewUndef(dvec)
				for e := int64(0); e < int64(nacc); e++ {
					av = f.b.NewInsertElement(av, a[e/mu], i32(e))
					bv = f.b.NewInsertElement(bv, b[e%mu], i32(e))
				}
				return f.b.NewCall(fma, av, bv, acc)
			})
			f.barrier()
			return acc
		})
		f.loop(i64(0), i64(int64(nacc)), i64(1), func(e value.Value) {
			gm := f.b.NewAdd(m0, f.b.NewAdd(ty, f.b.NewMul(f.b.NewUDiv(e, i64(mu)), i64(t.M/mu))))
			gn := f.b.NewAdd(n0, f.b.NewAdd(tx, f.b.NewMul(f.b.NewURem(e, i64(mu)), i64(t.N/mu))))
			inside := f.b.NewAnd(f.b.NewICmp(enum.IPredSLT, gm, i64(rows)), f.b.NewICmp(enum.IPredSLT, gn, i64(cols)))
			f.ifThen(inside, func() {
				f.unflatten(gm, g.Rows, extents(g.Rows))
				f.unflatten(gn, g.Cols, extents(g.Cols))
				f.hoisted = map[*tir.Reduce]value.Value{g.Sum: f.b.NewExtractElement(acc, e)}
				out := flatIndex(f, f.varValues(f.k.Vars), f.k.Shape)
				f.store(f.bufs[len(f.bufs)-1], out, f.computeStages(), f.k.Out().DType)
				f.hoisted = nil
			})
		})
	})
}

// stageFactor stores a factor's values at side indices [s0, s0+n) and
// depth [k0, k0+K) into shared array sh, sh[kk·n + s] in f32, zero past
// the side's extent or the depth; the block's threads share the work,
// consecutive threads taking consecutive values along the factor's
// contiguous direction. The batch variables are bound.
func (f *fn) stageFactor(factor tir.Expr, side []*tir.Var, sh *ir.Global, n, extentSide int64, s0, k0, tid value.Value, t kernel.Tile) {
	g := f.k.GEMM
	depth := kernel.Extent(g.K)
	alongK := f.contiguousAlong(factor, g.K)
	f.loop(tid, i64(n*t.K), i64(t.Threads), func(e value.Value) {
		var s, kk value.Value
		if alongK {
			s, kk = f.b.NewUDiv(e, i64(t.K)), f.b.NewURem(e, i64(t.K))
		} else {
			kk, s = f.b.NewUDiv(e, i64(n)), f.b.NewURem(e, i64(n))
		}
		gs, gk := f.b.NewAdd(s0, s), f.b.NewAdd(k0, kk)
		inside := f.b.NewAnd(f.b.NewICmp(enum.IPredSLT, gs, i64(extentSide)), f.b.NewICmp(enum.IPredSLT, gk, i64(depth)))
		v := f.branch(inside, func() value.Value {
			f.unflatten(gs, side, extents(side))
			f.unflatten(gk, g.K, extents(g.K))
			return f.factorF32(factor)
		}, func() value.Value { return constant.NewFloat(types.Float, 0) })
		f.b.NewStore(v, f.b.NewGetElementPtr(sh.ContentType, sh, i64(0), f.b.NewAdd(f.b.NewMul(kk, i64(n)), s)))
	})
}

func (f *fn) sharedLoad(sh *ir.Global, i value.Value) value.Value {
	return f.b.NewLoad(types.Float, f.b.NewGetElementPtr(sh.ContentType, sh, i64(0), i))
}
