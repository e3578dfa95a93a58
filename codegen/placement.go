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
	cKey := k.Out().Key
	if !k.SumOnly() {
		cKey = productKey{k}
		b.buffer(cKey, k.Label+" product", device, lang.F32, k.Shape, plan.RoleWorkspace)
	}
	call, err := b.gemmCall(k, s, cKey)
	if err != nil || !blasLayouts(call) {
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

// gemmCall is the call of strided product s of kernel k, its result
// into the buffer of cKey; it touches the buffers.
func (b *builder) gemmCall(k *kernel.Kernel, s *kernel.Strided, cKey any) (*plan.GEMMCall, error) {
	call := &plan.GEMMCall{M: s.M, N: s.N, K: s.K, Batch: s.Batch}
	for _, m := range []struct {
		to  *plan.Matrix
		src kernel.StridedMatrix
	}{{&call.A, s.A}, {&call.B, s.B}, {&call.C, s.C}} {
		key := cKey
		if m.src.Arg >= 0 {
			key = k.Args[m.src.Arg].Key
		}
		id, ok := b.bufferOf[key]
		if !ok {
			return nil, fmt.Errorf("%s: argument %v has no buffer", k.Label, key)
		}
		*m.to = plan.Matrix{Buffer: id, Offset: m.src.Offset, Row: m.src.Row, Col: m.src.Col, Batch: m.src.Batch}
		b.touch(id)
	}
	return call, nil
}

// posOf is k's call site for a step's Pos.
func posOf(k *kernel.Kernel) string {
	if k.Call.IsValid() {
		return k.Call.String()
	}
	return ""
}

// blasLayouts reports whether a BLAS library reads every operand of
// call as it lies (plan.Operand.Layout).
func blasLayouts(call *plan.GEMMCall) bool {
	for _, o := range call.Operands() {
		if _, _, ok := o.Layout(); !ok {
			return false
		}
	}
	return true
}
