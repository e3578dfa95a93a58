package codegen

import (
	"testing"

	"tofuc/codegen/kernel"
)

// TestGeometry: grids cover the elements up to 65535 blocks (more blocks
// were slower on an H200: builder.go), then the blocks stride; kernels
// taking four elements a turn have the turns' grid (kernel.Turn).
func TestGeometry(t *testing.T) {
	for _, tc := range []struct {
		k                   kernel.Kernel
		grid, block, shared int64
	}{
		{kernel.Kernel{Form: kernel.Threads, Elements: 1 << 20}, 4096, 256, 0},
		{kernel.Kernel{Form: kernel.Threads, Elements: 1 << 23}, 32768, 256, 0},
		{kernel.Kernel{Form: kernel.Threads, Elements: 1 << 26}, kernel.TurnGrid, 256, 0}, // four elements a turn
		{kernel.Kernel{Form: kernel.Threads, Elements: 40}, 1, 64, 0},
		{kernel.Kernel{Form: kernel.Blocks, Elements: 50000, ReduceLen: 100}, 50000, 128, 256},
		{kernel.Kernel{Form: kernel.Blocks, Elements: 1 << 20, ReduceLen: 4096}, 65535, 256, 256},
	} {
		grid, block, shared := geometry(&tc.k)
		if grid != tc.grid || block != tc.block || shared != tc.shared {
			t.Errorf("%s of %d elements: grid %d, block %d, shared %d; want %d, %d, %d",
				tc.k.Form, tc.k.Elements, grid, block, shared, tc.grid, tc.block, tc.shared)
		}
	}
}
