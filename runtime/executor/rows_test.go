package executor

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"tofuc/runtime/plan"
)

// TestBoxRows copies random boxes between random row-major tensors with
// BoxRows and element by element: the bytes agree, and every Rows is one
// that CUDA's 3-D copies can describe.
func TestBoxRows(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	copies := 0
	for trial := range 2000 {
		rank := r.IntN(6)
		size := int64([]int{1, 2, 4, 8}[r.IntN(4)])
		from, to, at := make([]int64, rank), make([]int64, rank), make([]int64, rank)
		box := make([]plan.Dim, rank)
		for d := range rank {
			from[d] = 1 + r.Int64N(5)
			lo := r.Int64N(from[d] + 1)
			box[d] = plan.Dim{Lo: lo, Hi: lo + r.Int64N(from[d]-lo+1)}
			if r.IntN(3) > 0 { // often whole dimensions, so that some merge
				box[d] = plan.Dim{Lo: 0, Hi: from[d]}
			}
			n := box[d].Hi - box[d].Lo
			to[d] = n + r.Int64N(3)*r.Int64N(2)
			at[d] = r.Int64N(to[d] - n + 1)
		}
		src := make([]byte, elems(from)*size)
		for i := range src {
			src[i] = byte(r.Uint32())
		}
		got := make([]byte, elems(to)*size)
		want := make([]byte, len(got))
		for _, rows := range BoxRows(size, from, box, to, at) {
			checkRows(t, rows, int64(len(src)), int64(len(got)))
			rows.Each(func(so, do int64) { copy(got[do:do+rows.Width], src[so:so+rows.Width]) })
			copies++
		}
		eachIndex(box, func(idx []int64) {
			so, do := int64(0), int64(0)
			for d, x := range idx {
				so = so*from[d] + x
				do = do*to[d] + x - box[d].Lo + at[d]
			}
			copy(want[do*size:(do+1)*size], src[so*size:(so+1)*size])
		})
		if string(got) != string(want) {
			t.Fatalf("trial %d: box %v of %v to %v at %v (size %d): bytes differ", trial, box, from, to, at, size)
		}
	}
	t.Logf("%d strided copies", copies)
}

func checkRows(t *testing.T, r Rows, srcLen, dstLen int64) {
	t.Helper()
	if r.Width <= 0 || r.Height <= 0 || r.Depth <= 0 || r.SrcPitch < r.Width || r.DstPitch < r.Width ||
		r.SrcSlice%r.SrcPitch != 0 || r.DstSlice%r.DstPitch != 0 ||
		r.SrcSlice < r.SrcPitch*r.Height || r.DstSlice < r.DstPitch*r.Height {
		t.Fatalf("rows %+v are no 3-D copy", r)
	}
	last := r.Depth - 1
	if r.SrcOff+last*r.SrcSlice+(r.Height-1)*r.SrcPitch+r.Width > srcLen || r.DstOff+last*r.DstSlice+(r.Height-1)*r.DstPitch+r.Width > dstLen {
		t.Fatalf("rows %+v leave the tensors (%d and %d bytes)", r, srcLen, dstLen)
	}
}

func elems(shape []int64) int64 {
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	return n
}

// eachIndex calls f with every index of box, row-major.
func eachIndex(box []plan.Dim, f func([]int64)) {
	idx := make([]int64, len(box))
	for d, r := range box {
		if r.Hi <= r.Lo {
			return
		}
		idx[d] = r.Lo
	}
	for {
		f(idx)
		d := len(idx) - 1
		for ; d >= 0; d-- {
			idx[d]++
			if idx[d] < box[d].Hi {
				break
			}
			idx[d] = box[d].Lo
		}
		if d < 0 {
			return
		}
	}
}

// TestBoxRowsMerges: a box of whole rows is one contiguous copy, and a
// box of a 4-D tensor with no contiguous dimensions is a copy per index of
// its outermost.
func TestBoxRowsMerges(t *testing.T) {
	rows := BoxRows(4, []int64{6, 5, 3}, []plan.Dim{{Lo: 2, Hi: 4}, {Lo: 0, Hi: 5}, {Lo: 0, Hi: 3}}, []int64{2, 5, 3}, []int64{0, 0, 0})
	if len(rows) != 1 || rows[0].Bytes() != 2*5*3*4 || rows[0].Height != 1 || rows[0].SrcOff != 2*15*4 {
		t.Errorf("whole rows: %+v", rows)
	}
	rows = BoxRows(1, []int64{4, 4, 4, 4}, []plan.Dim{{Lo: 0, Hi: 2}, {Lo: 1, Hi: 3}, {Lo: 1, Hi: 3}, {Lo: 1, Hi: 3}}, []int64{2, 2, 2, 2}, []int64{0, 0, 0, 0})
	if len(rows) != 2 || rows[0].Width != 2 || rows[0].Height != 2 || rows[0].Depth != 2 || rows[1].SrcOff-rows[0].SrcOff != 64 {
		t.Errorf("4-D box: %+v", rows)
	}
}

// TestPackedRows gathers the rows of box copies into one message
// (packedTo) and scatters it (packedFrom), as a rank's messages on its
// device's stream do: the result equals the copy itself, for boxes of
// five dimensions (several strided copies, each of several slices).
func TestPackedRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	from, to := []int64{3, 4, 5, 6, 7}, []int64{4, 5, 6, 7, 8}
	src := make([]byte, 4*3*4*5*6*7)
	for i := range src {
		src[i] = byte(rng.IntN(256))
	}
	box := []plan.Dim{{Lo: 1, Hi: 3}, {Lo: 0, Hi: 3}, {Lo: 2, Hi: 5}, {Lo: 1, Hi: 6}, {Lo: 0, Hi: 5}}
	at := []int64{1, 2, 0, 1, 2}
	rows := BoxRows(4, from, box, to, at)
	if len(rows) < 2 || rows[0].Depth < 2 {
		t.Fatalf("%d strided copies of depth %d: the test wants several, of several slices", len(rows), rows[0].Depth)
	}
	size := 4 * 4 * 5 * 6 * 7 * 8
	want, got := make([]byte, size), make([]byte, size)
	msg := make([]byte, rowsBytes(rows))
	var off int64
	for _, r := range rows {
		apply(r, src, want)
		apply(packedTo(r, off), src, msg)
		apply(packedFrom(r, off), msg, got)
		off += r.Bytes()
	}
	if !bytes.Equal(got, want) {
		t.Error("the packed copy differs from the copy")
	}
}

// apply runs strided copy r from src to dst.
func apply(r Rows, src, dst []byte) {
	r.Each(func(s, d int64) { copy(dst[d:d+r.Width], src[s:s+r.Width]) })
}
