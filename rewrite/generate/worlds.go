package generate

import (
	"strings"

	"tofuc/lang"
	"tofuc/lang/ir"
)

// World is a set of inputs with symbolic shapes and the operators that
// combine them; Extents are the symbols' values for fingerprinting,
// distinct so that no shape matches by accident.
type World struct {
	Name    string
	Inputs  []*Input
	Ops     []*Op
	Extents map[string]int64
}

// Input is a graph input: a name, a symbolic shape (symbols or
// integers), and whether it is a weight (a convolution kernel: TASO never
// convolves a weight as data).
type Input struct {
	Name   string
	Shape  []string
	Weight bool
	order  int
}

func (in *Input) shape() []lang.Dim {
	out := make([]lang.Dim, len(in.Shape))
	for i, s := range in.Shape {
		if c, ok := constDim(s); ok {
			out[i] = lang.Const(c)
		} else {
			out[i] = lang.Sym(s)
		}
	}
	return out
}

func (w World) extent(s string) int64 {
	if c, ok := constDim(s); ok {
		return c
	}
	return w.Extents[s]
}

func constDim(s string) (int64, bool) {
	var c int64
	for _, r := range s {
		if r < '0' || r > '9' {
			return 0, false
		}
		c = c*10 + int64(r-'0')
	}
	return c, s != ""
}

// Op is an operator of TASO's set as TDL writes it: Format holds the call
// with `%` for each argument in order (or an infix form).
type Op struct {
	Name        string
	Op          string // the stdlib operator
	Attrs       map[string]ir.AttrValue
	Format      string
	Arity       int
	Commutative bool
	// Data and Kernel restrict the arguments: Data an activation, Kernel
	// a weight; InputOnly an argument that is a graph input (TASO's
	// enlarge).
	Data, Kernel, InputOnly []bool
}

func (op *Op) format(args []string) string {
	s := op.Format
	for _, a := range args {
		s = strings.Replace(s, "%", a, 1)
	}
	return s
}

func (op *Op) accepts(args []*node) bool {
	for i, a := range args {
		if i < len(op.Data) && op.Data[i] && a.weight {
			return false
		}
		if i < len(op.Kernel) && op.Kernel[i] && !a.weight {
			return false
		}
		if i < len(op.InputOnly) && op.InputOnly[i] && a.input == nil {
			return false
		}
	}
	return true
}

func numbered(ins []*Input) []*Input {
	for i, in := range ins {
		in.order = i
	}
	return ins
}

// Dense is TASO's matrix world: x, y [M, N], w [N, N], a scalar s;
// element-wise add and multiply (by the scalar too: TASO's scalar
// multiply), transpose, matmul, relu, and concatenation along either
// axis. M = 2, N = 3 when fingerprinting.
func Dense() World {
	return World{
		Name:    "dense",
		Extents: map[string]int64{"M": 2, "N": 3},
		Inputs: numbered([]*Input{
			{Name: "x", Shape: []string{"M", "N"}},
			{Name: "y", Shape: []string{"M", "N"}},
			{Name: "w", Shape: []string{"N", "N"}},
			{Name: "s", Shape: nil},
		}),
		Ops: []*Op{
			{Name: "ewadd", Op: "add", Format: "(% + %)", Arity: 2, Commutative: true},
			{Name: "ewmul", Op: "mul", Format: "(% * %)", Arity: 2, Commutative: true},
			{Name: "transpose", Op: "transpose", Attrs: map[string]ir.AttrValue{"perm": ir.IntList(1, 0)}, Format: "transpose<perm = [1, 0]>(%)", Arity: 1},
			{Name: "matmul", Op: "matmul", Format: "matmul(%, %)", Arity: 2},
			{Name: "relu", Op: "relu", Format: "relu(%)", Arity: 1},
			{Name: "concat0", Op: "concat", Attrs: map[string]ir.AttrValue{"axis": {Kind: ir.AttrInt}}, Format: "concat<axis = 0>(%, %)", Arity: 2},
			{Name: "concat1", Op: "concat", Attrs: map[string]ir.AttrValue{"axis": {Kind: ir.AttrInt, Int: 1}}, Format: "concat<axis = 1>(%, %)", Arity: 2},
		},
	}
}

// Conv is TASO's convolution world: activations a, b [B, C, H, W],
// kernels k [C, C, 3, 3] and l [C, C, 1, 1]; 3x3 and 1x1 convolutions with
// same padding, relu, element-wise add, average and max pooling (3x3,
// stride 1, same padding), concatenation of activations along channels
// and of kernels along outputs, and enlarge (a 1x1 kernel input padded to
// 3x3). B = 1, C = 2, H = 4, W = 5 when fingerprinting.
func Conv() World {
	same := map[string]ir.AttrValue{"pads": ir.IntList(1, 1, 1, 1)}
	pool := map[string]ir.AttrValue{"kernel_shape": ir.IntList(3, 3), "pads": ir.IntList(1, 1, 1, 1)}
	return World{
		Name:    "conv",
		Extents: map[string]int64{"B": 1, "C": 2, "H": 4, "W": 5},
		Inputs: numbered([]*Input{
			{Name: "a", Shape: []string{"B", "C", "H", "W"}},
			{Name: "b", Shape: []string{"B", "C", "H", "W"}},
			{Name: "k", Shape: []string{"C", "C", "3", "3"}, Weight: true},
			{Name: "l", Shape: []string{"C", "C", "1", "1"}, Weight: true},
		}),
		Ops: []*Op{
			{Name: "conv3x3", Op: "conv2d", Attrs: same, Format: "conv2d<pads = [1, 1, 1, 1]>(%, %)", Arity: 2, Data: []bool{true, false}, Kernel: []bool{false, true}},
			{Name: "conv1x1", Op: "conv2d", Format: "conv2d(%, %)", Arity: 2, Data: []bool{true, false}, Kernel: []bool{false, true}},
			{Name: "relu", Op: "relu", Format: "relu(%)", Arity: 1},
			{Name: "ewadd", Op: "add", Format: "(% + %)", Arity: 2, Commutative: true},
			{Name: "avgpool", Op: "avg_pool2d", Attrs: pool, Format: "avg_pool2d<kernel_shape = [3, 3], pads = [1, 1, 1, 1]>(%)", Arity: 1, Data: []bool{true}},
			{Name: "maxpool", Op: "max_pool2d", Attrs: pool, Format: "max_pool2d<kernel_shape = [3, 3], pads = [1, 1, 1, 1]>(%)", Arity: 1, Data: []bool{true}},
			{Name: "concat_channels", Op: "concat", Attrs: map[string]ir.AttrValue{"axis": {Kind: ir.AttrInt, Int: 1}}, Format: "concat<axis = 1>(%, %)", Arity: 2, Data: []bool{true, true}},
			{Name: "concat_kernels", Op: "concat", Attrs: map[string]ir.AttrValue{"axis": {Kind: ir.AttrInt}}, Format: "concat<axis = 0>(%, %)", Arity: 2, Kernel: []bool{true, true}},
			{Name: "enlarge", Op: "pad", Attrs: map[string]ir.AttrValue{"pads": ir.IntList(0, 0, 1, 1, 0, 0, 1, 1)}, Format: "pad<pads = [0, 0, 1, 1, 0, 0, 1, 1]>(%)", Arity: 1, Kernel: []bool{true}, InputOnly: []bool{true}},
		},
	}
}
