package cost_test

import (
	"math"
	"strings"
	"testing"
	"tofuc/parser"

	"tofuc/analysis/check"
	"tofuc/analysis/cost"
	"tofuc/lang"
	"tofuc/lang/ir"
)

// TestRooflineViewsAndWeights: weight transformations are precomputed,
// channel slices of a batch-1 tensor are views, and relu fuses into the
// convolution it follows; a slice of a batch-2 tensor is a kernel.
func TestRooflineViewsAndWeights(t *testing.T) {
	prog, err := check.NewProgram(parser.Parse)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		batch              int
		launches, views, w int
	}{{1, 2, 2, 2}, {2, 3, 0, 2}} {
		src := `model m<batch = 1>(x: f32[batch, 4, 8, 8]) {
    w = param f32[6, 4, 1, 1]
    v = param f32[2, 4, 3, 3]
    y = relu(conv2d<pads = [1, 1, 1, 1]>(x, concat<axis = 0>(pad<pads = [0, 0, 1, 1, 0, 0, 1, 1]>(w), v)))
    return slice<starts = [0], ends = [6], axes = [1]>(y) + 1.0, slice<starts = [6], ends = [8], axes = [1]>(y)
}
`
		m, err := prog.LoadSource("m.tdl", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		g, err := m.Model("", map[string]ir.AttrValue{"batch": {Kind: ir.AttrInt, Int: int64(tc.batch)}})
		if err != nil {
			t.Fatal(err)
		}
		e, err := cost.Roofline(g, cost.H100)
		if err != nil {
			t.Fatal(err)
		}
		if e.Launches != tc.launches || e.Views != tc.views || e.Precomputed != tc.w {
			t.Errorf("batch %d: %d launches, %d views, %d precomputed; want %d, %d, %d", tc.batch, e.Launches, e.Views, e.Precomputed, tc.launches, tc.views, tc.w)
		}
	}
}

// TestRooflineNeverWraps: FLOPs and bytes past int64 are an error, not a
// negative estimate.
func TestRooflineNeverWraps(t *testing.T) {
	prog, err := check.NewProgram(parser.Parse)
	if err != nil {
		t.Fatal(err)
	}
	src := "model m<batch = 1>(x: f32[batch, 1024]) {\n    w = param f32[1024, 1024]\n    return matmul(x, w) + 1.0\n}\n"
	m, err := prog.LoadSource("big.tdl", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		batch int64
		fits  bool
	}{{1 << 20, true}, {1 << 42, false}} { // 2 * batch * 1024^2 FLOPs
		g, err := m.Model("", map[string]ir.AttrValue{"batch": {Kind: ir.AttrInt, Int: tc.batch}})
		if err != nil {
			t.Fatal(err)
		}
		e, err := cost.Roofline(g, cost.H100)
		switch {
		case tc.fits && (err != nil || e.FLOPs <= 0):
			t.Errorf("batch %d: %v", tc.batch, err)
		case !tc.fits && err == nil:
			t.Errorf("batch %d: FLOPs %d; want an overflow error", tc.batch, e.FLOPs)
		case !tc.fits && !strings.Contains(err.Error(), "64-bit"):
			t.Errorf("batch %d: %v; want an overflow error", tc.batch, err)
		}
	}
}

// TestRooflineChainedLaunch: two linear layers chained into one launch
// (schedule's chain) are priced, on a device that runs chained launches
// (the host runtime), as one launch, and the hidden rows they pass,
// which never leave the launch's caches, move no bytes; on a GPU, which
// runs the two kernels as launches of their own, as two launches that
// write and read the hidden rows.
func TestRooflineChainedLaunch(t *testing.T) {
	_, g, err := check.LoadModel(parser.Parse, "m.tdl", []byte(`model m(x: f32[64, 100], w1: f32[100, 200], w2: f32[200, 50]) {
    return matmul(relu(matmul(x, w1)), w2)
}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	chaining := cost.H100
	chaining.ChainedLaunches = true
	bytes := int64(4 * (64*100 + 100*200 + 200*50 + 64*50)) // x, w1, w2 and the output
	hidden := int64(4 * 64 * 200)
	for _, tc := range []struct {
		d        cost.Device
		launches int
		bytes    int64
	}{{chaining, 1, bytes}, {cost.H100, 2, bytes + 2*hidden}} {
		e, err := cost.Roofline(g, tc.d)
		if err != nil {
			t.Fatal(err)
		}
		if e.Launches != tc.launches || e.Bytes != tc.bytes {
			t.Errorf("chained launches %v: %d launches moving %d bytes; want %d moving %d", tc.d.ChainedLaunches, e.Launches, e.Bytes, tc.launches, tc.bytes)
		}
		if want := 2*64*100*200 + 64*200 + 2*64*200*50; e.FLOPs != int64(want) { // the ReLU one per element
			t.Errorf("%d FLOPs, want %d", e.FLOPs, want)
		}
		// Each launch the longer of its compute and memory time, plus
		// the overhead.
		want := float64(tc.launches) * tc.d.Launch
		for _, k := range e.Kernels {
			want += max(float64(k.FLOPs)/tc.d.PeakFLOPS, float64(k.Bytes)/tc.d.Bandwidth)
		}
		if math.Abs(e.Time/want-1) > 1e-9 {
			t.Errorf("chained launches %v: %.3g s, want %.3g", tc.d.ChainedLaunches, e.Time, want)
		}
	}
}

// TestCalibrationMathSource: the math reference model checks, and each
// of its outputs calls its function four times an element and no other
// priced function, so that a kernel's time is its function's.
func TestCalibrationMathSource(t *testing.T) {
	_, g, err := check.LoadModel(parser.Parse, "math.tdl", []byte(cost.CalibrationMathSource()), nil)
	if err != nil {
		t.Fatal(err)
	}
	const elems = 1 << 18
	for _, fn := range cost.CalibratedMath {
		var calls int64
		for _, n := range g.Nodes {
			for _, d := range n.Inst.Outputs {
				c, err := cost.DefMathCalls(d, fn, nil)
				if err != nil {
					t.Fatal(err)
				}
				if c > 0 && !strings.HasPrefix(n.Outputs[0].Name, cost.MathOutput(fn)) {
					t.Errorf("%s calls %s", n.Outputs[0].Name, fn)
				}
				calls += c
			}
		}
		if calls != 4*elems {
			t.Errorf("%d calls of %s, want %d", calls, fn, 4*elems)
		}
	}
}

// TestDefFLOPsRecomputing: a read of a tensor computed where it is read
// costs its Def's body there, inside a sum once a term; others cost
// nothing, as in DefFLOPs.
func TestDefFLOPsRecomputing(t *testing.T) {
	n := &ir.Var{Name: "n", Extent: lang.Const(8)}
	k := &ir.Var{Name: "k", Extent: lang.Const(4)}
	x := &ir.Tensor{Name: "x", DType: lang.F32}
	local := &ir.Tensor{Name: "e", DType: lang.F32}
	// e[n] = exp(x[n]) * 2: two operations.
	e := &ir.Def{Tensor: local, Vars: []*ir.Var{n}, Body: &ir.Binary{Op: ir.OpMul, T: lang.F32,
		L: &ir.Call{Fn: "exp", T: lang.F32, Args: []ir.Expr{&ir.Access{T: x, Index: []ir.Expr{&ir.VarRef{V: n}}}}},
		R: &ir.Const{T: lang.F32, Float: 2}}}
	// out[n] = e[n] + sum(k: e[k]): one addition, four terms of a sum
	// (each a read of e and a combination).
	read := func(v *ir.Var) ir.Expr { return &ir.Access{T: local, Index: []ir.Expr{&ir.VarRef{V: v}}} }
	out := &ir.Def{Tensor: &ir.Tensor{Name: "out", DType: lang.F32}, Vars: []*ir.Var{n}, Body: &ir.Binary{Op: ir.OpAdd, T: lang.F32,
		L: read(n), R: &ir.Reduce{Kind: ir.Sum, Vars: []*ir.Var{k}, Body: read(k), T: lang.F32}}}
	recomputed := func(t *ir.Tensor) *ir.Def {
		if t == local {
			return e
		}
		return nil
	}
	for _, c := range []struct {
		recomputed func(*ir.Tensor) *ir.Def
		want       int64
	}{{nil, 8 * (1 + 4*1)}, {recomputed, 8 * (1 + 2 + 4*(2+1))}} {
		got, err := cost.DefFLOPsRecomputing(out, c.recomputed)
		if err != nil || got != c.want {
			t.Errorf("recomputed %v: %d FLOPs (%v), want %d", c.recomputed != nil, got, err, c.want)
		}
	}
	if calls, err := cost.DefMathCalls(out, "exp", recomputed); err != nil || calls != 8*5 {
		t.Errorf("%d calls of exp (%v), want 40", calls, err)
	}
}
