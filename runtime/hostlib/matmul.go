package hostlib

import (
	"encoding/json"
	"fmt"
	"strings"
	"unsafe"

	"tofuc/runtime/plan"
)

// dnnlQueryImplInfo is dnnl_query_impl_info_str: the name of the
// implementation a primitive descriptor chose.
const dnnlQueryImplInfo = 8

// Weights says which operand of a product holds weights that a
// parameter binding fixes: the binding's number (0: none, the operands
// may change at every call) and whether it is A (else B).
type Weights struct {
	Binding uint64
	A       bool
}

// GEMM runs call c on the buffers a, b and out (their first elements).
// The call must have been validated (plan.Validate).
//
// Where w names a binding, the weights stay unchanged until the caller
// binds others under another number (as Conv's weights). oneDNN then
// runs each batch entry as its matmul primitive, the weights as the
// primitive's second operand reordered once per binding and address to
// its own layout, where it can: the weights B with a row-major result,
// or the weights A with a column-major one (Cᵀ = Bᵀ·Aᵀ), at most
// maxKeptWeights weight matrices, and an implementation other than
// oneDNN's reference one. BLAS's sgemm packs its B again at every
// call: a ViT's linear layers took 1.3–1.4 times as long that way
// (docs/placement.md). Other calls, and OpenBLAS's, are sgemm. A
// program holds the primitive from its load (AcquireGEMM); a call no
// caller holds makes its own and frees it, reordering its weights each
// time (slower than sgemm).
func (l *Library) GEMM(c *plan.GEMMCall, a, b, out unsafe.Pointer, w Weights) error {
	if call, src, weights, ok := l.onMatmul(c, a, b, w.A); ok && w.Binding != 0 {
		p, release, err := l.dnnl.acquire(matmulKey(call), func() (*prim, error) { return l.dnnl.newMatmul(call) })
		if err != nil {
			return err
		}
		defer release()
		if p.op != 0 {
			call.ForEachEntry(func(idx []int) {
				if err == nil {
					err = l.dnnl.run(p, []unsafe.Pointer{at(src, &call.A, idx), at(weights, &call.B, idx), at(out, &call.C, idx)}, w.Binding)
				}
			})
			return err
		}
	}
	bl := c.BLAS()
	if bl.Swapped {
		a, b = b, a
	}
	c.ForEachEntry(func(idx []int) {
		pa, pb, pc := at(a, bl.A.Matrix, idx), at(b, bl.B.Matrix, idx), at(out, bl.C.Matrix, idx)
		l.sgemm(bl.TransA, bl.TransB, bl.C.Rows, bl.C.Cols, bl.A.Cols, pa, bl.LDA, pb, bl.LDB, pc, bl.LDC)
	})
	return nil
}

// onMatmul is c as a matmul primitive's call with the weights (A when
// weightsA, else B) as its B, and the buffers of its A and B, when
// oneDNN may run it so: c itself, or its transpose when the weights are
// A; ok is false where the library has no primitives or the result
// would not be row-major.
func (l *Library) onMatmul(c *plan.GEMMCall, a, b unsafe.Pointer, weightsA bool) (call *plan.GEMMCall, src, weights unsafe.Pointer, ok bool) {
	if l.dnnl == nil {
		return nil, nil, nil, false
	}
	call, src, weights = c, a, b
	if weightsA {
		call, src, weights = c.Transposed(), b, a
	}
	return call, src, weights, call.C.Col == 1 && weightMatrices(call) <= maxKeptWeights
}

// weightMatrices is how many weight matrices (B) call's batch entries
// read: a primitive keeps at most maxKeptWeights reordered, and more
// would be reordered again at every call.
func weightMatrices(call *plan.GEMMCall) int64 {
	n := int64(1)
	for d, extent := range call.Batch {
		if call.B.Batch[d] != 0 {
			n *= extent
		}
	}
	return n
}

// AcquireGEMM holds the matmul primitive of call c, with weights A
// when weightsA and else B, bound (GEMM), until release, made now if no
// caller holds it, as AcquireConv does for a convolution. Where GEMM
// would call sgemm, it holds nothing.
func (l *Library) AcquireGEMM(c *plan.GEMMCall, weightsA bool) (release func(), err error) {
	call, _, _, ok := l.onMatmul(c, nil, nil, weightsA)
	if !ok {
		return func() {}, nil
	}
	_, release, err = l.dnnl.acquire(matmulKey(call), func() (*prim, error) { return l.dnnl.newMatmul(call) })
	return release, err
}

// at is the address of matrix m's batch entry idx in the buffer at base.
func at(base unsafe.Pointer, m *plan.Matrix, idx []int) unsafe.Pointer {
	return unsafe.Add(base, m.EntryOffset(idx)*4)
}

// matmulKey keys a batch entry's matmul primitive: its extents and
// strides.
func matmulKey(c *plan.GEMMCall) string {
	b, _ := json.Marshal([]int64{c.M, c.N, c.K, c.A.Row, c.A.Col, c.B.Row, c.B.Col, c.C.Row})
	return "matmul" + string(b)
}

// newMatmul makes the matmul primitive of one batch entry of c: A and
// the result in the plan's layouts, B in the layout oneDNN chooses (its
// weights reordered per binding, run). Where oneDNN has only its
// reference implementation for the layouts (slower than sgemm by
// hundreds of times: a transposed result), or none, the primitive made
// has no op, and the calls are sgemm's.
func (a *dnnlAPI) newMatmul(c *plan.GEMMCall) (*prim, error) {
	var plain [3]memDesc
	for i, m := range []struct {
		rows, cols, row, col int64
	}{{c.M, c.K, c.A.Row, c.A.Col}, {c.K, c.N, c.B.Row, c.B.Col}, {c.M, c.N, c.C.Row, c.C.Col}} {
		row, col := matrixStrides(m.rows, m.cols, m.row, m.col)
		st := a.mdInitByStrides(&plain[i], 2, dimsOf([]int64{m.rows, m.cols}), dnnlF32, dimsOf([]int64{row, col}))
		if err := dnnlStatus("dnnl_memory_desc_init_by_strides", st); err != nil {
			return nil, err
		}
	}
	var weights, noBias memDesc
	if err := dnnlStatus("dnnl_memory_desc_init_by_tag", a.mdInitByTag(&weights, 2, dimsOf([]int64{c.K, c.N}), dnnlF32, dnnlFormatAny)); err != nil {
		return nil, err
	}
	var md opDesc
	if err := dnnlStatus("dnnl_matmul_desc_init", a.matmulInit(&md, &plain[0], &weights, &noBias, &plain[2])); err != nil {
		return nil, err
	}
	var pd uintptr
	switch st := a.pdCreate(&pd, &md, a.attr, a.engine, 0); st {
	case dnnlUnimplemented:
		return &prim{}, nil
	default:
		if err := dnnlStatus("dnnl_primitive_desc_create", st); err != nil {
			return nil, err
		}
	}
	defer a.pdDestroy(pd)
	var impl *byte
	if err := dnnlStatus("dnnl_primitive_desc_query", a.pdQuery(pd, dnnlQueryImplInfo, 0, unsafe.Pointer(&impl))); err != nil {
		return nil, err
	}
	if name := cString(impl); strings.HasPrefix(name, "ref") {
		return &prim{}, nil
	}
	p := &prim{}
	if err := a.fill(p, pd, &plain); err != nil {
		a.destroy(p)
		return nil, fmt.Errorf("matmul %d×%d×%d: %w", c.M, c.N, c.K, err)
	}
	return p, nil
}

// matrixStrides are the strides oneDNN is given for a rows×cols matrix
// of strides (row, col): a dimension of extent 1 gets the stride a
// dense layout would give it, since the plan's may be anything there
// (0 for a broadcast).
func matrixStrides(rows, cols, row, col int64) (int64, int64) {
	if cols == 1 {
		col = 1
	}
	if rows == 1 {
		row = cols * col
	}
	return row, col
}

// cString is the NUL-terminated string at p.
func cString(p *byte) string {
	if p == nil {
		return ""
	}
	var b strings.Builder
	for q := unsafe.Pointer(p); *(*byte)(q) != 0; q = unsafe.Add(q, 1) {
		b.WriteByte(*(*byte)(q))
	}
	return b.String()
}
