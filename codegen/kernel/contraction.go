package kernel

import (
	"tofuc/lang"
	"tofuc/lang/ir"
	"tofuc/runtime/plan"
)

// GEMM describes a kernel whose first stage is a sum of products,
// C[batch, rows, cols] = Σ_k A[batch, rows, k] · B[batch, cols, k],
// around which the rest of the stage (a bias, a scale) and the later
// stages are an epilogue. Every variable of the output is a batch
// variable (read by both factors, or by neither), a row variable (read by
// A only) or a column variable (read by B only); a host code generator
// packs A and B into panels and multiplies them with a register-blocked,
// vectorised micro-kernel (codegen/emit's gemm, blocked as
// codegen/blocking decides).
type GEMM struct {
	Sum *ir.Reduce
	// A and B are the factors; A is the side with fewer elements, whose
	// values are broadcast over the vector lanes of B.
	A, B  ir.Expr
	Batch []*ir.Var // in output order
	Rows  []*ir.Var
	Cols  []*ir.Var
	K     []*ir.Var // the sum's variables
	// PackedA, when not nil, is the key of an argument holding A already
	// packed for the host micro-kernel (computed once with the weights by
	// the kernel PackKernel returns, ReadPacked); the host flavour reads it instead
	// of packing A.
	PackedA any
	// SharedB, when not nil, is the key of a workspace argument into
	// which the host flavour's first items pack all of B for its tasks
	// (codegen/blocking.SharedBLen); the GPU flavour does not read it.
	SharedB any
	// BPacked says that SharedB holds B packed once with the weights
	// (by the kernel PackBKernel returns: every batch index's B where B
	// reads a batch variable, else one, codegen/blocking.PackedBLen),
	// which the host flavour reads and does not pack.
	BPacked bool
	// batchA and batchB say whether A and B may differ from one batch
	// index to the next (ReadsBatch).
	batchA, batchB bool
}

// PackedFactor is the factor a packing kernel (PackOnly) packs: B where
// BPacked, else A.
func (g *GEMM) PackedFactor() ir.Expr {
	if g.BPacked {
		return g.B
	}
	return g.A
}

// Shape is g's extents as the plan records them (plan.GEMM): A's side
// as rows, B's as columns.
func (g *GEMM) Shape() plan.GEMM {
	return plan.GEMM{Batch: extents(g.Batch), Rows: extents(g.Rows), Cols: extents(g.Cols), Depth: extents(g.K), RowsPacked: g.PackedA != nil, ColsPacked: g.BPacked}
}

// extents is the product of vars' constant extents.
func extents(vars []*ir.Var) int64 {
	n := int64(1)
	for _, v := range vars {
		c, _ := v.Extent.IsConst()
		n *= c
	}
	return n
}

// Swap makes B the row side and A the column side.
func (g *GEMM) Swap() {
	g.A, g.B = g.B, g.A
	g.Rows, g.Cols = g.Cols, g.Rows
	g.batchA, g.batchB = g.batchB, g.batchA
}

// ReadsBatch says whether factor, A or B, may differ from one batch
// index to the next (a grouped convolution's weights, a stack of cells'
// R), so that it cannot be packed once for all of them. A factor that
// names a batch variable without depending on it (matmul_broadcast's
// weight, read through a local at every batch index) does not.
func (g *GEMM) ReadsBatch(factor ir.Expr) bool {
	if factor == g.B {
		return g.batchB
	}
	return g.batchA
}

// FactorKeys are the keys of the argument buffers a factor of k's GEMM
// reads (through the locals it recomputes).
func (k *Kernel) FactorKeys(factor ir.Expr) []any {
	var out []any
	seen := map[*ir.Def]bool{}
	var walk func(e ir.Expr)
	walk = func(e ir.Expr) {
		ir.Walk(e, func(x ir.Expr) bool {
			if a, ok := x.(*ir.Access); ok {
				src := k.source[a.T]
				switch {
				case src.Arg >= 0:
					out = append(out, k.Args[src.Arg].Key)
				case src.Local != nil && !seen[src.Local]:
					seen[src.Local] = true
					walk(src.Local.Body)
				}
			}
			return true
		})
	}
	walk(factor)
	return out
}

// PackKernel returns the kernel that packs k's A factor into a buffer
// of elements floats, to run once with the weights (in the host flavour
// only: PackOnly); SetPackKey names the buffer. elements is the packed
// buffer's length, which the host flavour's register blocking decides
// (codegen/blocking.PackedLen). The buffer's key is not part of the
// kernel's IR: packing kernels of equal IR reading the same buffers
// write the same values.
func (k *Kernel) PackKernel(elements int64) *Kernel {
	pk := *k
	pk.Label = k.Label + " (packed weights)"
	pk.PackOnly = true
	pk.Args = append(append([]Arg(nil), k.Args[:len(k.Args)-1]...), Arg{DType: lang.F32, Shape: []int64{elements}, Written: true})
	g := *k.GEMM
	pk.GEMM = &g
	return &pk
}

// PackBKernel is PackKernel for k's B factor, all of it packed in the
// panels of a shared B (codegen/blocking.PackedBLen floats).
func (k *Kernel) PackBKernel(elements int64) *Kernel {
	pk := k.PackKernel(elements)
	pk.GEMM.BPacked = true
	return pk
}

// SetPackKey names the buffer packing kernel k writes: its output's key,
// and a packed B's SharedB.
func (k *Kernel) SetPackKey(key any) {
	k.Args[len(k.Args)-1].Key = key
	if k.GEMM.BPacked {
		k.GEMM.SharedB = key
	}
}

// ReadPacked makes k read its A factor from the buffer key of elements
// floats that PackKernel's kernel writes: the packed buffer becomes k's
// argument before its output.
func (k *Kernel) ReadPacked(key any, elements int64) {
	k.argBeforeOutput(Arg{Key: key, DType: lang.F32, Shape: []int64{elements}})
	k.GEMM.PackedA = key
}

// ReadPackedB is ReadPacked for B, packed by PackBKernel's kernel.
func (k *Kernel) ReadPackedB(key any, elements int64) {
	k.argBeforeOutput(Arg{Key: key, DType: lang.F32, Shape: []int64{elements}})
	k.GEMM.SharedB, k.GEMM.BPacked = key, true
}

// ShareB gives k's GEMM a workspace argument of elements floats, key,
// into which its host flavour packs all of B for its tasks.
func (k *Kernel) ShareB(key any, elements int64) {
	k.argBeforeOutput(Arg{Key: key, DType: lang.F32, Shape: []int64{elements}})
	k.GEMM.SharedB = key
}

// argBeforeOutput adds an argument before k's output (the written one,
// which stays last).
func (k *Kernel) argBeforeOutput(a Arg) {
	out := k.Args[len(k.Args)-1]
	k.Args = append(append(k.Args[:len(k.Args)-1:len(k.Args)-1], a), out)
}

// gemmFactorType says whether a factor of type t multiplies exactly
// enough in f32.
func gemmFactorType(t lang.DType) bool {
	return t.IsFloat() && t != lang.F64
}

// A batch of vector products is computed element by element (gemm) where
// its sums are at most maxVectorProductDepth terms (a depthwise
// convolution's window, 49 taps at 7 × 7) or its batch is at least
// minVectorProductBatch (the channels of a grouped or depthwise
// convolution of a larger window, whose per-channel products tiled took
// twice as long). A few long sums, a stack of two recurrent cells' state
// times R at batch 1 (128 terms), stream their weights, packed once, in
// the micro-kernel: element by element they took 83 µs a step for 2 ×
// 512 sums of 128, 1.6 GFLOP/s.
const (
	maxVectorProductDepth = 64
	minVectorProductBatch = 16
)

// gemm recognises the first stage of a contraction kernel whose sum
// and factors are floating point no wider than f32: the host GEMM
// multiplies in f32, which would lose an f64 model's precision (those
// keep the plain loop, summed in double).
//
// A batch of single rows, each against a factor of its own (a
// depthwise convolution: a channel's 9 weights against its image), is
// not a matrix product: tiled, it would pack both factors for every
// batch index to run a sliver of a micro-kernel (or pad a tensor
// core's 16 rows from one); computed element by element, its sums
// vectorise along the output's columns. MobileNetV2's 3 × 3 depthwise
// convolutions of 384 channels at 14 × 14 took 1.08 ms a launch tiled,
// 0.32 ms element by element (docs/benchmarks.md).
func (b *builder) gemm() *GEMM {
	k := b.k
	if k.Kind != Contraction || len(k.Reductions) != 1 {
		return nil
	}
	r := k.Reductions[0]
	if r.Kind != ir.Sum || !gemmFactorType(r.T) || !k.Stages[0].Tensor.DType.IsFloat() {
		return nil
	}
	m := ir.Product(r)
	if m == nil || !gemmFactorType(m.L.Type()) || !gemmFactorType(m.R.Type()) || !plainFactor(m.L) || !plainFactor(m.R) {
		return nil
	}
	c := &GEMM{Sum: r, A: m.L, B: m.R, K: r.Vars}
	inL, inR := ir.VarRefs(m.L), ir.VarRefs(m.R)
	for _, v := range k.Vars {
		switch {
		case inL[v] == inR[v]:
			c.Batch = append(c.Batch, v)
		case inL[v]:
			c.Rows = append(c.Rows, v)
		default:
			c.Cols = append(c.Cols, v)
		}
	}
	if ir.Extent(c.Rows) > ir.Extent(c.Cols) {
		c.A, c.B = c.B, c.A
		c.Rows, c.Cols = c.Cols, c.Rows
	}
	if ir.Extent(c.Rows) == 1 && (ir.Extent(c.K) <= maxVectorProductDepth || ir.Extent(c.Batch) >= minVectorProductBatch) && k.bothStep(c) && k.vectorises(c.A) && k.vectorises(c.B) {
		return nil // a batch of vector products, vectorised element by element
	}
	c.batchA, c.batchB = k.dependsOnAny(c.A, c.Batch), k.dependsOnAny(c.B, c.Batch)
	return c
}

// dependsOnAny reports whether factor's value may change along one of
// vars: it steps along it (stepsAlong) or names it outside the indices
// of its reads.
func (k *Kernel) dependsOnAny(factor ir.Expr, vars []*ir.Var) bool {
	for _, v := range vars {
		if k.stepsAlong(factor, v) || namesOutsideReads(factor, v) {
			return true
		}
	}
	return false
}

// namesOutsideReads reports whether e refers to v other than in the
// index of a read (a select on v, v as a value).
func namesOutsideReads(e ir.Expr, v *ir.Var) bool {
	switch x := e.(type) {
	case *ir.VarRef:
		return x.V == v
	case *ir.Access:
		return x.Default != nil && namesOutsideReads(x.Default, v)
	}
	for _, c := range ir.Children(e) {
		if namesOutsideReads(c, v) {
			return true
		}
	}
	return false
}

// bothStep reports whether both factors of c change along one of its
// batch variables (stepsAlong). An operand broadcast over a batch
// (matmul_broadcast's weight) names the batch's variables without
// reading along them: the batch is then the other factor's rows.
func (k *Kernel) bothStep(c *GEMM) bool {
	for _, v := range c.Batch {
		if k.stepsAlong(c.A, v) && k.stepsAlong(c.B, v) {
			return true
		}
	}
	return false
}

// stepsAlong reports whether factor's value may change along v: one of
// its reads has v in an index, followed through recomputed locals that
// are one read each, with a coefficient other than zero or in an index
// that is not affine.
func (k *Kernel) stepsAlong(factor ir.Expr, v *ir.Var) bool {
	steps := false
	ir.Walk(factor, func(e ir.Expr) bool {
		if a, ok := e.(*ir.Access); ok && !steps {
			for _, d := range k.readIndex(a) {
				steps = steps || !d.affine && ir.VarRefs(d.expr)[v] || d.affine && d.index.Coef(v) != 0
			}
		}
		return !steps
	})
	return steps
}

// vectorises reports whether the threads form, which vectorises a
// kernel along its innermost output variable, reads factor there at
// steps of at most 2 elements (a depthwise convolution's input along
// its columns, strided or not), rather than through gathers (a single
// query's attention scores, keys D floats apart).
func (k *Kernel) vectorises(factor ir.Expr) bool {
	inner := k.Vars[len(k.Vars)-1]
	ok := true
	ir.Walk(factor, func(e ir.Expr) bool {
		if a, isRead := e.(*ir.Access); isRead && ok {
			index := k.readIndex(a)
			for d, x := range index {
				switch {
				case !x.affine:
					ok = !ir.VarRefs(x.expr)[inner]
				case d < len(index)-1:
					ok = x.index.Coef(inner) == 0
				default:
					ok = abs(x.index.Coef(inner)) <= 2
				}
				if !ok {
					break
				}
			}
		}
		return ok
	})
	return ok
}

// indexDim is one dimension of a read's index: affine (index), or not
// (expr, the index expression as written).
type indexDim struct {
	affine bool
	index  ir.Affine
	expr   ir.Expr
}

// readIndex is the index of read a, followed through recomputed locals
// whose body is one read as long as every dimension is affine (as
// argRead follows them, whatever the dtypes and the checks).
func (k *Kernel) readIndex(a *ir.Access) []indexDim {
	dims := make([]indexDim, len(a.Index))
	all := true
	for d, x := range a.Index {
		dims[d].expr = x
		dims[d].index, dims[d].affine = ir.AffineOf(x, nil)
		all = all && dims[d].affine
	}
	for all {
		src, found := k.Source(a.T)
		if !found || src.Local == nil {
			break
		}
		inner, isRead := src.Local.Body.(*ir.Access)
		if !isRead {
			break
		}
		at := map[*ir.Var]ir.Affine{}
		for i, v := range src.Local.Vars {
			at[v] = dims[i].index
		}
		index, ok := substitute(inner.Index, at)
		if !ok {
			break
		}
		a, dims = inner, make([]indexDim, len(index))
		for d := range index {
			dims[d] = indexDim{affine: true, index: index[d], expr: inner.Index[d]}
		}
	}
	return dims
}

func abs(x int64) int64 { return max(x, -x) }

// plainFactor reports whether e can be evaluated for any index values
// once per element: no reduction and no opaque call.
func plainFactor(e ir.Expr) bool {
	ok := true
	ir.Walk(e, func(x ir.Expr) bool {
		switch x.(type) {
		case *ir.Reduce, *ir.Opaque:
			ok = false
		}
		return ok
	})
	return ok
}
