package codegen_test

import "testing"

// TestPrologues: an injective producer read by one consumer (a head
// split or merge, a transpose, a reshape, a strided slice) launches
// nothing: its consumer reads the producer's input through the index,
// also as a factor of a contraction (the host GEMM and the tiled form),
// also two in a row, and also two alike (the checker shares one instance
// between them); the results equal the interpreter's on the cpu runtime
// and the emulator; a producer with two consumers is read through by
// both (q, split into heads, read by the scores and by q·2). A producer
// read by a view keeps its launch.
func TestPrologues(t *testing.T) {
	tl := tools(t)
	for _, tc := range []struct {
		name, src string
		launches  int
	}{
		{"heads", `model m(x: f32[2, 6, 12], wq: f32[12, 12], wk: f32[12, 12]) {
    q = split_heads<heads = 3>(matmul_broadcast(x, wq))
    k = split_heads<heads = 3>(matmul_broadcast(x, wk))
    return batch_matmul_nt(q, k), merge_heads(q * 2.0) + x
}`, 5}, // two products, the scores, q·2, the merged sum
		{"transposes", `model m(a: f32[20, 33], b: f32[20, 17]) {
    return matmul(transpose<perm = [1, 0]>(a), b), transpose<perm = [1, 0]>(transpose<perm = [1, 0]>(a)) + 1.0
}`, 2},
		{"reshape and slice", `model m(x: f32[4, 6, 10]) {
    y = slice<starts = [1], ends = [9], axes = [2], steps = [2]>(x)
    return reshape<shape = [4, 24]>(transpose<perm = [0, 2, 1]>(y)) * 3.0
}`, 1},
	} {
		c := compileMatching(t, tl, tc.name, tc.src, 64)
		if c.Stats.Kernels != tc.launches {
			t.Errorf("%s: %d launches, want %d", tc.name, c.Stats.Kernels, tc.launches)
		}
	}
}
