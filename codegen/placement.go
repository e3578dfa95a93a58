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
	conv     bool // the step is a convolution (a library may add post-ops)
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
	var post *plan.PostOps
	if call.conv {
		var err error
		if post, err = b.postOps(k); err != nil {
			return -1, err
		}
	}
	var unfused []string // the backends whose call leaves the epilogue to a kernel
	for _, backend := range call.backends {
		key := any(k.Out().Key)
		// The host's libraries with convolutions (oneDNN) run their
		// post-ops; a GPU's (cuDNN) do not.
		fused := k.SumOnly() || post != nil && hostlib.RunsConvolutions(backend)
		if !fused {
			key = productKey{k}
			if len(unfused) == 0 {
				b.buffer(key, k.Label+" product", device, lang.F32, k.Shape, plan.RoleWorkspace)
			}
			unfused = append(unfused, backend)
		}
		s, err := call.step(backend, key)
		if err != nil {
			return -1, err
		}
		if s.Conv != nil && fused && !k.SumOnly() {
			s.Conv.Post = post
		}
		s.Op, s.Label, s.Pos = plan.Library, k.Label, posOf(k)
		s.Place = &plan.Placed{Group: group, Variants: []string{backend}}
		b.addStep(device, false, s)
	}
	if len(unfused) > 0 && !k.SumOnly() {
		idx, err := b.launch(device, false, k.ReadSum(productKey{k}))
		if err != nil {
			return -1, err
		}
		b.p.Steps[device][idx].Place = &plan.Placed{Group: group, Variants: unfused}
	}
	b.p.Placement = append(b.p.Placement, plan.PlaceGroup{Label: k.Label, Pos: posOf(k),
		Candidates: append(slices.Clone(call.backends), plan.Generated), Chosen: plan.Generated})
	return group, nil
}

// postOps is the epilogue of convolution kernel k as its call's
// post-ops (a bias along the output channels, then bounds:
// kernel.PostOps), its bias bound to its buffer; nil when the epilogue
// is no such chain. A library with them writes k's output in its call,
// where the epilogue kernel read the product back and wrote the output
// again.
func (b *builder) postOps(k *kernel.Kernel) (*plan.PostOps, error) {
	if k.SumOnly() {
		return nil, nil
	}
	po, ok := k.PostOps()
	if !ok || po.Bias >= 0 && po.BiasVar != 1 {
		return nil, nil
	}
	post := &plan.PostOps{Acts: po.Acts}
	if po.Bias >= 0 {
		post.Bias = &plan.Dense{}
		if err := b.bindOperands(k, []*int{&post.Bias.Buffer}, k.Args[po.Bias].Key); err != nil {
			return nil, err
		}
	}
	return post, nil
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
		return libraryCall{backends: b.convBackends(&cv.Call), flops: cv.Call.FLOPs(), step: func(backend string, key any) (plan.Step, error) {
			c := cv.Call
			c.Backend = backend
			return plan.Step{Conv: &c}, b.bindOperands(k, []*int{&c.X.Buffer, &c.W.Buffer, &c.Y.Buffer}, k.Args[cv.X].Key, k.Args[cv.W].Key, key)
		}, conv: true}, true
	}
	return libraryCall{}, false
}

// gemmBackends are the backends offered a GEMM: the host's libraries,
// and cuBLAS in the modes its math computes (gpuMode).
func (b *builder) gemmBackends() []string {
	return slices.DeleteFunc(slices.Clone(b.backends), func(name string) bool {
		return name == plan.CUDNN || name == plan.CUBLAS && !b.gpuMode()
	})
}

// convBackends are the backends offered convolution c: the host's
// libraries with convolutions, and cuDNN where it can compute c, in the
// modes its math computes (gpuMode).
func (b *builder) convBackends(c *plan.ConvCall) []string {
	var out []string
	for _, name := range b.backends {
		if hostlib.RunsConvolutions(name) || name == plan.CUDNN && b.gpuMode() && c.RunsOnCUDNN() {
			out = append(out, name)
		}
	}
	return out
}

// gpuMode reports whether the GPU's libraries compute the plan's mode
// (GPULibrariesCompute).
func (b *builder) gpuMode() bool { return GPULibrariesCompute(b.p.Precision) }

// GPULibrariesCompute reports whether a GPU's libraries compute mode m:
// f32 (no tensor cores) and tf32 (TF32 tensor cores). The modes that
// round operands to 16 bits get the generated tensor-core kernels.
func GPULibrariesCompute(m precision.Mode) bool {
	return m == precision.F32 || m == precision.TF32
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
