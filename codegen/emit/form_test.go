package emit

import (
	"testing"

	"tofuc/codegen/blocking"
	"tofuc/codegen/kernel"
	"tofuc/lang"
	tir "tofuc/lang/ir"
	"tofuc/lang/precision"
)

// TestLaunch: grids cover the elements up to 65535 blocks (more blocks
// were slower on an H200: maxGrid), then the blocks stride; kernels
// taking four elements a turn have the turns' grid (turn); a reduction
// of at least BlockReduceMin runs a block per element.
func TestLaunch(t *testing.T) {
	for _, tc := range []struct {
		k                   kernel.Kernel
		form                string
		grid, block, shared int64
	}{
		{kernel.Kernel{Elements: 1 << 20}, "threads", 4096, 256, 0},
		{kernel.Kernel{Elements: 1 << 23}, "threads", 32768, 256, 0},
		{kernel.Kernel{Elements: 1 << 26}, "threads", TurnGrid, 256, 0}, // four elements a turn
		{kernel.Kernel{Elements: 40}, "threads", 1, 64, 0},
		{kernel.Kernel{Kind: kernel.Reduction, Elements: 50000, ReduceLen: 100}, "blocks", 50000, 128, 256},
		{kernel.Kernel{Kind: kernel.Reduction, Elements: 1 << 20, ReduceLen: 4096}, "blocks", 65535, 256, 256},
		{kernel.Kernel{Kind: kernel.Reduction, Elements: 50000, ReduceLen: BlockReduceMin - 1}, "threads", 196, 256, 0},
	} {
		f := FormOf(&tc.k, precision.Exact)
		l := f.Launch(&tc.k, precision.Exact)
		if f.Name() != tc.form || l.Grid != tc.grid || l.Block != tc.block || l.Shared != tc.shared {
			t.Errorf("%+v: %s, grid %d, block %d, shared %d; want %s, %d, %d, %d",
				tc.k, f.Name(), l.Grid, l.Block, l.Shared, tc.form, tc.grid, tc.block, tc.shared)
		}
	}
}

// TestMMALayout: the tensor-core forms share a tile's 16 × 8 products
// so that a lane holds the tiled form's shape of results where it can
// (docs/codegen.md), and refuse a tile their warps cannot share evenly.
func TestMMALayout(t *testing.T) {
	for _, tc := range []struct {
		tile   blocking.Tile
		depth  int64
		wm, wn int64
		ok     bool
	}{
		{blocking.Tile{M: 128, N: 128, K: 16, Threads: 256}, 8, 4, 4, true},
		{blocking.Tile{M: 64, N: 64, K: 16, Threads: 256}, 16, 2, 2, true},
		{blocking.Tile{M: 128, N: 64, K: 16, Threads: 256}, 8, 2, 4, true},
		{blocking.Tile{M: 16, N: 32, K: 16, Threads: 32}, 16, 1, 4, true},
		{blocking.Tile{M: 16, N: 32, K: 16, Threads: 48}, 8, 0, 0, false},  // not whole warps
		{blocking.Tile{M: 16, N: 16, K: 16, Threads: 96}, 8, 0, 0, false},  // 2 products for 3 warps
		{blocking.Tile{M: 64, N: 64, K: 8, Threads: 256}, 16, 0, 0, false}, // a stage shallower than a product
		{blocking.Tile{M: 32, N: 16, K: 16, Threads: 64}, 8, 1, 2, true},
		{blocking.Tile{M: 16, N: 8, K: 16, Threads: 32}, 8, 0, 0, false}, // one product column: wn odd
	} {
		wm, wn, ok := mmaLayout(tc.tile, tc.depth)
		if wm != tc.wm || wn != tc.wn || ok != tc.ok {
			t.Errorf("%+v, depth %d: %d × %d, %v; want %d × %d, %v", tc.tile, tc.depth, wm, wn, ok, tc.wm, tc.wn, tc.ok)
		}
	}
}

// TestScatterBlocks: a scatter kernel's output is one block of rows
// where a chunk of columns of every row fits the scratch, blocks of
// whole rows where it does not and its index is computed once a term
// (unless computing it once a block costs more than an eighth of the
// stores), and chunks of columns of every row where it is read per
// column.
func TestScatterBlocks(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		values, width, terms int64
		perColumn            bool
		want                 scatterBlocks
	}{
		{"small table", 100, 512, 512, false, scatterBlocks{rows: 100, cols: 512, rowBlocks: 1, colChunks: 1}},
		{"table of 1,000 rows", 1000, 512, 512, false, scatterBlocks{rows: 256, cols: 512, rowBlocks: 4, colChunks: 1}},
		{"table of 1,000 rows, index per column", 1000, 512, 512, true, scatterBlocks{rows: 1000, cols: 131, rowBlocks: 1, colChunks: 4}},
		{"large table", 100000, 64, 64, false, scatterBlocks{rows: 2048, cols: 64, rowBlocks: 49, colChunks: 1}},
		{"large table, wide rows", 100000, 1024, 64, false, scatterBlocks{rows: 256, cols: 512, rowBlocks: 391, colChunks: 2}},
		{"large table, many terms", 100000, 64, 1 << 20, false, scatterBlocks{rows: 100000, cols: 16, rowBlocks: 1, colChunks: 4}},
		{"large table, index per column", 100000, 64, 64, true, scatterBlocks{rows: 100000, cols: 16, rowBlocks: 1, colChunks: 4}},
		{"no columns", 8000, 0, 64, false, scatterBlocks{rows: 8000}},
	} {
		sc := scatter{
			u:         &tir.Var{Name: "u", Extent: lang.Const(tc.values)},
			sum:       &tir.Reduce{Vars: []*tir.Var{{Name: "i", Extent: lang.Const(tc.terms)}}},
			columns:   []*tir.Var{{Name: "d", Extent: lang.Const(tc.width)}},
			perColumn: tc.perColumn,
		}
		if got := sc.blocks(); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
