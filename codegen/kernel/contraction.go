package kernel

import (
	"tofuc/lang"
	"tofuc/lang/ir"
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
	// the kernel PackKernel returns); the host flavour reads it instead
	// of packing A.
	PackedA any
	// SharedB, when not nil, is the key of a workspace argument into
	// which the host flavour's first items pack all of B for its tasks
	// (codegen/blocking.SharedBLen); the GPU flavour does not read it.
	SharedB any
}

// Swap makes B the row side and A the column side.
func (g *GEMM) Swap() {
	g.A, g.B = g.B, g.A
	g.Rows, g.Cols = g.Cols, g.Rows
}

// ReadsBatch says whether factor reads a batch variable: such a factor
// differs from one batch index to the next (a grouped convolution's
// weights), so it cannot be packed once for all of them.
func (g *GEMM) ReadsBatch(factor ir.Expr) bool {
	refs := ir.VarRefs(factor)
	for _, v := range g.Batch {
		if refs[v] {
			return true
		}
	}
	return false
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

// PackKernel returns the kernel that packs k's A factor into the buffer
// key (to run once with the weights, in the host flavour only: PackOnly),
// and makes k read it: the packed buffer becomes k's argument before its
// output. elements is the packed buffer's length, which the host
// flavour's register blocking decides (codegen/blocking.PackedLen).
func (k *Kernel) PackKernel(key any, elements int64) *Kernel {
	packed := Arg{Key: key, DType: lang.F32, Shape: []int64{elements}}
	pk := *k
	pk.Label = k.Label + " (packed weights)"
	pk.PackOnly = true
	pk.Args = append(append([]Arg(nil), k.Args[:len(k.Args)-1]...), Arg{Key: key, DType: lang.F32, Shape: packed.Shape, Written: true})
	g := *k.GEMM
	pk.GEMM = &g
	k.argBeforeOutput(packed)
	k.GEMM.PackedA = key
	return &pk
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

// gemm recognises the first stage of a contraction kernel whose sum
// and factors are floating point no wider than f32: the host GEMM
// multiplies in f32, which would lose an f64 model's precision (those
// keep the plain loop, summed in double).
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
	return c
}

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

// Tile is how the GPU flavour tiles a contraction (the Tiled form): a
// block of Threads threads computes M rows × N columns of the output
// for one batch index, each thread MicroM × MicroN results, and the
// depth is walked in stages of K values of both factors, held in shared
// memory in double. Along a side of S positions with micro-tile μ there
// are T = S/μ threads; thread t owns the μ/4 runs of 4 consecutive
// positions q·4T + 4t + r (q < μ/4, r < 4), so that it reads its values
// of a stage with 16-byte vector loads and a warp's stores are runs of
// consecutive columns.
type Tile struct {
	M, N, K        int64
	MicroM, MicroN int64 // results a thread owns along the rows and along the columns
	Threads        int64
	RowTiles       int64 // tiles along the rows, ⌈rows/M⌉
	ColTiles       int64 // tiles along the columns, ⌈cols/N⌉
	Tiles          int64 // batch · RowTiles · ColTiles
}

// Tile rule (docs/codegen.md): a side of the tile is the smallest of 16,
// 32 and 64 covering the output's extent on that side (64 above), with 4
// results a thread along it, and a tile has at least 32 threads (a
// 16 × 16 tile becomes 16 × 32). When both sides are 64 and the output
// has at least TileLargeMin tiles with every side of TileLarge or more
// positions widened to TileLarge, those sides are TileLarge with
// TileLargeMicro results a thread (128 × 128 tiles of 8 × 8, 128 × 64 of
// 8 × 4, always 256 threads); fewer tiles
// would leave multiprocessors idle (a batch-1 convolution's 7 × 7 image
// keeps its small tiles). The depth is staged TileK at a time.
const (
	TileMicro      = 4
	TileK          = 16
	TileMax        = 64
	TileLarge      = 128
	TileLargeMicro = 8
	TileLargeMin   = 128
	TilePad        = 2 // doubles after each depth row of a stage in shared memory
)

// Tile is the tiling of g (the rule above).
func (g *GEMM) Tile() Tile {
	side := func(n int64) int64 {
		s := int64(16)
		for s < TileMax && s < n {
			s *= 2
		}
		return s
	}
	rows, cols := ir.Extent(g.Rows), ir.Extent(g.Cols)
	t := Tile{M: side(rows), N: side(cols), K: TileK, MicroM: TileMicro, MicroN: TileMicro}
	if t.M*t.N < 32*TileMicro*TileMicro {
		t.N *= 2
	}
	wide := func(n, s int64) int64 {
		if n >= TileLarge {
			return TileLarge
		}
		return s
	}
	if m, n := wide(rows, t.M), wide(cols, t.N); t.M == TileMax && t.N == TileMax && (m > t.M || n > t.N) && ir.Extent(g.Batch)*ceilDiv(rows, m)*ceilDiv(cols, n) >= TileLargeMin {
		if m > t.M {
			t.M, t.MicroM = m, TileLargeMicro
		}
		if n > t.N {
			t.N, t.MicroN = n, TileLargeMicro
		}
	}
	t.Threads = t.M / t.MicroM * (t.N / t.MicroN)
	t.RowTiles = ceilDiv(rows, t.M)
	t.ColTiles = ceilDiv(cols, t.N)
	t.Tiles = ir.Extent(g.Batch) * t.RowTiles * t.ColTiles
	return t
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// SharedBytes is the static shared memory of a Tiled kernel: a stage of
// each factor in double, K rows of M + TilePad and of N + TilePad values.
func (t Tile) SharedBytes() int64 { return 8 * t.K * (t.M + t.N + 2*TilePad) }
