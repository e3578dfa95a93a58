package blocking

import (
	"fmt"
	"testing"

	"tofuc/codegen/kernel"
	"tofuc/lang"
	"tofuc/lang/ir"
)

// gemm is a contraction of batch × rows × cols outputs over depth.
func gemm(batch, rows, cols, depth int64) *kernel.GEMM {
	v := func(name string, n int64) []*ir.Var { return []*ir.Var{{Name: name, Extent: lang.Const(n)}} }
	return &kernel.GEMM{Batch: v("b", batch), Rows: v("m", rows), Cols: v("n", cols), K: v("k", depth)}
}

// TestGPUTile checks the tile rule on docs/codegen.md's examples.
func TestGPUTile(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		batch, rows, cols    int64
		m, n, microM, microN int64
		threads              int64
	}{
		{"matmul 4096³: 128 × 128 tiles of 8 × 8", 1, 4096, 4096, 128, 128, 8, 8, 256},
		{"a 16 × 16 tile becomes 16 × 32", 1, 16, 16, 16, 32, 4, 4, 32},
		{"batch-1 convolution, 256 channels × 56 × 56: 50 large tiles keep 64 × 64", 1, 256, 56 * 56, 64, 64, 4, 4, 256},
		{"128 × 64 of 8 × 4", 8, 4096, 64, 128, 64, 8, 4, 256},
	} {
		got := GPUTile(gemm(tc.batch, tc.rows, tc.cols, 64))
		if got.M != tc.m || got.N != tc.n || got.MicroM != tc.microM || got.MicroN != tc.microN || got.Threads != tc.threads {
			t.Errorf("%s: %+v", tc.name, got)
		}
		if got.Tiles != tc.batch*CeilDiv(tc.rows, got.M)*CeilDiv(tc.cols, got.N) {
			t.Errorf("%s: %d tiles", tc.name, got.Tiles)
		}
	}
}

// TestSplit checks the host's split into tasks (at an AVX-512 tile, 8
// × 32, so that it does not depend on the host) against what Split
// promises: the chunks cover the columns and rows, B is shared where
// rows are split or the column chunks' panels are uneven and it fits
// and is not too small,
// and sharing never leaves fewer tasks than splitting columns gave, up
// to four.
func TestSplit(t *testing.T) {
	const mr, nr = 8, 32
	for _, tc := range []struct {
		batch, rows, cols, depth int64
		share                    bool
	}{
		{1, 1024, 1024, 1024, false}, // matmul 1024³
		{1, 1024, 1024, 1024, true},
		{1, 256, 196, 2304, true}, // 3 × 3 convolution at 14 × 14: 196 columns, panels 1, 2, 2, 2
		{1, 24, 196, 96, true},    // a 1 × 1 convolution to 24 channels at 14 × 14
		{1, 128, 64, 784, true},   // the MLP's first layer
		{1, 64, 3136, 64, true},   // a 1 × 1 convolution at 56 × 56
		{32, 64, 64, 64, true},    // a batch matmul
		{1, 1000, 1, 4096, false}, // a fully connected layer at batch 1
		{1, 3, 5, 7, true},        // smaller than a tile
		{2, 512, 1, 128, true},    // a stack of two LSTM cells' states times R at batch 1: too little B to share
		{2, 512, 16, 128, true},   // and at batch 16
	} {
		name := fmt.Sprintf("%d×%d×%d depth %d share %v", tc.batch, tc.rows, tc.cols, tc.depth, tc.share)
		s := newSplit(tc.rows, tc.cols, tc.depth, tc.batch, mr, nr, tc.share, false)
		plain := newSplit(tc.rows, tc.cols, tc.depth, tc.batch, mr, nr, false, false)
		cols, rows := int64(0), int64(0)
		for c := range s.ColChunks {
			lo := min(tc.cols, s.Quanta*c/s.ColChunks*ColQuantum)
			hi := min(tc.cols, s.Quanta*(c+1)/s.ColChunks*ColQuantum)
			if hi-lo > s.Cols1 {
				t.Errorf("%s: column chunk %d has %d columns, more than the widest's %d", name, c, hi-lo, s.Cols1)
			}
			cols += hi - lo
		}
		for r := range s.RowChunks {
			lo := min(tc.rows, s.Strips*r/s.RowChunks*mr)
			hi := min(tc.rows, s.Strips*(r+1)/s.RowChunks*mr)
			if hi-lo > s.Rows1 {
				t.Errorf("%s: row chunk %d has %d rows, more than the widest's %d", name, r, hi-lo, s.Rows1)
			}
			rows += hi - lo
		}
		if cols != tc.cols || rows != tc.rows {
			t.Errorf("%s: the chunks cover %d columns and %d rows", name, cols, rows)
		}
		fits := 4*tc.batch*tc.depth*CeilDiv(tc.cols, nr)*nr <= budgetShared && 4*tc.depth*tc.cols > minSharedB
		wanted := tc.share && fits && (plain.RowChunks > 1 || !plain.evenPanels(tc.cols, nr))
		if s.Shared && !wanted {
			t.Errorf("%s: B shared where the tasks need not share it", name)
		}
		if s.Shared && s.RowChunks*s.ColChunks < min(4, plain.RowChunks*plain.ColChunks) {
			t.Errorf("%s: sharing B leaves %d tasks, splitting columns gave %d", name, s.RowChunks*s.ColChunks, plain.RowChunks*plain.ColChunks)
		}
		if s.Shared != (s.PackItems > 0) || s.Shared && s.PackItems != tc.batch*CeilDiv(tc.depth, KC)*s.ColChunks {
			t.Errorf("%s: shared %v with %d pack items", name, s.Shared, s.PackItems)
		}
	}
	// docs/codegen.md: 196 columns in four chunks are 1, 2, 2 and 2
	// panels of 32, uneven.
	if s := newSplit(256, 196, 2304, 1, mr, nr, false, false); s.ColChunks != 4 || s.evenPanels(196, nr) {
		t.Errorf("196 columns: %d chunks, even panels %v", s.ColChunks, s.evenPanels(196, nr))
	}
}
