package codegen

import (
	"fmt"
	"slices"

	"tofuc/codegen/kernel"
	"tofuc/lang"
	"tofuc/lang/precision"
	"tofuc/runtime/hostlib"
	"tofuc/runtime/plan"
)

// minLibraryFLOPs is the smallest product offered to a library: below
// it, a call's fixed cost outweighs any gain, and measuring it would
// only lengthen the placement.
const minLibraryFLOPs = 1 << 16

// productKey is the buffer a library's product of kernel k writes for k's
// epilogue to read.
type productKey struct{ k *kernel.Kernel }

// libraryCall is a kernel's sum as a library's call: the backends that
// can make it, its FLOPs, and the step that makes it on one of them,
// writing the buffer of key.
type libraryCall struct {
	backends []string
	flops    int64
	step     func(backend string, key any) (plan.Step, error)
}

// offerLibraries adds, for a contraction kernel k whose sum a library
// can compute (a strided matrix product, a convolution), the variants
// of a placement group (docs/placement.md) that run it on each library
// backend that can: the library's call, then k's epilogue reading the
// product unless k's output is the product itself. It returns the
// group, or -1 when k is not offered; the caller launches k as the
// group's generated variant.
func (b *builder) offerLibraries(device int, k *kernel.Kernel) (int, error) {
	if len(b.backends) == 0 || !b.p.Precision.InF32() {
		return -1, nil
	}
	call, ok := b.libraryCall(k)
	if !ok || len(call.backends) == 0 || call.flops < minLibraryFLOPs {
		return -1, nil
	}
	group := len(b.p.Placement)
	cKey := any(k.Out().Key)
	if !k.SumOnly() {
		cKey = productKey{k}
		b.buffer(cKey, k.Label+" product", device, lang.F32, k.Shape, plan.RoleWorkspace)
	}
	for _, backend := range call.backends {
		s, err := call.step(backend, cKey)
		if err != nil {
			return -1, err
		}
		s.Op, s.Label, s.Pos = plan.Library, k.Label, posOf(k)
		s.Place = &plan.Placed{Group: group, Variants: []string{backend}}
		b.addStep(device, false, s)
	}
	if !k.SumOnly() {
		idx, err := b.launch(device, false, k.ReadSum(cKey))
		if err != nil {
			return -1, err
		}
		b.p.Steps[device][idx].Place = &plan.Placed{Group: group, Variants: slices.Clone(call.backends)}
	}
	b.p.Placement = append(b.p.Placement, plan.PlaceGroup{Label: k.Label, Pos: posOf(k),
		Candidates: append(slices.Clone(call.backends), plan.Generated), Chosen: plan.Generated})
	return group, nil
}

// libraryCall is k's sum as a library's call, when one can make it: a
// strided matrix product on every backend, else a convolution on those
// that have them.
func (b *builder) libraryCall(k *kernel.Kernel) (libraryCall, bool) {
	if s, ok := k.StridedGEMM(); ok {
		if gemm, ok := gemmCall(s); ok {
			return libraryCall{backends: b.gemmBackends(), flops: gemm.FLOPs(), step: func(backend string, key any) (plan.Step, error) {
				c := *gemm
				c.Backend = backend
				return plan.Step{GEMM: &c}, b.bindOperands(k, []*int{&c.A.Buffer, &c.B.Buffer, &c.C.Buffer}, k.Args[s.A.Arg].Key, k.Args[s.B.Arg].Key, key)
			}}, true
		}
	}
	if cv, ok := k.Convolution(); ok {
		var backends []string
		for _, name := range b.backends {
			if hostlib.RunsConvolutions(name) {
				backends = append(backends, name)
			}
		}
		return libraryCall{backends: backends, flops: cv.Call.FLOPs(), step: func(backend string, key any) (plan.Step, error) {
			c := cv.Call
			c.Backend = backend
			return plan.Step{Conv: &c}, b.bindOperands(k, []*int{&c.X.Buffer, &c.W.Buffer, &c.Y.Buffer}, k.Args[cv.X].Key, k.Args[cv.W].Key, key)
		}}, true
	}
	return libraryCall{}, false
}

// gemmBackends are the backends offered a GEMM: every one, but cuBLAS
// only in the f32 and tf32 modes, which its math modes compute (f32, or
// TF32 tensor cores); the modes that round operands to 16 bits get the
// generated tensor-core kernels.
func (b *builder) gemmBackends() []string {
	if b.p.Precision == precision.F32 || b.p.Precision == precision.TF32 {
		return b.backends
	}
	return slices.DeleteFunc(slices.Clone(b.backends), func(name string) bool { return name == plan.CUBLAS })
}

// gemmCall is the call of strided product s, its library and buffers
// not yet set; ok is false when a library cannot make it (a layout BLAS
// does not read, results of a batch that interleave, a step backwards:
// plan.GEMMCall.Check).
func gemmCall(s *kernel.Strided) (*plan.GEMMCall, bool) {
	matrix := func(m kernel.StridedMatrix) plan.Matrix {
		return plan.Matrix{Offset: m.Offset, Row: m.Row, Col: m.Col, Batch: m.Batch}
	}
	call := &plan.GEMMCall{Backend: "any", M: s.M, N: s.N, K: s.K, Batch: s.Batch, A: matrix(s.A), B: matrix(s.B), C: matrix(s.C)}
	return call, call.Check() == nil
}

// bindOperands sets each of ids to the buffer of the key at its place, and
// touches them: a library call's operands, arguments of kernel k.
func (b *builder) bindOperands(k *kernel.Kernel, ids []*int, keys ...any) error {
	for i, key := range keys {
		id, ok := b.bufferOf[key]
		if !ok {
			return fmt.Errorf("%s: argument %v has no buffer", k.Label, key)
		}
		*ids[i] = id
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
