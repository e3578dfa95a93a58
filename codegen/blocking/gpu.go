package blocking

import (
	"tofuc/codegen/kernel"
	"tofuc/lang/ir"
)

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
	TilePadBytes   = 16 // bytes after each depth row of a stage in shared memory
)

// GPUTile is the tiling of g's GPU flavour (the rule above).
func GPUTile(g *kernel.GEMM) Tile {
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
	if m, n := wide(rows, t.M), wide(cols, t.N); t.M == TileMax && t.N == TileMax && (m > t.M || n > t.N) && ir.Extent(g.Batch)*CeilDiv(rows, m)*CeilDiv(cols, n) >= TileLargeMin {
		if m > t.M {
			t.M, t.MicroM = m, TileLargeMicro
		}
		if n > t.N {
			t.N, t.MicroN = n, TileLargeMicro
		}
	}
	t.Threads = t.M / t.MicroM * (t.N / t.MicroN)
	t.RowTiles = CeilDiv(rows, t.M)
	t.ColTiles = CeilDiv(cols, t.N)
	t.Tiles = ir.Extent(g.Batch) * t.RowTiles * t.ColTiles
	return t
}

// Pad is TilePadBytes in values of elem bytes.
func Pad(elem int64) int64 { return TilePadBytes / elem }
