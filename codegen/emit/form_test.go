package emit

import (
	"testing"

	"tofuc/codegen/blocking"
	"tofuc/codegen/kernel"
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
