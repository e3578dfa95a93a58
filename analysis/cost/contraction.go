package cost

import (
	"tofuc/lang/ir"
)

// ContractionShape is a contraction kernel as the host runs it, a
// packed GEMM (codegen/emit's gemm): for each of Batch indices, an
// output of Rows × Cols elements, each a sum of Depth products. Rows is
// the side of the weight factor where one factor is computed from the
// weights alone (the host packs it once, with them), else the side with
// fewer elements; the host's micro-kernel computes whole tiles of rows
// × columns, so a side that is no multiple of the tile is padded.
// RowsPacked and ColsPacked say that a side's factor is packed with the
// weights, once, not at each launch.
type ContractionShape struct {
	Batch, Rows, Cols, Depth int64
	RowsPacked, ColsPacked   bool
}

// Packed is the floats a launch of the shape packs: each factor not
// packed with the weights, once (the host packs a row side's strips
// again for each chunk of columns a task takes, which this leaves out).
func (c ContractionShape) Packed() int64 {
	var side int64
	if !c.RowsPacked {
		side += c.Rows
	}
	if !c.ColsPacked {
		side += c.Cols
	}
	return c.Batch * c.Depth * side
}

// SerialBytes is the memory traffic of a launch of the shape that its
// multiplications do not hide: the host's GEMM packs a block of a
// factor, then multiplies it, then writes the block's outputs, each
// task in turn on its own thread, so that reading what it packs (a
// float of 4 bytes each, Packed; the packed copy stays in cache) and
// writing its outputs (4 bytes each, and the line read first) are
// passes of their own, where the reads of the factor packed with the
// weights stream beside the FMAs. On two threads a linear layer's
// product of 32 rows by 1,000 × 1,000 weights took 0.84 ms packing them
// at each launch against 0.56 ms packed once, and the weight gradients
// of a training step, 32 products for each of 1 to 4 million outputs,
// ran 0.3 ns an output beyond their FLOPs at the peak.
func (c ContractionShape) SerialBytes() int64 {
	return packedFloatBytes*c.Packed() + outputBytes*c.Batch*c.Rows*c.Cols
}

// packedFloatBytes is what packing reads of a float (an f32), and
// outputBytes what a contraction's output element moves (an f32
// written, its line read before).
const (
	packedFloatBytes = 4
	outputBytes      = 8
)

// Padding is the FLOPs that micro-tiles of tileRows × tileCols add to
// the shape's multiply-adds (two FLOPs each): those of the rows and
// columns up to whole tiles (0 where a tile side is not positive). A
// shape of at most narrowCols columns runs a narrow kernel over exactly
// its columns (a fully connected layer at batch 1): only its rows are
// padded.
func (c ContractionShape) Padding(tileRows, tileCols, narrowCols int64) int64 {
	if tileRows <= 0 || tileCols <= 0 {
		return 0
	}
	cols := ceilTo(c.Cols, tileCols)
	if c.Cols <= narrowCols {
		cols = c.Cols
	}
	return 2 * c.Batch * c.Depth * (ceilTo(c.Rows, tileRows)*cols - c.Rows*c.Cols)
}

func ceilTo(n, q int64) int64 { return (n + q - 1) / q * q }

// IsContraction says whether d is a contraction, the compiler's rule
// (codegen/kernel's Contraction kind, which the host runs as a packed
// GEMM): one of its sums, not nested in another, multiplies two reads
// whose index variables differ (each operand reused across outputs), as
// in a matmul, a linear layer or a convolution; a sum of squares or a
// dot product of two vectors read alike is not one.
func IsContraction(d *ir.Def) bool {
	_, ok := ContractionOf(d, nil)
	return ok
}

// ContractionOf is the shape of contraction d (ok false: d is not one,
// IsContraction). weight says whether a tensor d reads holds weights
// (nil: none does); a factor all of whose reads are weights and that
// reads no batch variable becomes the row side.
func ContractionOf(d *ir.Def, weight func(*ir.Tensor) bool) (c ContractionShape, ok bool) {
	f, ok := contractionOf(d)
	return f.shape(weight), ok
}

// contraction is what ContractionOf reads from a Def whatever its
// tensors hold: the shape with the smaller side as rows, and the tensors
// each factor reads.
type contraction struct {
	ContractionShape
	rows, cols factor
}

// factor is the tensors one factor of a contraction reads; batch says it
// reads a batch variable (it never becomes the row side then).
type factor struct {
	tensors []*ir.Tensor
	batch   bool
}

// onWeights says whether every tensor f reads (one at least) holds
// weights and f reads no batch variable.
func (f factor) onWeights(weight func(*ir.Tensor) bool) bool {
	if weight == nil || f.batch || len(f.tensors) == 0 {
		return false
	}
	for _, t := range f.tensors {
		if !weight(t) {
			return false
		}
	}
	return true
}

// shape is the contraction's shape with the factor on weights as rows.
func (c contraction) shape(weight func(*ir.Tensor) bool) ContractionShape {
	s := c.ContractionShape
	switch {
	case c.rows.onWeights(weight):
		s.RowsPacked = true
	case c.cols.onWeights(weight):
		s.Rows, s.Cols = s.Cols, s.Rows
		s.RowsPacked = true
	}
	return s
}

// contractionOf reads contraction d (ok false: d is not one).
func contractionOf(d *ir.Def) (c contraction, ok bool) {
	var sum *ir.Reduce
	ir.Walk(d.Body, func(e ir.Expr) bool {
		r, isReduce := e.(*ir.Reduce)
		if sum != nil || !isReduce {
			return sum == nil
		}
		if ir.IsContraction(r) {
			sum = r
		}
		return false
	})
	if sum == nil {
		return c, false
	}
	m := ir.Product(sum)
	a, b := m.L, m.R
	inA, inB := ir.VarRefs(a), ir.VarRefs(b)
	var batch, rows, cols []*ir.Var
	for _, v := range d.Vars {
		switch {
		case inA[v] == inB[v]:
			batch = append(batch, v)
		case inA[v]:
			rows = append(rows, v)
		default:
			cols = append(cols, v)
		}
	}
	if ir.Extent(rows) > ir.Extent(cols) {
		a, b, rows, cols = b, a, cols, rows
	}
	c.ContractionShape = ContractionShape{Batch: ir.Extent(batch), Rows: ir.Extent(rows), Cols: ir.Extent(cols), Depth: ir.Extent(sum.Vars)}
	c.rows, c.cols = factorOf(a, batch), factorOf(b, batch)
	return c, true
}

// factorOf is the tensors f reads and whether it reads one of batch.
func factorOf(f ir.Expr, batch []*ir.Var) factor {
	var out factor
	refs := ir.VarRefs(f)
	for _, v := range batch {
		out.batch = out.batch || refs[v]
	}
	ir.Walk(f, func(e ir.Expr) bool {
		if x, isAccess := e.(*ir.Access); isAccess {
			out.tensors = append(out.tensors, x.T)
		}
		return true
	})
	return out
}

// weightValues is the values of g computed from its parameters and
// constants alone (the parameters among them), as analysis/schedule
// finds them: the host packs a contraction's factor on them once.
func weightValues(g *ir.Graph) map[*ir.Value]bool {
	w := make(map[*ir.Value]bool, len(g.Params)+len(g.Nodes))
	for _, p := range g.Params {
		w[p.Value] = true
	}
	for _, n := range g.Nodes {
		all := true
		for _, v := range n.Inputs {
			all = all && (w[v] || v.Const != nil)
		}
		if all {
			for _, v := range n.Outputs {
				w[v] = true
			}
		}
	}
	return w
}

// tensorWeight says which tensors of node n's instance hold weights:
// inputs that are weight values (or constants), locals all of whose
// reads do.
func tensorWeight(n *ir.Node, weights map[*ir.Value]bool) func(*ir.Tensor) bool {
	var weight func(t *ir.Tensor) bool
	weight = func(t *ir.Tensor) bool {
		for i, in := range n.Inst.Inputs {
			if in == t {
				return weights[n.Inputs[i]] || n.Inputs[i].Const != nil
			}
		}
		for _, l := range n.Inst.Locals {
			if l.Tensor == t {
				all := true
				ir.Walk(l.Body, func(e ir.Expr) bool {
					if a, ok := e.(*ir.Access); ok && all {
						all = weight(a.T)
					}
					return all
				})
				return all
			}
		}
		return false
	}
	return weight
}
