package cuda

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/ebitengine/purego"

	"tofuc/lang/precision"
	"tofuc/runtime/plan"
)

// cuDNN's enumerations (cudnn_*.h of cuDNN 8 and 9).
const (
	cudnnFloat              = 0 // CUDNN_DATA_FLOAT
	cudnnNCHW               = 0 // CUDNN_TENSOR_NCHW
	cudnnCrossCorrelation   = 1 // CUDNN_CROSS_CORRELATION: no flipped kernel
	cudnnDefaultMath        = 0 // CUDNN_DEFAULT_MATH: TF32 allowed
	cudnnFMAMath            = 3 // CUDNN_FMA_MATH: no tensor cores
	cudnnAlgosAsked         = 8
	cudnnStatusSuccess      = 0
	cudnnStatusNotSupported = 9
)

// cudnnFiles are the libraries tried in turn, where $TOFUC_LIBCUDNN
// names none: cuDNN 9's, then 8's (the toolkit's lib64, or PyTorch's
// wheels under site-packages/nvidia/cudnn/lib).
var cudnnFiles = []string{"libcudnn.so.9", "libcudnn.so.8"}

// algoPerf is a cudnnConvolutionFwdAlgoPerf_t.
type algoPerf struct {
	algo, status int32
	time         float32
	memory       uint64
	determinism  int32
	mathType     int32
	reserved     [3]int32
}

// cudnnAPI is the loaded cuDNN library: the functions of its legacy
// convolution API a plan's convolutions call (each takes at most 13
// arguments: purego passes 15).
type cudnnAPI struct {
	Path    string
	Version string

	create          func(h *uintptr) int32
	destroy         func(h uintptr) int32
	setStream       func(h, stream uintptr) int32
	getVersion      func() uint64
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

var (
	cudnnMu    sync.Mutex
	cudnnLoads = map[string]cudnnLoad{} // per list of files tried, as cublasLoads
)

type cudnnLoad struct {
	api *cudnnAPI
	err error
}

// loadCUDNN loads cuDNN: $TOFUC_LIBCUDNN, else the first of cudnnFiles
// that loads.
func loadCUDNN() (*cudnnAPI, error) {
	files := cudnnFiles
	if p := os.Getenv("TOFUC_LIBCUDNN"); p != "" {
		files = []string{p}
	}
	key := strings.Join(files, "\x00")
	cudnnMu.Lock()
	defer cudnnMu.Unlock()
	if l, ok := cudnnLoads[key]; ok {
		return l.api, l.err
	}
	var errs []string
	for _, f := range files {
		api, err := openCUDNN(f)
		if err == nil {
			cudnnLoads[key] = cudnnLoad{api: api}
			return api, nil
		}
		errs = append(errs, err.Error())
	}
	err := fmt.Errorf("backend %s: no cuDNN (%s); the CUDA toolkit's lib64 and PyTorch's wheels (site-packages/nvidia/cudnn/lib) have it, for LD_LIBRARY_PATH", plan.CUDNN, strings.Join(errs, "; "))
	cudnnLoads[key] = cudnnLoad{err: err}
	return nil, err
}

// openCUDNN loads the cuDNN library at path and binds its functions.
func openCUDNN(path string) (*cudnnAPI, error) {
	runtime.LockOSThread() // dlerror's message is the thread's
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
	runtime.UnlockOSThread()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	api := &cudnnAPI{Path: path}
	for _, s := range []struct {
		fn   any
		name string
	}{
		{&api.create, "cudnnCreate"}, {&api.destroy, "cudnnDestroy"}, {&api.setStream, "cudnnSetStream"},
		{&api.getVersion, "cudnnGetVersion"}, {&api.getErrorMessage, "cudnnGetErrorString"},
		{&api.createTensor, "cudnnCreateTensorDescriptor"}, {&api.setTensor, "cudnnSetTensorNdDescriptor"},
		{&api.destroyTensor, "cudnnDestroyTensorDescriptor"},
		{&api.createFilter, "cudnnCreateFilterDescriptor"}, {&api.setFilter, "cudnnSetFilterNdDescriptor"},
		{&api.destroyFilter, "cudnnDestroyFilterDescriptor"},
		{&api.createConv, "cudnnCreateConvolutionDescriptor"}, {&api.setConv, "cudnnSetConvolutionNdDescriptor"},
		{&api.setGroups, "cudnnSetConvolutionGroupCount"}, {&api.setMath, "cudnnSetConvolutionMathType"},
		{&api.destroyConv, "cudnnDestroyConvolutionDescriptor"},
		{&api.getAlgorithm, "cudnnGetConvolutionForwardAlgorithm_v7"},
		{&api.workspaceSize, "cudnnGetConvolutionForwardWorkspaceSize"}, {&api.forward, "cudnnConvolutionForward"},
	} {
		addr, err := purego.Dlsym(h, s.name)
		if err != nil {
			return nil, fmt.Errorf("%s has no %s", path, s.name)
		}
		purego.RegisterFunc(s.fn, addr)
	}
	v := api.getVersion()
	if v >= 90000 { // cuDNN 9: major·10000 + minor·100 + patch
		api.Version = fmt.Sprintf("cuDNN %d.%d.%d", v/10000, v%10000/100, v%100)
	} else { // cuDNN 8: major·1000 + minor·100 + patch
		api.Version = fmt.Sprintf("cuDNN %d.%d.%d", v/1000, v%1000/100, v%100)
	}
	return api, nil
}

// status is an error for a cuDNN status other than success, with the
// library's own words.
func (api *cudnnAPI) status(call string, st int32) error {
	if st == cudnnStatusSuccess {
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
	if err := api.status("cudnnCreate", api.create(&c.dnn)); err != nil {
		c.dnn = 0
		return 0, err
	}
	c.dnnAPI, c.convs = api, map[string]*cudnnConv{}
	return c.dnn, nil
}

// destroyCUDNN frees c's convolutions and cuDNN handle, if it has them,
// with c's context current.
func (c *context) destroyCUDNN() error {
	if c.dnn == 0 {
		return nil
	}
	api := c.dnnAPI
	var errs []error
	for _, cv := range c.convs {
		errs = append(errs, api.status("cudnnDestroyTensorDescriptor", api.destroyTensor(cv.x)),
			api.status("cudnnDestroyTensorDescriptor", api.destroyTensor(cv.y)),
			api.status("cudnnDestroyFilterDescriptor", api.destroyFilter(cv.w)),
			api.status("cudnnDestroyConvolutionDescriptor", api.destroyConv(cv.conv)))
		if cv.workspace != 0 {
			errs = append(errs, c.drv.check("cuMemFree", c.drv.cuMemFree(cv.workspace)))
		}
	}
	errs = append(errs, api.status("cudnnDestroy", api.destroy(c.dnn)))
	c.dnn, c.dnnAPI, c.convs = 0, nil, nil
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// convolution is call g's descriptors, algorithm and workspace on c's
// GPU, made on first use (a call's key: its shape, not its buffers).
func (c *context) convolution(api *cudnnAPI, h uintptr, g *plan.ConvCall) (*cudnnConv, error) {
	shape := *g
	shape.X, shape.W, shape.Y = plan.Dense{}, plan.Dense{}, plan.Dense{}
	b, _ := json.Marshal(shape)
	if cv, ok := c.convs[string(b)]; ok {
		return cv, nil
	}
	cv := &cudnnConv{}
	if err := c.describe(api, cv, g); err != nil {
		return nil, err
	}
	c.convs[string(b)] = cv
	var perf [cudnnAlgosAsked]algoPerf
	var n int32
	if err := api.status("cudnnGetConvolutionForwardAlgorithm", api.getAlgorithm(h, cv.x, cv.w, cv.conv, cv.y, cudnnAlgosAsked, &n, &perf[0])); err != nil {
		return nil, err
	}
	i := slices.IndexFunc(perf[:n], func(p algoPerf) bool { return p.status == cudnnStatusSuccess })
	if i < 0 {
		return nil, fmt.Errorf("cuDNN has no algorithm for the convolution %s", b)
	}
	cv.algo = perf[i].algo
	if err := api.status("cudnnGetConvolutionForwardWorkspaceSize", api.workspaceSize(h, cv.x, cv.w, cv.conv, cv.y, cv.algo, &cv.wsBytes)); err != nil {
		return nil, err
	}
	if cv.wsBytes > 0 {
		return cv, c.drv.check("cuMemAlloc", c.drv.cuMemAlloc(&cv.workspace, cv.wsBytes))
	}
	return cv, nil
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
		dims, dense := int32s(t.shape), int32s(denseStrides(t.shape))
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

// conv enqueues convolution g on v's stream, its operands in the device
// buffers at x, w and y.
func (v *device) conv(api *cudnnAPI, g *plan.ConvCall, x, w, y uint64) error {
	if !g.RunsOnCUDNN() {
		return fmt.Errorf("cuDNN cannot compute the convolution: pads %v and %v, or more than 2^31 elements", g.PadsBegin, g.PadsEnd)
	}
	return v.c.do(func() error {
		h, err := v.c.cudnnHandle(api)
		if err != nil {
			return err
		}
		cv, err := v.c.convolution(api, h, g)
		if err != nil {
			return err
		}
		if err := api.status("cudnnSetStream", api.setStream(h, v.stream)); err != nil {
			return err
		}
		alpha, beta := float32(1), float32(0)
		err = api.status("cudnnConvolutionForward", api.forward(h, &alpha, cv.x, x+4*uint64(g.X.Offset), cv.w, w+4*uint64(g.W.Offset),
			cv.conv, cv.algo, cv.workspace, cv.wsBytes, &beta, cv.y, y+4*uint64(g.Y.Offset)))
		runtime.KeepAlive(&alpha)
		runtime.KeepAlive(&beta)
		return err
	})
}

// denseStrides are the row-major strides of shape.
func denseStrides(shape []int64) []int64 {
	out := make([]int64, len(shape))
	stride := int64(1)
	for i := len(shape) - 1; i >= 0; i-- {
		out[i] = stride
		stride *= shape[i]
	}
	return out
}

func int32s(xs []int64) []int32 {
	out := make([]int32, len(xs))
	for i, x := range xs {
		out[i] = int32(x)
	}
	return out
}
