package codegen

import (
	"slices"

	"fmt"

	"tofuc/codegen/kernel"
	"tofuc/lang"
	"tofuc/runtime/plan"
)

// minLibraryFLOPs is the smallest product offered to a library: below
// it, a call's fixed cost outweighs any gain, and measuring it would
// only lengthen the placement.
const minLibraryFLOPs = 1 << 16

// productKey is the buffer a library's product of kernel k writes for k's
// epilogue to read.
type productKey struct{ k *kernel.Kernel }

// offerLibraries adds, for a contraction kernel k that is a strided
// matrix product, the variants of a placement group (docs/placement.md)
// that run it on each of the builder's library backends: the library's
// call, then k's epilogue reading the product unless k's output is the
// product itself. It returns the group, or -1 when k is not offered; the
// caller launches k as the group's generated variant.
func (b *builder) offerLibraries(device int, k *kernel.Kernel) (int, error) {
	if len(b.backends) == 0 || !b.p.Precision.InF32() {
		return -1, nil
	}
	s, ok := k.StridedGEMM()
	if !ok || 2*s.M*s.N*s.K*kernel.Product(s.Batch) < minLibraryFLOPs {
		return -1, nil
	}
	group := len(b.p.Placement)
	cKey := any(k.Out().Key)
	if !k.SumOnly() {
		cKey = productKey{k}
	}
	call, ok := gemmCall(s, b.backends[0])
	if !ok {
		return -1, nil
	}
	if !k.SumOnly() {
		b.buffer(cKey, k.Label+" product", device, lang.F32, k.Shape, plan.RoleWorkspace)
	}
	if err := b.bindCall(k, s, call, cKey); err != nil {
		return -1, err
	}
	for _, backend := range b.backends {
		c := *call
		c.Backend = backend
		b.addStep(device, false, plan.Step{Op: plan.Library, GEMM: &c, Label: k.Label, Pos: posOf(k),
			Place: &plan.Placed{Group: group, Variants: []string{backend}}})
	}
	if !k.SumOnly() {
		idx, err := b.launch(device, false, k.ReadSum(cKey))
		if err != nil {
			return -1, err
		}
		b.p.Steps[device][idx].Place = &plan.Placed{Group: group, Variants: slices.Clone(b.backends)}
	}
	b.p.Placement = append(b.p.Placement, plan.PlaceGroup{Label: k.Label, Pos: posOf(k),
		Candidates: append(append([]string{}, b.backends...), plan.Generated), Chosen: plan.Generated})
	return group, nil
}

// gemmCall is backend's call of strided product s, its buffers not yet
// bound; ok is false when a library cannot make it (a layout BLAS does
// not read, results of a batch that interleave, a step backwards:
// plan.GEMMCall.Check).
func gemmCall(s *kernel.Strided, backend string) (*plan.GEMMCall, bool) {
	matrix := func(m kernel.StridedMatrix) plan.Matrix {
		return plan.Matrix{Offset: m.Offset, Row: m.Row, Col: m.Col, Batch: m.Batch}
	}
	call := &plan.GEMMCall{Backend: backend, M: s.M, N: s.N, K: s.K, Batch: s.Batch, A: matrix(s.A), B: matrix(s.B), C: matrix(s.C)}
	return call, call.Check() == nil
}

// bindCall sets the buffers of call, strided product s of kernel k
// into the buffer of cKey, and touches them.
func (b *builder) bindCall(k *kernel.Kernel, s *kernel.Strided, call *plan.GEMMCall, cKey any) error {
	for _, m := range []struct {
		to  *plan.Matrix
		key any
	}{{&call.A, k.Args[s.A.Arg].Key}, {&call.B, k.Args[s.B.Arg].Key}, {&call.C, cKey}} {
		id, ok := b.bufferOf[m.key]
		if !ok {
			return fmt.Errorf("%s: argument %v has no buffer", k.Label, m.key)
		}
		m.to.Buffer = id
		b.touch(id)
	}
	return nil
}

// posOf is k's call site for a step's Pos.
func posOf(k *kernel.Kernel) string {
	if k.Call.IsValid() {
		return k.Call.String()
	}
	return ""
}
