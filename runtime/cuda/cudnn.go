package cuda

import (
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"

	"tofuc/lang"
	"tofuc/lang/precision"
	"tofuc/runtime/plan"
)

// cuDNN's enumerations (cudnn_*.h; the same in cuDNN 8 and 9, whose
// status numbers differ: only success, 0, is compared, and the
// library's own message shown).
const (
	cudnnFloat            = 0 // CUDNN_DATA_FLOAT
	cudnnNCHW             = 0 // CUDNN_TENSOR_NCHW
	cudnnCrossCorrelation = 1 // CUDNN_CROSS_CORRELATION: no flipped kernel
	cudnnDefaultMath      = 0 // CUDNN_DEFAULT_MATH: TF32 allowed
	cudnnFMAMath          = 3 // CUDNN_FMA_MATH: no tensor cores
	cudnnAlgosAsked       = 8
)

// maxWorkspace bounds the workspace of a convolution's algorithm: an
// algorithm asking for more is passed over (FFT ones can ask for
// gigabytes at large batches).
const maxWorkspace = 1 << 30

// algoPerf is a cudnnConvolutionFwdAlgoPerf_t.
type algoPerf struct {
	algo, status int32
	time         float32
	memory       uint64
	determinism  int32
	mathType     int32
	reserved     [3]int32
}

// cudnnAPI is the part of cuDNN's legacy convolution API a plan's
// convolutions call (each function takes at most 13 arguments: purego
// passes 15).
type cudnnAPI struct {
	create          func(h *uintptr) int32
	destroy         func(h uintptr) int32
	setStream       func(h, stream uintptr) int32
	createTensor    func(d *uintptr) int32
	setTensor       func(d uintptr, dtype, n int32, dims, strides *int32) int32
	destroyTensor   func(d uintptr) int32
	createFilter    func(d *uintptr) int32
	setFilter       func(d uintptr, dtype, format, n int32, dims *int32) int32
	destroyFilter   func(d uintptr) int32
	createConv      func(d *uintptr) int32
	setConv         func(d uintptr, n int32, pads, strides, dilations *int32, mode, dtype int32) int32
	setGroups       func(d uintptr, groups int32) int32
	setMath         func(d uintptr, math int32) int32
	destroyConv     func(d uintptr) int32
	getAlgorithm    func(h, x, w, conv, y uintptr, asked int32, returned *int32, perf *algoPerf) int32
	workspaceSize   func(h, x, w, conv, y uintptr, algo int32, bytes *uint64) int32
	forward         func(h uintptr, alpha *float32, x uintptr, xp uint64, w uintptr, wp uint64, conv uintptr, algo int32, ws uint64, wsBytes uint64, beta *float32, y uintptr, yp uint64) int32
	getErrorMessage func(status int32) uintptr
}

// cudnnLib loads cuDNN: $TOFUC_LIBCUDNN, else cuDNN 9's, then 8's.
var cudnnLib = &gpuLibrary[cudnnAPI]{label: "backend " + plan.CUDNN, where: toolkitOrWheels, what: "cuDNN", env: "TOFUC_LIBCUDNN",
	files: []string{"libcudnn.so.9", "libcudnn.so.8"},
	symbols: func(api *cudnnAPI) []symbol {
		return []symbol{
			{&api.create, "cudnnCreate"}, {&api.destroy, "cudnnDestroy"}, {&api.setStream, "cudnnSetStream"},
			{&api.getErrorMessage, "cudnnGetErrorString"},
			{&api.createTensor, "cudnnCreateTensorDescriptor"}, {&api.setTensor, "cudnnSetTensorNdDescriptor"},
			{&api.destroyTensor, "cudnnDestroyTensorDescriptor"},
			{&api.createFilter, "cudnnCreateFilterDescriptor"}, {&api.setFilter, "cudnnSetFilterNdDescriptor"},
			{&api.destroyFilter, "cudnnDestroyFilterDescriptor"},
			{&api.createConv, "cudnnCreateConvolutionDescriptor"}, {&api.setConv, "cudnnSetConvolutionNdDescriptor"},
			{&api.setGroups, "cudnnSetConvolutionGroupCount"}, {&api.setMath, "cudnnSetConvolutionMathType"},
			{&api.destroyConv, "cudnnDestroyConvolutionDescriptor"},
			{&api.getAlgorithm, "cudnnGetConvolutionForwardAlgorithm_v7"},
			{&api.workspaceSize, "cudnnGetConvolutionForwardWorkspaceSize"}, {&api.forward, "cudnnConvolutionForward"},
		}
	}}

// status is an error for a cuDNN status other than success, with the
// library's own words.
func (api *cudnnAPI) status(call string, st int32) error {
	if st == 0 {
		return nil
	}
	return fmt.Errorf("%s: %s (%d)", call, goString(api.getErrorMessage(st)), st)
}

// cudnnConv is one convolution's descriptors on a GPU, its algorithm
// and workspace.
type cudnnConv struct {
	x, y, w, conv uintptr
	algo          int32
	workspace     uint64 // device memory, 0 when it needs none
	wsBytes       uint64
}

// cudnnMath is the convolutions' math type in a plan's precision: no
// tensor cores in f32 (as cuBLAS's default math), TF32 in tf32.
func cudnnMath(mode precision.Mode) int32 {
	if mode == precision.TF32 {
		return cudnnDefaultMath
	}
	return cudnnFMAMath
}

// cudnnHandle is the cuDNN handle of c's GPU, made on first use with c's
// context current.
func (c *context) cudnnHandle(api *cudnnAPI) (uintptr, error) {
	if c.dnn != 0 && c.dnnAPI == api {
		return c.dnn, nil
	}
	if err := c.destroyCUDNN(); err != nil {
		return 0, err
	}
	var h uintptr
	if err := api.status("cudnnCreate", api.create(&h)); err != nil {
		return 0, err
	}
	c.dnn, c.dnnAPI, c.convs = h, api, map[string]*cudnnConv{}
	return h, nil
}

// destroyCUDNN frees c's convolutions and cuDNN handle, if it has them,
// with c's context current.
func (c *context) destroyCUDNN() error {
	if c.dnn == 0 {
		return nil
	}
	var errs []error
	for _, cv := range c.convs {
		errs = append(errs, c.free(cv))
	}
	errs = append(errs, c.dnnAPI.status("cudnnDestroy", c.dnnAPI.destroy(c.dnn)))
	c.dnn, c.dnnAPI, c.convs = 0, nil, nil
	return errors.Join(errs...)
}

// free destroys cv's descriptors and frees its workspace, those made.
func (c *context) free(cv *cudnnConv) error {
	api := c.dnnAPI
	var errs []error
	for _, d := range []struct {
		call    string
		destroy func(uintptr) int32
		d       uintptr
	}{{"cudnnDestroyTensorDescriptor", api.destroyTensor, cv.x}, {"cudnnDestroyTensorDescriptor", api.destroyTensor, cv.y},
		{"cudnnDestroyFilterDescriptor", api.destroyFilter, cv.w}, {"cudnnDestroyConvolutionDescriptor", api.destroyConv, cv.conv}} {
		if d.d != 0 {
			errs = append(errs, api.status(d.call, d.destroy(d.d)))
		}
	}
	if cv.workspace != 0 {
		errs = append(errs, c.drv.check("cuMemFree", c.drv.cuMemFree(cv.workspace)))
	}
	return errors.Join(errs...)
}

// convKey keys a convolution's descriptors: its call's shape, not its
// buffers.
func convKey(g *plan.ConvCall) string {
	shape := *g
	shape.X, shape.W, shape.Y = plan.Dense{}, plan.Dense{}, plan.Dense{}
	b, _ := json.Marshal(shape)
	return string(b)
}

// convolution is call g's descriptors, algorithm and workspace on c's
// GPU (handle h), made on first use with c's context current; kept only
// when all of them were made.
func (c *context) convolution(api *cudnnAPI, h uintptr, g *plan.ConvCall) (*cudnnConv, error) {
	key := convKey(g)
	if cv, ok := c.convs[key]; ok {
		return cv, nil
	}
	if !g.RunsOnCUDNN() {
		return nil, fmt.Errorf("cuDNN cannot compute the convolution: pads %v and %v, or more than 2^31 elements", g.PadsBegin, g.PadsEnd)
	}
	cv := &cudnnConv{}
	err := c.describe(api, cv, g)
	if err == nil {
		err = c.algorithm(api, h, cv)
	}
	if err != nil {
		return nil, errors.Join(err, c.free(cv))
	}
	c.convs[key] = cv
	return cv, nil
}

// algorithm chooses cv's algorithm, the first cuDNN ranks that succeeds
// within maxWorkspace in the plan's math (no tensor cores in f32), sets
// its math type on the descriptor, and allocates its workspace.
func (c *context) algorithm(api *cudnnAPI, h uintptr, cv *cudnnConv) error {
	var perf [cudnnAlgosAsked]algoPerf
	var n int32
	if err := api.status("cudnnGetConvolutionForwardAlgorithm_v7", api.getAlgorithm(h, cv.x, cv.w, cv.conv, cv.y, cudnnAlgosAsked, &n, &perf[0])); err != nil {
		return err
	}
	i := slices.IndexFunc(perf[:min(n, cudnnAlgosAsked)], func(p algoPerf) bool {
		return p.status == 0 && p.memory <= maxWorkspace && (p.mathType == cudnnFMAMath || c.plan.Precision == precision.TF32)
	})
	if i < 0 {
		return fmt.Errorf("cuDNN offers no algorithm for the convolution with a workspace up to %d bytes in %s", maxWorkspace, c.plan.Precision)
	}
	cv.algo = perf[i].algo
	if err := api.status("cudnnSetConvolutionMathType", api.setMath(cv.conv, perf[i].mathType)); err != nil {
		return err
	}
	if err := api.status("cudnnGetConvolutionForwardWorkspaceSize", api.workspaceSize(h, cv.x, cv.w, cv.conv, cv.y, cv.algo, &cv.wsBytes)); err != nil {
		return err
	}
	if cv.wsBytes == 0 {
		return nil
	}
	return c.drv.check("cuMemAlloc", c.drv.cuMemAlloc(&cv.workspace, cv.wsBytes))
}

// describe makes cv's descriptors of call g: dense NCHW tensors, the
// filter [O, C/groups, *kernel], a 1-D convolution as a 2-D one of
// height 1 (cuDNN's tensors have 4 or 5 dimensions).
func (c *context) describe(api *cudnnAPI, cv *cudnnConv, g *plan.ConvCall) error {
	xs, ws, ys := g.Shapes()
	pads, strides, dilations := slices.Clone(g.PadsBegin), slices.Clone(g.Strides), slices.Clone(g.Dilations)
	if len(g.In) == 1 {
		xs, ws, ys = slices.Insert(xs, 2, 1), slices.Insert(ws, 2, 1), slices.Insert(ys, 2, 1)
		pads, strides, dilations = slices.Insert(pads, 0, 0), slices.Insert(strides, 0, 1), slices.Insert(dilations, 0, 1)
	}
	for _, t := range []struct {
		d     *uintptr
		shape []int64
	}{{&cv.x, xs}, {&cv.y, ys}} {
		if err := api.status("cudnnCreateTensorDescriptor", api.createTensor(t.d)); err != nil {
			return err
		}
		dims, dense := int32s(t.shape), int32s(lang.RowMajor(t.shape))
		if err := api.status("cudnnSetTensorNdDescriptor", api.setTensor(*t.d, cudnnFloat, int32(len(dims)), &dims[0], &dense[0])); err != nil {
			return err
		}
	}
	if err := api.status("cudnnCreateFilterDescriptor", api.createFilter(&cv.w)); err != nil {
		return err
	}
	wdims := int32s(ws)
	if err := api.status("cudnnSetFilterNdDescriptor", api.setFilter(cv.w, cudnnFloat, cudnnNCHW, int32(len(wdims)), &wdims[0])); err != nil {
		return err
	}
	if err := api.status("cudnnCreateConvolutionDescriptor", api.createConv(&cv.conv)); err != nil {
		return err
	}
	p, s, d := int32s(pads), int32s(strides), int32s(dilations)
	if err := api.status("cudnnSetConvolutionNdDescriptor", api.setConv(cv.conv, int32(len(p)), &p[0], &s[0], &d[0], cudnnCrossCorrelation, cudnnFloat)); err != nil {
		return err
	}
	if err := api.status("cudnnSetConvolutionGroupCount", api.setGroups(cv.conv, int32(max(g.Group, 1)))); err != nil {
		return err
	}
	return api.status("cudnnSetConvolutionMathType", api.setMath(cv.conv, cudnnMath(c.plan.Precision)))
}

// conv enqueues convolution g, prepared (PrepareLibrary), on v's
// stream, its operands in the device buffers at x, w and y.
func (v *device) conv(g *plan.ConvCall, x, w, y uint64) error {
	api, h := v.c.dnnAPI, v.c.dnn
	cv, ok := v.c.convs[convKey(g)]
	if !ok {
		return fmt.Errorf("the convolution %s was not prepared on %s", convKey(g), v.Name())
	}
	return v.c.do(func() error {
		if err := api.status("cudnnSetStream", api.setStream(h, v.stream)); err != nil {
			return err
		}
		alpha, beta := float32(1), float32(0)
		err := api.status("cudnnConvolutionForward", api.forward(h, &alpha, cv.x, x+4*uint64(g.X.Offset), cv.w, w+4*uint64(g.W.Offset),
			cv.conv, cv.algo, cv.workspace, cv.wsBytes, &beta, cv.y, y+4*uint64(g.Y.Offset)))
		runtime.KeepAlive(&alpha)
		runtime.KeepAlive(&beta)
		return err
	})
}

func int32s(xs []int64) []int32 {
	out := make([]int32, len(xs))
	for i, x := range xs {
		out[i] = int32(x)
	}
	return out
}
