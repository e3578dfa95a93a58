package codegen_test

import "testing"

// chainedMLP is two layers whose launches chain, the weights A in both.
const chainedMLP = `model m(x: f32[100, 40]) {
    w1 = param f32[40, 200] init glorot()
    b1 = param f32[200] init zeros()
    w2 = param f32[200, 300] init glorot()
    b2 = param f32[300] init zeros()
    return relu(linear(relu(linear(x, w1, b1)), w2, b2))
}`

// TestChainedLaunches: a linear layer reading whole rows of the previous
// reduction kernel's output, and nothing else reading it, runs in that
// kernel's launch, block of rows by block of rows, equal to the
// interpreter on the cpu runtime and the emulator: through the host
// GEMM's blocks where the rows are its row side (a product of two
// activations, rows the shorter side) or its column side (the weights,
// packed once, are the row side), with fused
// epilogues, rows of several variables and a partial last block, and
// through element loops where the first kernel is no GEMM. A value read
// twice or through an opaque call, rows of either output too wide or too
// few rows keep two launches.
//
// A GPU runs a chained launch's two kernels as launches of their own
// (the emulator's outputs come from them): a GPU runs one launch more
// than the host for each chain.
func TestChainedLaunches(t *testing.T) {
	tl := tools(t)
	for _, tc := range []struct {
		name, src string
		launches  int
		chains    int
	}{
		{"rows side", `model m(x: f32[100, 8], y: f32[8, 200], z: f32[200, 300]) {
    return matmul(relu(matmul(x, y)), z)
}`, 1, 1},
		{"weights", chainedMLP, 1, 1},
		{"columns side", `model m(x: f32[130, 16]) {
    w1 = param f32[16, 8] init glorot()
    b1 = param f32[8] init zeros()
    w2 = param f32[8, 5] init glorot()
    b2 = param f32[5] init zeros()
    return linear(linear(x, w1, b1), w2, b2)
}`, 1, 1},
		{"sequence rows", `model m(x: f32[3, 40, 24]) {
    w1 = param f32[24, 48] init glorot()
    b1 = param f32[48] init zeros()
    w2 = param f32[48, 20] init glorot()
    b2 = param f32[20] init zeros()
    return linear(gelu(linear(x, w1, b1)), w2, b2)
}`, 1, 1},
		{"reduction first", `model m(x: f32[70, 12, 9], w: f32[12, 100]) {
    return matmul(reduce_sum<axes = [2], keepdims = false>(x), w)
}`, 1, 1},
		{"three layers", `model m(x: f32[64, 30]) {
    w1 = param f32[30, 20] init glorot()
    w2 = param f32[20, 20] init glorot()
    w3 = param f32[20, 10] init glorot()
    return matmul(relu(matmul(relu(matmul(x, w1)), w2)), w3)
}`, 2, 1},
		{"read twice", `model m(x: f32[64, 30], w: f32[30, 20], v: f32[20, 10]) {
    h = matmul(x, w)
    return matmul(h, v), h
}`, 2, 0},
		{"too wide", `model m(x: f32[64, 8], w: f32[8, 600], v: f32[600, 4]) {
    return matmul(matmul(x, w), v)
}`, 2, 0},
		{"wide consumer", `model m(x: f32[64, 8], w: f32[8, 16], v: f32[16, 600]) {
    return matmul(matmul(x, w), v)
}`, 2, 0},
		// The opaque call runs on the host before the launch: it must
		// not read the rows the launch computes; nor may packing the
		// identity with the weights run it (a dominant diagonal keeps
		// the inverse well conditioned, the identity the sum free of
		// cancellation).
		{"opaque reader", `op weird(x: [M, M], w: [M, M]) -> [M, M] =
    lambda i, j: sum(lambda k: x[i, k] * w[k, j]) + opaque inverse(x[:, :])[i, j]
model m(x: f32[64, 64], w1: f32[64, 64]) {
    return weird(matmul(x, w1) * 0.01 + eye<n = 64>(), eye<n = 64>())
}`, 2, 0},
		{"too few rows", `model m(x: f32[63, 8], w: f32[8, 16], v: f32[16, 4]) {
    return matmul(matmul(x, w), v)
}`, 2, 0},
	} {
		c := compileMatching(t, tl, tc.name, tc.src, 1000)
		chains := 0
		for _, k := range c.Plan.Kernels {
			if k.Form == "chain" {
				chains++
			}
		}
		if c.Stats.Kernels != tc.launches || chains != tc.chains || c.Stats.GPULaunches != tc.launches+tc.chains {
			t.Errorf("%s: %d launches (%d on a GPU), %d chained; want %d (%d) and %d", tc.name, c.Stats.Kernels, c.Stats.GPULaunches, chains, tc.launches, tc.launches+tc.chains, tc.chains)
		}
	}
}
