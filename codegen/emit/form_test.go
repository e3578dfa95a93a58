package emit

import (
	"testing"

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
