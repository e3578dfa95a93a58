package schedule_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"tofuc/parser"

	"tofuc/analysis/check"
	"tofuc/analysis/schedule"
	"tofuc/lang/ir"
)

func load(t *testing.T, src string, batch int64) *ir.Graph {
	t.Helper()
	_, g, err := check.LoadModel(parser.Parse, "m.tdl", []byte(src), map[string]ir.AttrValue{"batch": {Kind: ir.AttrInt, Int: batch}})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestBuild: weight transformations are precomputed, channel slices of a
// batch-1 tensor are views (at batch 2 one is read through its index by
// the addition that consumes it), a chain of element-wise nodes fuses into the
// convolution it follows, and its intermediates never leave the kernel.
func TestBuild(t *testing.T) {
	src := `model m<batch = 1>(x: f32[batch, 4, 8, 8]) {
    w = param f32[6, 4, 1, 1]
    v = param f32[2, 4, 3, 3]
    c = conv2d<pads = [1, 1, 1, 1]>(x, concat<axis = 0>(pad<pads = [0, 0, 1, 1, 0, 0, 1, 1]>(w), v))
    y = sigmoid(relu(c) * 2.0)
    return slice<starts = [0], ends = [6], axes = [1]>(y) + 1.0, slice<starts = [6], ends = [8], axes = [1]>(y)
}
`
	for _, tc := range []struct {
		batch         int64
		kernels       []int // nodes per kernel that runs per call
		views, precom int
	}{{1, []int{4, 1}, 2, 2}, {2, []int{4, 1, 1}, 0, 2}} { // at batch 2 the first slice is its consumer's prologue
		g := load(t, src, tc.batch)
		s := schedule.Build(g)
		var got []int
		precom := 0
		for k, kern := range s.Kernels {
			if kern.Precomputed {
				precom++
				continue
			}
			got = append(got, len(kern.Nodes))
			for i, n := range kern.Nodes[1:] {
				prev := kern.Nodes[i].Outputs[0]
				if !s.Internal(prev, k) {
					t.Errorf("batch %d: %s is fused into kernel %d but leaves it", tc.batch, prev.Name, k)
				}
				if s.KernelOfValue[n.Outputs[0]] != k {
					t.Errorf("batch %d: KernelOfValue[%s] = %d, want %d", tc.batch, n.Outputs[0].Name, s.KernelOfValue[n.Outputs[0]], k)
				}
			}
			last := kern.Nodes[len(kern.Nodes)-1].Outputs[0]
			if s.Internal(last, k) {
				t.Errorf("batch %d: the last value of kernel %d is internal", tc.batch, k)
			}
		}
		if len(got) != len(tc.kernels) || precom != tc.precom || len(s.Views) != tc.views {
			t.Fatalf("batch %d: kernels of %v nodes, %d precomputed, %d views; want %v, %d, %d", tc.batch, got, precom, len(s.Views), tc.kernels, tc.precom, tc.views)
		}
		for i := range got {
			if got[i] != tc.kernels[i] {
				t.Errorf("batch %d: kernels of %v nodes, want %v", tc.batch, got, tc.kernels)
			}
		}
	}
}

// TestSharedValueDoesNotFuse: a value read twice is stored, and a graph
// output is never fused away.
func TestSharedValueDoesNotFuse(t *testing.T) {
	src := `model m<batch = 1>(x: f32[batch, 16]) {
    a = exp(x)
    b = relu(a)
    c = a * 3.0
    return b + c, b
}
`
	s := schedule.Build(load(t, src, 2))
	if len(s.Kernels) != 3 {
		t.Fatalf("%d kernels, want 3 (exp; relu; mul + add)", len(s.Kernels))
	}
	for k := range s.Kernels {
		for _, v := range s.Graph.Outputs {
			if s.Internal(v, k) {
				t.Errorf("graph output %s is internal to kernel %d", v.Name, k)
			}
		}
	}
}

// TestLaunches: softmax's reductions are row locals computed by the
// output's kernel, and the recomputed local of a broadcasting batch
// matmul launches nothing.
func TestLaunches(t *testing.T) {
	src := `model m<batch = 1>(x: f32[batch, 3, 16], w: f32[16, 8]) {
    return softmax<axis = 1>(x), matmul_broadcast(x, w)
}
`
	s := schedule.Build(load(t, src, 2))
	var ops []string
	for _, k := range s.Kernels {
		ops = append(ops, k.Root().Inst.Op+":"+k.Def.Tensor.Name)
	}
	got := strings.Join(ops, " ")
	if !regexp.MustCompile(`^softmax:\S+ matmul_broadcast:\S+$`).MatchString(got) {
		t.Errorf("launches %s", got)
	}
	for k := range s.Kernels {
		reads := s.Reads(k)
		if len(reads) == 0 {
			t.Errorf("kernel %d reads nothing", k)
		}
	}
}

// TestFusionStaysConvex: a node joins a kernel only when its other inputs
// are ready before that kernel runs.
func TestFusionStaysConvex(t *testing.T) {
	src := `model m<batch = 1>(x: f32[batch, 16], y: f32[batch, 16]) {
    a = exp(x)
    b = log(y)
    return a * b
}
`
	s := schedule.Build(load(t, src, 2))
	if len(s.Kernels) != 2 || len(s.Kernels[0].Nodes) != 1 || len(s.Kernels[1].Nodes) != 2 {
		var shape [][]string
		for _, k := range s.Kernels {
			var names []string
			for _, n := range k.Nodes {
				names = append(names, n.Inst.Op)
			}
			shape = append(shape, names)
		}
		t.Fatalf("kernels %v, want [[exp] [log mul]]", shape)
	}
}

// TestElementwiseChainIsOneKernel: a chain of six element-wise operators,
// with a broadcast operand and the chain's input read again at its end,
// is one kernel (issue 14's fusion floor: four or more).
func TestElementwiseChainIsOneKernel(t *testing.T) {
	src := `model m<batch = 64>(x: f32[batch, 128], b: f32[128]) {
    return sigmoid(tanh(relu(x + b) * 2.0) - x)
}
`
	s := schedule.Build(load(t, src, 64))
	if len(s.Kernels) != 1 || len(s.Kernels[0].Nodes) != 6 {
		var sizes []int
		for _, k := range s.Kernels {
			sizes = append(sizes, len(k.Nodes))
		}
		t.Fatalf("kernels of %v nodes, want one of 6", sizes)
	}
}

// TestBatchNormScaleRunsWithTheWeights: the per-channel scale of a batch
// norm fused into its convolution (a local computed from the weights
// alone, small enough to recompute) is computed once with the weights
// and read by the fused kernel, not recomputed (a square root and a
// division) for every output element.
func TestBatchNormScaleRunsWithTheWeights(t *testing.T) {
	src := `model m<batch = 1>(x: f32[batch, 8, 6, 6]) {
    w = param f32[16, 8, 3, 3]
    s = param f32[16]
    b = param f32[16]
    mu = param f32[16]
    v = param f32[16]
    return relu(batch_norm(conv2d<pads = [1, 1, 1, 1]>(x, w), s, b, mu, v))
}
`
	s := schedule.Build(load(t, src, 1))
	var perRun []*schedule.Kernel
	precomputed := 0
	for _, k := range s.Kernels {
		if k.Precomputed {
			precomputed++
			continue
		}
		perRun = append(perRun, k)
	}
	if len(perRun) != 1 || len(perRun[0].Nodes) != 3 || precomputed != 1 {
		t.Fatalf("%d kernels per run (want one of conv, batch norm and relu), %d precomputed (want the scale)", len(perRun), precomputed)
	}
	bn := perRun[0].Nodes[1]
	for _, d := range bn.Inst.Locals {
		if s.Recomputed(bn, d) {
			t.Errorf("local %s of the batch norm is recomputed for every element", d.Tensor.Name)
		}
	}
}

// TestRows: the row locals of an instance and their keys, read off its
// lambda: softmax along a middle axis keys on the others; a local read
// inside a reduction over an output variable with no key is none
// (cross-entropy's log-sum); attention's product of queries and keys,
// read by its maximum over keys and by the output at its own index, is
// buffered along the keys (-1), keyed like its maximum and sum; the
// exponentials of softmax and attention, read by the sum and by the
// output, are buffered too, where read once (once) they are not, nor
// where their buffer would leave a reduction's out of the row (budget).
func TestRows(t *testing.T) {
	src := `op once(x: [M, N]) -> [M, N] =
    let m: [M] = lambda i: max(lambda k: x[i, k]) in
    let e: [M, N] = lambda i, n: exp(x[i, n] - m[i]) in
    lambda i, n: e[i, n] * 2.0
op budget(x: [M, N], y: [N, D]) -> [M, N] =
    let e: [M, N] = lambda i, n: exp(x[i, n]) in
    let c: [M, N] = lambda i, n: sum(lambda d: y[n, d] * x[i, n]) * e[i, n] in
    let m: [M] = lambda i: max(lambda k: c[i, k]) in
    lambda i, n: c[i, n] / m[i] + e[i, n]
model m<batch = 1>(x: f32[batch, 3, 16], l: f32[batch, 16], y: i64[batch], q: f32[batch, 2, 5, 4], k: f32[batch, 2, 7, 4], b: f32[7],
                   bx: f32[3, 3000], by: f32[3000, 5]) {
    return softmax<axis = 1>(x), softmax_cross_entropy(l, y), attention_weights(q, k, b), once(l), budget(bx, by)
}
`
	g := load(t, src, 2)
	got := map[string]string{}
	for _, n := range g.Nodes {
		var rows []string
		for _, r := range schedule.Rows(n.Inst) {
			rows = append(rows, fmt.Sprintf("%s%v", r.Def.Tensor.Name, r.Key))
		}
		got[n.Inst.Op] = strings.Join(rows, " ")
	}
	// The exponentials read by the sum and by the output are buffered,
	// computed once; read once, they are recomputed there, and so where
	// their buffer and a reduction's would pass the budget of a row.
	for op, want := range map[string]string{"softmax": "m[0 2] e[0 -1 2] s[0 2]", "softmax_cross_entropy": "", "attention_weights": "qk[0 1 2 -1] m[0 1 2] e[0 1 2 -1] l[0 1 2]",
		"once": "m[0]", "budget": "c[0 -1] m[0]"} {
		if got[op] != want {
			t.Errorf("%s: row locals %q, want %q", op, got[op], want)
		}
	}
}

// TestChain: the MLP's second linear layer reads whole rows of the
// first's output, which nothing else reads: at 64 rows the two are one
// launch (the first kernel chained before the second), the third layer a
// launch of its own (a kernel is in one pair at most); at 32 rows, one
// block of rows, nothing is chained. BuildUnchained makes the same
// kernels without the pair.
func TestChain(t *testing.T) {
	src := `model m<batch = 1>(x: f32[batch, 784]) {
    w1 = param f32[784, 128] init glorot()
    b1 = param f32[128] init zeros()
    w2 = param f32[128, 128] init glorot()
    b2 = param f32[128] init zeros()
    w3 = param f32[128, 10] init glorot()
    b3 = param f32[10] init zeros()
    h = relu(linear(x, w1, b1))
    h = relu(linear(h, w2, b2))
    return linear(h, w3, b3)
}
`
	for _, tc := range []struct {
		batch    int64
		launches int
	}{{64, 2}, {32, 3}} {
		s := schedule.Build(load(t, src, tc.batch))
		launches := 0
		for _, k := range s.Kernels {
			if !k.Chained && !k.Precomputed {
				launches++
			}
		}
		if launches != tc.launches {
			t.Errorf("batch %d: %d launches, want %d", tc.batch, launches, tc.launches)
		}
		if tc.batch == 64 {
			if c := s.Kernels[1]; c.Before != s.Kernels[0] || !s.Kernels[0].Chained || c.ChainRows != 1 || s.Kernels[2].Before != nil {
				t.Errorf("batch 64: the first two kernels are not chained as one pair")
			}
		}
		unchained := schedule.BuildUnchained(load(t, src, tc.batch))
		if len(unchained.Kernels) != len(s.Kernels) {
			t.Fatalf("batch %d: %d kernels unchained, %d chained", tc.batch, len(unchained.Kernels), len(s.Kernels))
		}
		for k, u := range unchained.Kernels {
			c := s.Kernels[k]
			if u.Before != nil || u.Chained || u.Def.Tensor.Name != c.Def.Tensor.Name || len(u.Nodes) != len(c.Nodes) || u.Precomputed != c.Precomputed {
				t.Errorf("batch %d: kernel %d unchained differs from Build's but for its chain", tc.batch, k)
			}
		}
	}
}

// TestChainScalarOperand: a kernel after a chainable one that also
// reads a scalar (rank 0) value schedules; rowsRead indexed the scalar's
// shape at -1 and the compile crashed (a PyTorch export of
// minimum(relu(conv(x)), x.mean()·ones(1))).
func TestChainScalarOperand(t *testing.T) {
	src := `model m<batch = 64>(x: f32[batch, 784]) {
    w1 = param f32[784, 128] init glorot()
    b1 = param f32[128] init zeros()
    h = relu(linear(x, w1, b1))
    s = reduce_mean<axes = [0, 1], keepdims = false>(x)
    return min(h, s)
}
`
	s := schedule.Build(load(t, src, 64))
	if len(s.Kernels) == 0 {
		t.Fatal("no kernels")
	}
}

// TestCostlyLocalSummedAgainIsLaunched: a local calling a costly
// function that a sum reads at every output column (an activation inside
// a matmul) is launched, so that its tanh runs once an element, not once
// a column; read by a sum at every output variable (a row sum of it), or
// cheap, it is recomputed where it is read.
func TestCostlyLocalSummedAgainIsLaunched(t *testing.T) {
	src := `op act_matmul(x: [N, K], w: [K, M]) -> [N, M] =
    let g: [N, K] = lambda n, k: tanh(x[n, k]) in
    lambda n, m: sum(lambda k: g[n, k] * w[k, m])
op act_rowsum(x: [N, K]) -> [N] =
    let g: [N, K] = lambda n, k: tanh(x[n, k]) in
    lambda n: sum(lambda k: g[n, k])
op cheap_matmul(x: [N, K], w: [K, M]) -> [N, M] =
    let g: [N, K] = lambda n, k: x[n, k] * 2.0 in
    lambda n, m: sum(lambda k: g[n, k] * w[k, m])
model m<batch = 1>(x: f32[batch, 16], w: f32[16, 8]) {
    return act_matmul(x, w), act_rowsum(x), cheap_matmul(x, w)
}
`
	g := load(t, src, 4)
	want := map[string]int{"act_matmul": 2, "act_rowsum": 1, "cheap_matmul": 1}
	for _, n := range g.Nodes {
		if got := len(schedule.Launches(n.Inst)); got != want[n.Inst.Op] {
			t.Errorf("%s: %d launches, want %d", n.Inst.Op, got, want[n.Inst.Op])
		}
	}
}
