package plan

import (
	"math"
	"strings"
	"testing"
)

// withLibrary is twoDevices with a placement group on device 0: y
// computed either by its kernel or, as a 2×2 matrix, by OpenBLAS's
// product of x and m.
func withLibrary() *Plan {
	p := twoDevices()
	p.Placement = []PlaceGroup{{Label: "y", Candidates: []string{"openblas", Generated}, Chosen: "openblas"}}
	square := func(buf int) Matrix { return Matrix{Buffer: buf, Row: 2, Col: 1, Batch: []int64{}} }
	lib := Step{Op: Library, Label: "y", Place: &Placed{Group: 0, Variants: []string{"openblas"}},
		GEMM: &GEMMCall{Backend: "openblas", M: 2, N: 2, K: 2, Batch: []int64{}, A: square(0), B: square(5), C: square(1)}}
	p.Steps[0][0].Place = &Placed{Group: 0, Variants: []string{Generated}}
	p.Steps[0] = append([]Step{lib}, p.Steps[0]...)
	for i := range p.Steps[1] {
		for j := range p.Steps[1][i].After {
			p.Steps[1][i].After[j].Step = 1 // the generated y, which writes last
		}
	}
	return p
}

// TestLibraryRefuses: library steps and placement groups that do not
// hold together are refused, naming what is wrong.
func TestLibraryRefuses(t *testing.T) {
	if err := withLibrary().Validate(); err != nil {
		t.Fatalf("the plan to edit: %v", err)
	}
	gemm := func(p *Plan) *GEMMCall { return p.Steps[0][0].GEMM }
	for _, tc := range []struct {
		name string
		edit func(p *Plan)
		want string
	}{
		{"no group", func(p *Plan) { p.Steps[0][0].Place = nil }, "needs one call (gemm or conv) and a placement group"},
		{"in the generated variant", func(p *Plan) { p.Steps[0][0].Place.Variants = []string{Generated} }, `a library step in the "generated" variant`},
		{"a negative batch stride", func(p *Plan) {
			g := gemm(p)
			g.Batch, g.A.Batch, g.B.Batch, g.C.Batch = []int64{1}, []int64{-4}, []int64{0}, []int64{0}
		}, "gemm.a: offset or stride -4 out of"},
		{"the generated backend", func(p *Plan) { gemm(p).Backend = Generated }, `gemm.backend "generated" names no library`},
		{"K past the buffer", func(p *Plan) { gemm(p).K = 3 }, "gemm.a: strides 2 (rows) and 1 (columns) of a 2×3 matrix"},
		{"an offset past the buffer", func(p *Plan) { gemm(p).B.Offset = 1 }, "gemm.b: reaches element 4 of buffer 5"},
		{"a batch past the buffer", func(p *Plan) {
			g := gemm(p)
			g.Batch, g.A.Batch, g.B.Batch, g.C.Batch = []int64{2}, []int64{0}, []int64{0}, []int64{4}
		}, "gemm.c: reaches element 7 of buffer 1"},
		{"results overlapping across the batch", func(p *Plan) {
			g := gemm(p)
			g.M, g.Batch, g.A.Batch, g.B.Batch, g.C.Batch = 1, []int64{2}, []int64{0}, []int64{0}, []int64{1}
		}, "batch stride 1 of dimension 0 is within the 2 elements before it"},
		{"no unit stride", func(p *Plan) { gemm(p).C.Col = 2 }, "gemm.c: strides 2 (rows) and 2 (columns)"},
		{"an f64 result", func(p *Plan) { gemm(p).C.Buffer = 6 }, "buffer 6 is f64 on device 0"},
		{"another device's buffer", func(p *Plan) { gemm(p).A.Buffer = 2 }, "not f32 on device 0"},
		{"a result into an input", func(p *Plan) { gemm(p).C.Buffer = 0 }, "writes buffer 0 (x), which holds a tile of an input"},
		{"an extent of zero", func(p *Plan) { gemm(p).N = 0 }, "gemm: extent 0 out of [1, 2147483647]"},
		{"a stride past int32", func(p *Plan) { gemm(p).A.Row = 1 << 31 }, "out of [0, 2147483647]"},
		{"a missing group", func(p *Plan) { p.Steps[0][1].Place.Group = 3 }, "placement group 3 does not exist"},
		{"an unknown variant", func(p *Plan) { p.Steps[0][1].Place.Variants = []string{"mkl"} }, `variant "mkl" is no candidate`},
		{"no generated candidate", func(p *Plan) { p.Placement[0].Candidates = []string{"openblas"} }, `must hold "generated"`},
		{"a chosen variant not a candidate", func(p *Plan) { p.Placement[0].Chosen = "onednn" }, `the chosen "onednn"`},
		{"a GPU's library on two devices", func(p *Plan) { p.Placement[0].Candidates = append(p.Placement[0].Candidates, CUBLAS) }, "a GPU's library in a plan of 2 devices"},
	} {
		p := withLibrary()
		tc.edit(p)
		err := p.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

// TestLayout: how a BLAS library reads an operand, from its strides.
func TestLayout(t *testing.T) {
	for _, tc := range []struct {
		rows, cols, row, col int64
		trans                bool
		ld                   int64
		ok                   bool
	}{
		{3, 4, 4, 1, false, 4, true},
		{3, 4, 6, 1, false, 6, true},  // padded rows
		{3, 4, 1, 3, true, 3, true},   // column-major
		{3, 4, 3, 1, false, 0, false}, // rows overlap
		{3, 4, 1, 2, false, 0, false}, // columns overlap
		{1, 4, 99, 1, false, 4, true}, // one row: its stride is never used
		{3, 1, 1, 99, false, 1, true}, // one column: row-major, a row apart
		{3, 4, 8, 2, false, 0, false}, // no unit stride
		{1, 1, 7, 7, false, 1, true},
	} {
		o := Operand{"x", &Matrix{Row: tc.row, Col: tc.col}, tc.rows, tc.cols}
		trans, ld, ok := o.Layout()
		if ok != tc.ok || ok && (trans != tc.trans || ld != tc.ld) {
			t.Errorf("%d×%d, strides %d, %d: got %v, %d, %v, want %v, %d, %v", tc.rows, tc.cols, tc.row, tc.col, trans, ld, ok, tc.trans, tc.ld, tc.ok)
		}
	}
}

// TestInForce: the chosen variant where the device can run it, the
// generated one where not.
func TestInForce(t *testing.T) {
	p := withLibrary()
	if got := p.InForce(func(string) bool { return true }); got[0] != "openblas" {
		t.Errorf("with the library: %v", got)
	}
	if got := p.InForce(func(string) bool { return false }); got[0] != Generated {
		t.Errorf("without it: %v", got)
	}
	if !p.Steps[0][0].Place.Runs([]string{"openblas"}) || p.Steps[0][0].Place.Runs([]string{Generated}) {
		t.Error("the library step runs in the wrong variant")
	}
}

// withConv is withLibrary with its library step a 1-D convolution on
// oneDNN: y [1, 1, 4] = x [1, 1, 4] convolved with one weight of m.
func withConv() *Plan {
	p := withLibrary()
	p.Placement[0].Candidates, p.Placement[0].Chosen = []string{"onednn", Generated}, "onednn"
	s := &p.Steps[0][0]
	s.GEMM, s.Place.Variants = nil, []string{"onednn"}
	s.Conv = &ConvCall{Backend: "onednn", N: 1, C: 1, O: 1, Group: 1, In: []int64{4}, Kernel: []int64{1}, Out: []int64{4},
		Strides: []int64{1}, Dilations: []int64{1}, PadsBegin: []int64{0}, PadsEnd: []int64{0},
		X: Dense{Buffer: 0}, W: Dense{Buffer: 5}, Y: Dense{Buffer: 1}}
	return p
}

// TestConvRefuses: convolution steps that do not hold together are
// refused, naming what is wrong.
func TestConvRefuses(t *testing.T) {
	if err := withConv().Validate(); err != nil {
		t.Fatalf("the plan to edit: %v", err)
	}
	conv := func(p *Plan) *ConvCall { return p.Steps[0][0].Conv }
	for _, tc := range []struct {
		name string
		edit func(p *Plan)
		want string
	}{
		{"both calls", func(p *Plan) { p.Steps[0][0].GEMM = withLibrary().Steps[0][0].GEMM }, "needs one call (gemm or conv)"},
		{"groups not dividing", func(p *Plan) { conv(p).Group = 2 }, "2 groups do not divide 1 input and 1 output channels"},
		{"no groups", func(p *Plan) { conv(p).Group = 0 }, "out of [1,"},
		{"a wrong output extent", func(p *Plan) { conv(p).Out = []int64{3} }, "output extent 3 of spatial dimension 0, want 4"},
		{"four spatial dimensions", func(p *Plan) {
			c := conv(p)
			c.In, c.Kernel, c.Out = []int64{1, 1, 2, 2}, []int64{1, 1, 1, 1}, []int64{1, 1, 2, 2}
		}, "4 spatial dimensions"},
		{"a short list", func(p *Plan) { conv(p).Strides = nil }, "conv.strides has 0 entries"},
		{"a stride of zero", func(p *Plan) { conv(p).Strides = []int64{0} }, "out of [1,"},
		{"a negative pad", func(p *Plan) { conv(p).PadsEnd = []int64{-1} }, "out of [0,"},
		{"an f64 result", func(p *Plan) { conv(p).Y.Buffer = 6 }, "conv.y: buffer 6 is f64 on device 0"},
		{"a result past its buffer", func(p *Plan) { conv(p).Y.Offset = 1 }, "conv.y: reaches element 4 of buffer 1"},
		{"a missing buffer", func(p *Plan) { conv(p).W.Buffer = 99 }, "conv.w: buffer 99 does not exist"},
		{"a result into an input", func(p *Plan) { conv(p).Y.Buffer = 0 }, "writes buffer 0 (x), which holds a tile of an input"},
		{"post-ops on cuDNN", func(p *Plan) {
			conv(p).Backend, conv(p).Post = CUDNN, &PostOps{Acts: []Activation{{Kind: ActMax}}}
		}, "cudnn runs no post-ops"},
		{"an unknown bound", func(p *Plan) { conv(p).Post = &PostOps{Acts: []Activation{{Kind: "tanh"}}} }, `kind "tanh"`},
		{"an infinite bound", func(p *Plan) {
			conv(p).Post = &PostOps{Acts: []Activation{{Kind: ActMin, Value: math.Inf(1)}}}
		}, "not a finite f32"},
		{"a bias past its buffer", func(p *Plan) { conv(p).Post = &PostOps{Bias: &Dense{Buffer: 5, Offset: 9}} }, "conv.post.bias: reaches element 9 of buffer 5"},
		{"a bias into the result", func(p *Plan) { conv(p).Post = &PostOps{Bias: &Dense{Buffer: 1}} }, "share bytes, and the step writes one of them"},
	} {
		p := withConv()
		tc.edit(p)
		err := p.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

// TestGPULibraryRefuses: a GPU library's step its library cannot
// compute is refused, and a convolution whose shorter end pad the last
// window never reads is not.
func TestGPULibraryRefuses(t *testing.T) {
	conv := func(backend string, in, stride, padEnd int64) *Step {
		c := &ConvCall{Backend: backend, N: 1, C: 1, O: 1, Group: 1, In: []int64{in}, Kernel: []int64{3}, Strides: []int64{stride},
			Dilations: []int64{1}, PadsBegin: []int64{1}, PadsEnd: []int64{padEnd}}
		c.Out = []int64{ConvOutExtent(in, 3, stride, 1, 1, padEnd)}
		return &Step{Op: Library, Conv: c}
	}
	for _, tc := range []struct {
		name string
		step *Step
		want string // "" for none
	}{
		{"a convolution on cuBLAS", conv(CUBLAS, 8, 1, 1), "cublas computes no convolution"},
		{"a product on cuDNN", &Step{Op: Library, GEMM: &GEMMCall{Backend: CUDNN, M: 1, N: 1, K: 1}}, "cudnn computes no sgemm"},
		{"pads 1 and 0 at stride 1", conv(CUDNN, 8, 1, 0), "cudnn cannot compute the convolution with pads [1] and [0]"},
		{"pads 1 and 0 at stride 2 on 8", conv(CUDNN, 8, 2, 0), ""},
		{"pads 1 and 1", conv(CUDNN, 8, 1, 1), ""},
	} {
		err := tc.step.checkGPULibrary()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
		}
	}
}
